//! Compile leases across processes, on both built-in backends: a real
//! `redis-server` (started and stopped here, see `test_support::redis`)
//! and a shared folder. Two processes that miss one key at once build it
//! once; a lease whose owner died bounds the wait (by the compile
//! estimate, or by the lease's time to live, whichever ends first); a
//! store that refuses or fails leases is a miss, and nothing hangs.

#![cfg(not(miri))] // processes, sockets, files

use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jit_store::{
    ArtifactKey, ArtifactStore, Fetched, KeyParts, LeaseAnswer, RemoteOptions, RemoteStats,
    RemoteTier, Secret,
};
use test_support::redis::RedisServer;

mod remote_support;
use remote_support::backend;

/// Set in a child process: the store's address.
const URL: &str = "JIT_CACHE_LEASE_TEST_URL";

/// Set in a child process: when it fetches, in milliseconds since 1970
/// (so that the children miss at once however long they took to start).
const START_AT: &str = "JIT_CACHE_LEASE_TEST_START_AT";

/// How long a build takes here: far longer than a poll, far shorter than
/// the wait bound.
const BUILD: Duration = Duration::from_millis(400);

/// The child's test, run by [`processes_missing_one_key_build_it_once`].
const CHILD: &str = "child_fetches_the_key";

fn key() -> ArtifactKey {
    remote_support::key_of("module @leases {}")
}

fn artifact() -> Vec<u8> {
    b"native code of @leases".to_vec()
}

/// A store with no folder over the backend at `url`, with `options`.
fn store(url: &str, options: RemoteOptions) -> ArtifactStore {
    let secret = Secret::from_bytes([7; Secret::LEN]);
    let tier = RemoteTier::new(backend(url), secret, options).unwrap();
    ArtifactStore::disabled().with_remote(tier)
}

/// Fetches the key, building it in [`BUILD`]; where it came from, and how
/// long it took.
fn fetch(store: &ArtifactStore) -> (Fetched, Duration) {
    let start = Instant::now();
    let load =
        |artifact: jit_store::VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
    let build = || {
        std::thread::sleep(BUILD);
        Ok::<_, String>(artifact())
    };
    let (bytes, fetched) = store.fetch_or_build(Some(&key()), load, build).unwrap();
    assert_eq!(bytes, artifact());
    (fetched, start.elapsed())
}

fn stats(store: &ArtifactStore) -> RemoteStats {
    store.remote_stats().unwrap()
}

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Not a test on its own: the child of
/// [`processes_missing_one_key_build_it_once`], which fetches the key from
/// the store at `$URL` at `$START_AT` and prints where it came from.
#[test]
fn child_fetches_the_key() {
    let Ok(url) = std::env::var(URL) else {
        return;
    };
    let start_at: u128 = std::env::var(START_AT).unwrap().parse().unwrap();
    let mut options = RemoteOptions::default();
    options.compile_estimate = Duration::from_secs(30);
    let store = store(&url, options);
    let now = unix_millis();
    if start_at > now {
        std::thread::sleep(Duration::from_millis((start_at - now) as u64));
    }
    let (fetched, _) = fetch(&store);
    let stats = stats(&store);
    drop(store); // publishes, then releases the lease
    println!(
        "fetched={fetched:?} leases_taken={} lease_waits={} waits_found={}",
        stats.leases_taken, stats.lease_waits, stats.waits_found
    );
}

/// Runs two children that fetch the key from `url` at the same moment;
/// their lines.
fn two_processes_at_once(url: &str) -> Vec<String> {
    let start_at = unix_millis() + 1500;
    let children: Vec<_> = (0..2)
        .map(|_| {
            test_support::child::rerun(CHILD)
                .env(URL, url)
                .env(START_AT, start_at.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut lines: Vec<String> = children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
            assert!(output.status.success(), "{stdout}");
            // The test harness prints the test's name on the same line.
            let line = stdout.lines().find_map(|l| l.split_once("fetched="));
            let (_, result) = line.unwrap_or_else(|| panic!("no result: {stdout}"));
            format!("fetched={result}")
        })
        .collect();
    lines.sort();
    lines
}

fn processes_missing_one_key_build_it_once(url: &str) {
    let lines = two_processes_at_once(url);
    assert_eq!(
        lines,
        [
            "fetched=Built leases_taken=1 lease_waits=0 waits_found=0",
            "fetched=Remote leases_taken=0 lease_waits=1 waits_found=1",
        ]
    );
}

#[test]
fn redis_processes_missing_one_key_build_it_once() {
    let server = RedisServer::start();
    processes_missing_one_key_build_it_once(&server.url());
    let leases = server.connection().keys("*:lease");
    assert!(leases.is_empty(), "released: {leases:?}");
}

#[test]
fn folder_processes_missing_one_key_build_it_once() {
    let dir = tempfile::tempdir().unwrap();
    processes_missing_one_key_build_it_once(&format!("file://{}", dir.path().display()));
}

/// A waiter facing a lease whose owner died: with an estimate shorter
/// than the lease's time to live it builds after the estimate, without the
/// lease; with a longer one it takes the lease over once it expires.
fn a_dead_owners_lease_bounds_the_wait(url: &str) {
    let tier_options = |estimate| {
        let mut options = RemoteOptions::default();
        options.compile_estimate = estimate;
        options.lease_ttl = Some(Duration::from_millis(100));
        options
    };
    let name = RemoteTier::new(
        backend(url),
        Secret::from_bytes([7; 32]),
        tier_options(BUILD),
    )
    .unwrap()
    .lease_key(&key());
    let dead = backend(url);
    let taken = dead.take_lease(&name, "dead:1:0", Duration::from_secs(3600));
    assert_eq!(taken.unwrap(), LeaseAnswer::Taken);
    let held = dead.take_lease(&name, "another:2:0", Duration::from_secs(1));
    assert_eq!(
        held.unwrap(),
        LeaseAnswer::Held {
            owner: "dead:1:0".to_owned()
        }
    );

    let estimate = Duration::from_millis(300);
    let waiter = store(url, tier_options(estimate));
    let (fetched, took) = fetch(&waiter);
    assert_eq!(fetched, Fetched::Built);
    assert!(took >= estimate + BUILD, "waited the estimate: {took:?}");
    let s = stats(&waiter);
    assert_eq!((s.lease_waits, s.waits_compiled, s.leases_taken), (1, 1, 0));
    drop(waiter);

    // A second key: the lease lives 500 ms, the estimate an hour.
    let other = ArtifactKey::new(&KeyParts {
        program: "module @other {}",
        compiler: "test",
        runtime: "test",
        target: "test",
    });
    let tier = RemoteTier::new(
        backend(url),
        Secret::from_bytes([7; 32]),
        tier_options(BUILD),
    );
    let name = tier.unwrap().lease_key(&other);
    let ttl = Duration::from_millis(500);
    assert_eq!(
        dead.take_lease(&name, "dead:1:0", ttl).unwrap(),
        LeaseAnswer::Taken
    );
    let waiter = store(url, tier_options(Duration::from_secs(3600)));
    let start = Instant::now();
    let load =
        |artifact: jit_store::VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
    let built = waiter.fetch_or_build(Some(&other), load, || Ok::<_, String>(artifact()));
    assert_eq!(built.unwrap().1, Fetched::Built);
    assert!(start.elapsed() >= ttl, "{:?}", start.elapsed());
    let s = stats(&waiter);
    assert_eq!((s.lease_waits, s.waits_compiled, s.leases_taken), (1, 1, 1));
}

#[test]
fn redis_a_dead_owners_lease_bounds_the_wait() {
    let server = RedisServer::start();
    a_dead_owners_lease_bounds_the_wait(&server.url());
}

#[test]
fn folder_a_dead_owners_lease_bounds_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    a_dead_owners_lease_bounds_the_wait(&format!("file://{}", dir.path().display()));
}

#[test]
fn redis_a_store_that_refuses_leases_is_a_miss() {
    let server = RedisServer::start();
    // A user that may read values but not write them: its `SET ... NX`
    // is answered with an error.
    let acl: [&[u8]; 7] = [
        b"ACL", b"SETUSER", b"reader", b"on", b">secret", b"~*", b"+strlen",
    ];
    let mut client = server.connection();
    client.command(&acl).unwrap();
    client
        .command(&[b"ACL", b"SETUSER", b"reader", b"+getrange", b"+ping"])
        .unwrap();
    let url = format!("redis://reader:secret@127.0.0.1:{}", server.port());
    let store = store(&url, RemoteOptions::default());
    assert_eq!(fetch(&store).0, Fetched::Built);
    let s = stats(&store);
    // The publish, in the background, may have failed too.
    assert_eq!((s.misses, s.leases_taken, s.lease_waits), (1, 0, 0), "{s}");
    assert!(s.errors >= 1, "{s}");
}

#[test]
fn redis_a_store_that_died_is_a_miss() {
    let server = RedisServer::start();
    let url = server.url();
    drop(server);
    let store = store(&url, RemoteOptions::default());
    let (fetched, took) = fetch(&store);
    assert_eq!(fetched, Fetched::Built);
    assert!(took < BUILD + Duration::from_secs(10), "no hang: {took:?}");
    let s = stats(&store);
    // The fetch failed (and the publish, in the background, may have).
    assert_eq!((s.fetches, s.leases_taken, s.lease_waits), (1, 0, 0), "{s}");
    assert!(s.errors >= 1, "{s}");
}

#[test]
fn folder_a_store_that_fails_leases_is_a_miss() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let store = store(&url, RemoteOptions::default());
    // Gone after it opened (an unmounted share): reads find nothing, the
    // lease cannot be written.
    drop(dir);
    assert_eq!(fetch(&store).0, Fetched::Built);
    let s = stats(&store);
    assert_eq!((s.misses, s.leases_taken, s.lease_waits), (1, 0, 0), "{s}");
    assert!(s.errors >= 1, "{s}");
}
