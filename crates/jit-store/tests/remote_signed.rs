//! Signed artifacts and read-only readers on a real `redis-server` and on a
//! shared folder: a builder signs what it publishes; a reader that holds
//! only public keys accepts what a trusted key signed and refuses an entry
//! signed by a key it does not trust, one tampered with (its signature
//! kept, or signed again by another key), and one published by a holder
//! of the shared secret (unsigned), each counted by its reason; and a
//! read-only reader never writes: on Redis, the server's command
//! statistics show no write command while readers run (and the reader is
//! `docs/cluster.md`'s read-only ACL user, created as the page writes it);
//! on the folder, nothing in it changes.

#![cfg(not(miri))] // sockets, a server process, ring's C

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, SystemTime};

use jit_store::{
    ArtifactStore, Fetched, RedisStore, RemoteMode, RemoteOptions, RemoteStats, RemoteStore,
    RemoteTier, RemoteTimeouts, RemoteValue, Secret, SharedFolderStore, SigningKey, StoreConfig,
    Trust, TrustedKeys,
};
use support::{fetch_built_by, key};
use test_support::redis::{documented_acl, RedisServer, Reply};

/// The page, and how its read-only ACL line starts.
const PAGE: &str = include_str!("../../../docs/cluster.md");
const READER_LINE: &str = "user jit-reader ";

/// The namespace the page's ACL lines confine their users to.
const NAMESPACE: &str = "prod";

fn options(mode: RemoteMode) -> RemoteOptions {
    let mut options = RemoteOptions::default();
    options.namespace = NAMESPACE.parse().unwrap();
    options.mode = mode;
    options
}

/// Where the tiers of one test keep their entries.
#[derive(Clone, Copy)]
enum Backend<'a> {
    /// A Redis server at this address.
    Redis(&'a str),
    /// A shared folder.
    Folder(&'a Path),
}

impl Backend<'_> {
    fn open(self) -> Box<dyn RemoteStore> {
        match self {
            Backend::Redis(url) => {
                let mut timeouts = RemoteTimeouts::default();
                timeouts.connect = Duration::from_secs(2);
                timeouts.request = Duration::from_secs(2);
                Box::new(RedisStore::new(url, timeouts).unwrap())
            }
            Backend::Folder(folder) => Box::new(SharedFolderStore::new(folder).unwrap()),
        }
    }
}

fn tier(backend: Backend<'_>, trust: Trust, mode: RemoteMode) -> RemoteTier {
    RemoteTier::with_trust(backend.open(), trust, options(mode)).unwrap()
}

/// Publishes `program` (`built by <who>`) through a tier of `trust`.
fn publish(backend: Backend<'_>, trust: Trust, program: &str, who: &str) {
    let store = ArtifactStore::disabled().with_remote(tier(backend, trust, RemoteMode::ReadWrite));
    assert_eq!(fetch_built_by(&store, program, who).1, Fetched::Built);
    drop(store); // waits for the publish
}

/// The keys of the test: the builder's and a stranger's.
fn builder() -> SigningKey {
    SigningKey::from_seed(&[1; 32])
}

fn stranger() -> SigningKey {
    SigningKey::from_seed(&[2; 32])
}

/// Writes every entry the readers then meet, as builders and attackers
/// would: `f` signed by the builder; `g` signed by a stranger; `h`
/// tampered with and signed again by the stranger; `k` signed by the
/// builder, then one byte of its artifact changed; `u` published by a
/// holder of the shared secret and copied under the signed entries' name.
fn publish_everything(backend: Backend<'_>) {
    let trusted = TrustedKeys::new([builder().public_key()]);
    let by_builder = || Trust::builder(builder(), trusted.clone());
    let by_stranger = || Trust::builder(stranger(), TrustedKeys::default());
    publish(backend, by_builder(), "f", "the builder");
    publish(backend, by_stranger(), "g", "a stranger");
    publish(backend, by_stranger(), "h", "the builder, tampered with");
    publish(backend, by_builder(), "k", "the builder");
    let secret = Secret::from_bytes([3; Secret::LEN]);
    publish(
        backend,
        Trust::Shared(secret.clone()),
        "u",
        "a holder of the secret",
    );

    let signed = tier(backend, by_builder(), RemoteMode::ReadWrite);
    let shared = tier(backend, Trust::Shared(secret), RemoteMode::ReadWrite);
    let store = backend.open();
    let value = |name: &str| match store.get(name, 1 << 20).unwrap() {
        RemoteValue::Found(value) => value,
        other => panic!("{name}: {other:?}"),
    };
    let mut k = value(&signed.remote_key(&key("k")));
    *k.last_mut().unwrap() ^= 1;
    store.put(&signed.remote_key(&key("k")), &k).unwrap();
    let u = value(&shared.remote_key(&key("u")));
    store.put(&signed.remote_key(&key("u")), &u).unwrap();
}

/// A reader with public keys only (`trusted`), a disk cache in `folder`,
/// meets every entry of [`publish_everything`] twice; its counters.
fn read_everything(backend: Backend<'_>, trusted: TrustedKeys, folder: &Path) -> RemoteStats {
    let disk = ArtifactStore::open(StoreConfig::at(folder)).unwrap();
    let tier = tier(backend, Trust::reader(trusted), RemoteMode::ReadWrite);
    assert!(
        tier.read_only(),
        "a reader with no signing key never writes"
    );
    let reader = disk.with_remote(tier);
    assert_eq!(
        fetch_built_by(&reader, "f", "the reader"),
        ("built by the builder".to_owned(), Fetched::Remote),
        "signed by a trusted key"
    );
    for program in ["g", "h", "k", "u"] {
        assert_eq!(
            fetch_built_by(&reader, program, "the reader"),
            ("built by the reader".to_owned(), Fetched::Built),
            "{program} is refused and built here"
        );
    }
    // What it built stays in its own disk cache: the second time, nothing
    // is fetched.
    for program in ["f", "g", "h", "k", "u"] {
        assert_eq!(
            fetch_built_by(&reader, program, "the reader").1,
            Fetched::Disk
        );
    }
    reader.remote_stats().unwrap()
}

fn assert_refused_by_reason(stats: &RemoteStats) {
    assert_eq!(
        (
            stats.hits,
            stats.rejected,
            stats.unknown_signer,
            stats.unauthenticated,
            stats.unsigned
        ),
        (1, 4, 2, 1, 1),
        "f taken; g, h by unknown signers, k unverified, u unsigned: {stats:?}"
    );
    assert_eq!(
        (stats.errors, stats.publishes, stats.leases_taken),
        (0, 0, 0),
        "{stats:?}"
    );
}

#[test]
fn a_redis_reader_with_public_keys_takes_only_what_a_trusted_builder_signed_and_never_writes() {
    let server = RedisServer::start();
    let (user, rules) = documented_acl(PAGE, READER_LINE);
    let mut setuser: Vec<&[u8]> = vec![b"ACL", b"SETUSER", user.as_bytes()];
    setuser.extend(rules.iter().map(|rule| rule.as_bytes()));
    let mut admin = server.connection();
    let answer = admin.command(&setuser).unwrap();
    assert!(matches!(answer, Reply::Status(_)), "{answer:?}");
    let password = rules
        .iter()
        .find_map(|rule| rule.strip_prefix('>'))
        .expect("the line names a password");
    let reader_url = format!("redis://{user}:{password}@127.0.0.1:{}/0", server.port());

    let url = server.url();
    publish_everything(Backend::Redis(&url));
    admin.command(&[b"CONFIG", b"RESETSTAT"]).unwrap();

    let folder = tempfile::tempdir().unwrap();
    let trusted = TrustedKeys::new([builder().public_key()]);
    let stats = read_everything(Backend::Redis(&reader_url), trusted, folder.path());
    assert_refused_by_reason(&stats);

    // And a holder of the shared secret in read-only mode misses, builds,
    // and writes nothing either.
    let secret = Secret::from_bytes([3; Secret::LEN]);
    let shared = tier(
        Backend::Redis(&url),
        Trust::Shared(secret),
        RemoteMode::ReadOnly,
    );
    assert!(shared.read_only());
    let store = ArtifactStore::disabled().with_remote(shared);
    assert_eq!(fetch_built_by(&store, "new", "a reader").1, Fetched::Built);
    drop(store);

    let commands = admin.commands_run();
    let written: Vec<_> = commands
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "strlen" | "getrange" | "select" | "auth"))
        .filter(|(name, _)| !matches!(name.as_str(), "info" | "config|resetstat" | "config"))
        .collect();
    assert!(
        written.is_empty(),
        "readers only read; the server also ran {written:?} (all: {commands:?})"
    );
    assert!(
        commands
            .iter()
            .any(|(name, calls)| name == "getrange" && *calls > 0),
        "the readers did read: {commands:?}"
    );
}

#[test]
fn a_shared_folder_reader_with_public_keys_takes_only_what_a_trusted_builder_signed_and_never_writes(
) {
    let shared = tempfile::tempdir().unwrap();
    let backend = Backend::Folder(shared.path());
    publish_everything(backend);
    let before = listing(shared.path());

    let folder = tempfile::tempdir().unwrap();
    let trusted = TrustedKeys::new([builder().public_key()]);
    let stats = read_everything(backend, trusted, folder.path());
    assert_refused_by_reason(&stats);
    let store = ArtifactStore::disabled().with_remote(tier(
        backend,
        Trust::Shared(Secret::from_bytes([3; Secret::LEN])),
        RemoteMode::ReadOnly,
    ));
    assert_eq!(fetch_built_by(&store, "new", "a reader").1, Fetched::Built);
    drop(store);
    assert_eq!(
        listing(shared.path()),
        before,
        "nothing written, nothing touched"
    );
}

#[test]
fn a_builder_trusts_its_own_key_and_rotation_trusts_old_and_new() {
    let shared = tempfile::tempdir().unwrap();
    let backend = Backend::Folder(shared.path());
    let (old, new) = (builder(), stranger());
    publish(
        backend,
        Trust::builder(old.clone(), TrustedKeys::default()),
        "f",
        "old",
    );
    // The builder itself finds what it signed.
    let again = ArtifactStore::disabled().with_remote(tier(
        backend,
        Trust::builder(old.clone(), TrustedKeys::default()),
        RemoteMode::ReadWrite,
    ));
    assert_eq!(fetch_built_by(&again, "f", "old").1, Fetched::Remote);
    publish(
        backend,
        Trust::builder(new.clone(), TrustedKeys::default()),
        "g",
        "new",
    );
    // During a rotation readers trust both keys; after it, the new one only.
    let both = TrustedKeys::new([old.public_key(), new.public_key()]);
    let reader = ArtifactStore::disabled().with_remote(tier(
        backend,
        Trust::reader(both),
        RemoteMode::ReadOnly,
    ));
    assert_eq!(
        fetch_built_by(&reader, "f", "reader"),
        ("built by old".to_owned(), Fetched::Remote)
    );
    assert_eq!(
        fetch_built_by(&reader, "g", "reader"),
        ("built by new".to_owned(), Fetched::Remote)
    );
    let after = ArtifactStore::disabled().with_remote(tier(
        backend,
        Trust::reader(TrustedKeys::new([new.public_key()])),
        RemoteMode::ReadOnly,
    ));
    assert_eq!(
        fetch_built_by(&after, "f", "reader").1,
        Fetched::Built,
        "old key revoked"
    );
    assert_eq!(fetch_built_by(&after, "g", "reader").1, Fetched::Remote);
    assert_eq!(after.remote_stats().unwrap().unknown_signer, 1);
}

/// `folder` (under the name `.`: its modification time changes when a
/// file is made or deleted in it, a lock file say) and every file in it:
/// name, size and modification time.
fn listing(folder: &Path) -> BTreeMap<String, (u64, SystemTime)> {
    let described = |metadata: std::fs::Metadata| (metadata.len(), metadata.modified().unwrap());
    let mut listing: BTreeMap<_, _> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            (name, described(entry.metadata().unwrap()))
        })
        .collect();
    listing.insert(".".to_owned(), described(folder.metadata().unwrap()));
    listing
}
