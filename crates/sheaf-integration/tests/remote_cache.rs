//! The remote artifact cache against a real `redis-server` (see
//! `test_support::redis`; `cargo xtask test` installs it): a second
//! process compiles nothing, a server that is down or dies mid-run never
//! fails a call, tampered and oversized entries are never loaded, and
//! concurrent publishers leave a valid entry.

mod support;

use std::fs;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use sheaf_integration::{
    artifacts::ArtifactSource,
    settings::{
        DiskCacheFolder, LeaseAnswer, RemoteCacheUrl, RemoteSecret, RemoteStore, RemoteValue,
        SigningKey,
    },
    stats::{BreakerState, Origin, RemoteStats},
    ErrorChain, JitConfigBuilder, JitError, JitRuntime, Provenance, RemoteError,
};
use test_support::redis::{free_port, url_of, RedisServer};

/// Set in a child process: what it does (`publish` or `serve`).
const ROLE: &str = "SHEAF_JIT_REMOTE_TEST_ROLE";

/// The signatures every process calls: three shapes of sigmoid.
const SHAPES: [[usize; 2]; 3] = [[1, 5], [2, 3], [3, 4]];

/// Blocking settings with a fresh disk cache in `dir` and the remote cache
/// at `url`, authenticated with the secret in `secrets`. Every shape is its
/// own artifact here (no dynamic dims), as every process of a test must
/// compile the same ones.
fn settings(url: &str, secrets: &Path, dir: &Path) -> JitConfigBuilder {
    support::blocking()
        .cache(|cache| cache.dynamic_dims = false)
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
        .remote(|remote| {
            remote.url = Some(RemoteCacheUrl::new(url));
            remote.secret = Some(RemoteSecret::File(secret_file_in(secrets)));
        })
}

/// The cluster's secret file (32 bytes, mode 0600) in `dir`, made on first
/// use.
fn secret_file_in(dir: &Path) -> PathBuf {
    let path = dir.join("secret");
    if !path.exists() {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, &[0x5a; 32]).unwrap();
    }
    path
}

fn runtime(settings: JitConfigBuilder) -> JitRuntime {
    JitRuntime::new(settings.build().unwrap()).unwrap()
}

/// Calls sigmoid on `shape`, checks the result; how it ran.
fn call(jit: &JitRuntime, shape: [usize; 2]) -> Provenance {
    support::checked_sigmoid(jit, &shape, 7)
}

fn remote(jit: &JitRuntime) -> RemoteStats {
    jit.remote_cache_stats()
        .expect("a remote cache is configured")
}

/// The names of the artifacts on the server (not the learned policies
/// beside them).
fn remote_keys(server: &RedisServer) -> Vec<String> {
    let mut keys = server.connection().keys("sheaf-jit:v1:*");
    keys.retain(|key| !is_policy(key));
    keys
}

/// Whether the remote value named `name` is a learned policy.
fn is_policy(name: &str) -> bool {
    name.contains(":policy:")
}

/// The names of the artifacts in the shared folder `dir`.
fn artifact_files(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| !is_policy(name))
        .collect()
}

/// Runs this test binary's `test` in a child process in `role`, with the
/// remote cache at `url`, the secret in `secrets` and a fresh disk cache.
fn spawn(test: &str, role: &str, url: &str, secrets: &Path) -> (Child, tempfile::TempDir) {
    let secret = secret_file_in(secrets);
    spawn_trusting(
        test,
        role,
        url,
        &[("SHEAF_JIT_REMOTE_SECRET_FILE", secret.as_os_str())],
    )
}

/// [`spawn`], the remote cache's entries authenticated as the variables
/// `trust` say.
fn spawn_trusting(
    test: &str,
    role: &str,
    url: &str,
    trust: &[(&str, &std::ffi::OsStr)],
) -> (Child, tempfile::TempDir) {
    let disk = tempfile::tempdir().unwrap();
    let child = test_support::child::rerun(test)
        .env(ROLE, role)
        .env("SHEAF_JIT_REMOTE_CACHE", url)
        .envs(trust.iter().copied())
        .env("SHEAF_JIT_CACHE_DIR", disk.path())
        .env("SHEAF_JIT_COMPILE_MODE", "blocking")
        .env("SHEAF_JIT_DYNAMIC_DIMS", "off")
        .spawn()
        .unwrap();
    (child, disk)
}

fn wait(test: &str, (mut child, _disk): (Child, tempfile::TempDir)) {
    let status = child.wait().unwrap();
    assert!(status.success(), "the child process of {test} failed");
}

/// What a child process does: `publish` compiles every signature of
/// [`SHAPES`] (publishing them when the runtime is dropped at the end);
/// `serve` must get every one from the remote cache without compiling.
fn child(role: &str) {
    let config = sheaf_integration::JitConfig::from_env().unwrap();
    let jit = JitRuntime::new(config).unwrap();
    for shape in SHAPES {
        assert!(
            matches!(
                call(&jit, shape),
                Provenance::Compiled(Origin::CompiledNow { .. })
            ),
            "{shape:?}"
        );
    }
    let (disk, remote) = (jit.disk_cache_stats(), remote(&jit));
    eprintln!("{role}: {disk:?}\n{remote}");
    match role {
        "publish" => assert_eq!(disk.hits + disk.misses + remote.hits, 3),
        "serve" => {
            assert_eq!(
                (remote.hits, remote.rejected, disk.misses),
                (3, 0, 0),
                "every signature from the remote cache, none compiled"
            );
            assert!(jit.compiler().is_none(), "the compiler was never loaded");
            let profile = jit.profile();
            assert_eq!(
                (
                    profile.loaded_from(ArtifactSource::RemoteCache),
                    profile.loaded_from(ArtifactSource::Compiler)
                ),
                (3, 0),
                "{profile}"
            );
            for shape in SHAPES {
                assert_eq!(call(&jit, shape), Provenance::Compiled(Origin::Hit));
            }
            assert_eq!(
                self::remote(&jit).fetches,
                remote.fetches,
                "hits never touch the network"
            );
        }
        "refuse" => assert_eq!(
            (remote.hits, remote.unknown_signer, remote.publishes),
            (0, 3 + 1, 0),
            "the three artifacts and sigmoid's learned policy, signed by a key this reader does \
             not trust: refused (compiled here), and nothing published"
        ),
        _ => panic!("unknown role {role}"),
    }
}

#[test]
fn a_second_process_serves_every_signature_from_the_remote_cache_without_compiling() {
    const TEST: &str =
        "a_second_process_serves_every_signature_from_the_remote_cache_without_compiling";
    if let Ok(role) = std::env::var(ROLE) {
        return child(&role);
    }
    let server = RedisServer::start();
    let secrets = tempfile::tempdir().unwrap();
    wait(TEST, spawn(TEST, "publish", &server.url(), secrets.path()));
    assert_eq!(remote_keys(&server).len(), SHAPES.len());
    wait(TEST, spawn(TEST, "serve", &server.url(), secrets.path()));
}

#[test]
fn a_shared_folder_serves_a_second_process_like_a_server() {
    const TEST: &str = "a_shared_folder_serves_a_second_process_like_a_server";
    if let Ok(role) = std::env::var(ROLE) {
        return child(&role);
    }
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let secrets = tempfile::tempdir().unwrap();
    wait(TEST, spawn(TEST, "publish", &url, secrets.path()));
    let entries = artifact_files(shared.path());
    assert_eq!(
        entries.len(),
        SHAPES.len(),
        "one file per entry, no lease left: {entries:?}"
    );
    wait(TEST, spawn(TEST, "serve", &url, secrets.path()));
}

#[test]
fn a_builders_signed_artifacts_serve_a_reader_that_holds_only_public_keys_and_writes_nothing() {
    const TEST: &str =
        "a_builders_signed_artifacts_serve_a_reader_that_holds_only_public_keys_and_writes_nothing";
    if let Ok(role) = std::env::var(ROLE) {
        return child(&role);
    }
    let shared = tempfile::tempdir().unwrap();
    let url = format!("file://{}", shared.path().display());
    let keys = tempfile::tempdir().unwrap();
    let signing_key = keys.path().join("signing-key");
    let public = SigningKey::create_file(&signing_key).unwrap().public_key();
    let builder = [("SHEAF_JIT_SIGNING_KEY_FILE", signing_key.as_os_str())];
    wait(TEST, spawn_trusting(TEST, "publish", &url, &builder));
    let published = fs::read_dir(shared.path()).unwrap().count();
    assert_eq!(artifact_files(shared.path()).len(), SHAPES.len());
    // The reader trusts the builder's public key (in a file, beside a
    // rotated-out key given inline) and holds no secret, no signing key.
    let trusted = keys.path().join("trusted-keys");
    fs::write(&trusted, format!("# CI\n{public}\n")).unwrap();
    let old = SigningKey::from_seed(&[9; 32]).public_key();
    let list = std::ffi::OsString::from(format!("{old},{}", trusted.display()));
    let reader = [("SHEAF_JIT_TRUSTED_KEYS", list.as_os_str())];
    let before = fs::metadata(shared.path()).unwrap().modified().unwrap();
    wait(TEST, spawn_trusting(TEST, "serve", &url, &reader));
    assert_eq!(fs::read_dir(shared.path()).unwrap().count(), published);
    assert_eq!(
        fs::metadata(shared.path()).unwrap().modified().unwrap(),
        before,
        "the reader made and deleted nothing in the folder (no lease, no publish)"
    );
    // A reader that trusts another key only compiles, and says why.
    let stranger = std::ffi::OsString::from(old.to_string());
    let other = [("SHEAF_JIT_TRUSTED_KEYS", stranger.as_os_str())];
    wait(TEST, spawn_trusting(TEST, "refuse", &url, &other));
}

#[test]
fn concurrent_publishers_of_the_same_keys_leave_valid_entries() {
    const TEST: &str = "concurrent_publishers_of_the_same_keys_leave_valid_entries";
    if let Ok(role) = std::env::var(ROLE) {
        return child(&role);
    }
    let server = RedisServer::start();
    let secrets = tempfile::tempdir().unwrap();
    let publishers: Vec<_> = (0..3)
        .map(|_| spawn(TEST, "publish", &server.url(), secrets.path()))
        .collect();
    for publisher in publishers {
        wait(TEST, publisher);
    }
    assert_eq!(remote_keys(&server).len(), SHAPES.len());
    wait(TEST, spawn(TEST, "serve", &server.url(), secrets.path()));
}

#[test]
fn a_server_down_at_start_leaves_calls_compiling_locally() {
    let secrets = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    // Nothing listens there.
    let jit = runtime(settings(&url_of(free_port()), secrets.path(), disk.path()));
    for shape in SHAPES {
        assert!(matches!(
            call(&jit, shape),
            Provenance::Compiled(Origin::CompiledNow { .. })
        ));
    }
    let stats = remote(&jit);
    assert_eq!(stats.hits, 0);
    assert!(stats.errors >= 1, "{stats}");
    assert_eq!(
        (stats.breaker, stats.breaker_opened),
        (BreakerState::Open, 1),
        "three failures in a row open it: {stats}"
    );
    assert_eq!(jit.disk_cache_stats().misses, 3);
    let profile = jit.profile().to_string();
    assert!(
        profile.contains("remote: 0 hits") && profile.contains("breaker open"),
        "{profile}"
    );
    // Once it is open, nothing is sent.
    let before = remote(&jit);
    assert!(matches!(
        call(&jit, [4, 4]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let after = remote(&jit);
    assert_eq!(
        (after.fetches, after.errors),
        (before.fetches, before.errors)
    );
}

#[test]
fn a_remote_cache_without_a_private_secret_is_refused_with_what_to_do() {
    let disk = tempfile::tempdir().unwrap();
    let url = url_of(free_port());
    let missing = support::blocking()
        .disk(|disk_cache| disk_cache.folder = DiskCacheFolder::Dir(disk.path().into()))
        .remote(|remote| remote.url = Some(RemoteCacheUrl::new(&url)))
        .build()
        .unwrap_err();
    assert!(
        missing.to_string().contains("SHEAF_JIT_REMOTE_SECRET_FILE"),
        "{missing}"
    );
    let secrets = tempfile::tempdir().unwrap();
    let path = secret_file_in(secrets.path());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o606)).unwrap();
    let error =
        JitRuntime::new(settings(&url, secrets.path(), disk.path()).build().unwrap()).unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(matches!(error, JitError::RemoteSecret(_)), "{message}");
    assert!(
        message.contains("others may write it") && message.contains("chmod go-w"),
        "{message}"
    );
    assert!(
        message.contains("SHEAF_JIT_REMOTE_SECRET_FILE"),
        "{message}"
    );
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let missing_ca = disk.path().join("missing-ca.pem");
    let tls = JitRuntime::new(
        settings("rediss://cache:6380", secrets.path(), disk.path())
            .remote(|remote| remote.ca_file = Some(missing_ca))
            .build()
            .unwrap(),
    )
    .unwrap_err();
    let message = ErrorChain(&tls).to_string();
    assert!(matches!(tls, JitError::RemoteCache(_)), "{message}");
    assert!(message.contains("cannot read the CA file"), "{message}");
}

#[test]
fn a_server_killed_mid_run_opens_the_breaker_and_is_used_again_once_restarted() {
    let cool_down = Duration::from_millis(200);
    let server = RedisServer::start();
    let port = server.port();
    let secrets = tempfile::tempdir().unwrap();
    let disk = tempfile::tempdir().unwrap();
    let jit = runtime(
        settings(&server.url(), secrets.path(), disk.path()).remote(|remote| {
            remote.options.failure_threshold = 3;
            remote.options.cool_down = cool_down;
        }),
    );
    assert!(matches!(
        call(&jit, [1, 1]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(remote(&jit).misses, 1);

    drop(server);
    for n in 2..=5 {
        assert!(
            matches!(
                call(&jit, [1, n]),
                Provenance::Compiled(Origin::CompiledNow { .. })
            ),
            "the server is down"
        );
    }
    let down = remote(&jit);
    // Open, or probing (a probe may be out when the cool-down passed during
    // a compile); opened once.
    assert_ne!(down.breaker, BreakerState::Closed, "{down}");
    assert_eq!(down.breaker_opened, 1, "{down}");

    let server = RedisServer::start_on(port);
    // Past the cool-down, the next fetch probes the server, which answers.
    std::thread::sleep(cool_down * 2);
    assert!(matches!(
        call(&jit, [1, 6]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let up = remote(&jit);
    assert_eq!(up.breaker, BreakerState::Closed, "{up}");
    assert_eq!(up.misses, down.misses + 1, "{up}");
    drop(jit); // publishes [1, 6]

    // The restarted server serves it to a fresh process.
    let fresh = tempfile::tempdir().unwrap();
    let jit = runtime(settings(&server.url(), secrets.path(), fresh.path()));
    assert!(matches!(
        call(&jit, [1, 6]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!((remote(&jit).hits, jit.disk_cache_stats().misses), (1, 0));
}

#[test]
fn a_tampered_remote_entry_is_rejected_counted_and_compiled_instead() {
    let server = RedisServer::start();
    let secrets = tempfile::tempdir().unwrap();
    let fresh = || tempfile::tempdir().unwrap();
    let first = fresh();
    let jit = runtime(settings(&server.url(), secrets.path(), first.path()));
    call(&jit, [2, 3]);
    drop(jit); // publishes
    let keys = remote_keys(&server);
    assert_eq!(keys.len(), 1);
    let mut connection = server.connection();
    let good = connection.get(&keys[0]);
    let mut flipped = good.clone();
    let middle = flipped.len() / 2;
    flipped[middle] ^= 0x01;
    for (what, value) in [
        ("a flipped byte", flipped),
        ("garbage", b"garbage".to_vec()),
    ] {
        connection.set(&keys[0], &value);
        let disk = fresh();
        let jit = runtime(settings(&server.url(), secrets.path(), disk.path()));
        assert!(
            matches!(
                call(&jit, [2, 3]),
                Provenance::Compiled(Origin::CompiledNow { .. })
            ),
            "{what}"
        );
        let stats = remote(&jit);
        assert_eq!((stats.rejected, stats.hits), (1, 0), "{what}: {stats}");
        assert_eq!(jit.disk_cache_stats().misses, 1, "{what}: compiled");
        drop(jit);
        let republished = connection.get(&keys[0]);
        assert_eq!(republished, good, "{what}: replaced by the fresh compile");
    }
    // A process with another secret (another deployment): its keys are its
    // own, so it misses (not a rejection), and publishes its own entry
    // beside the first's, which it leaves alone.
    let disk = fresh();
    let jit = runtime(
        support::blocking()
            .cache(|cache| cache.dynamic_dims = false)
            .disk(|disk_cache| disk_cache.folder = DiskCacheFolder::Dir(disk.path().into()))
            .remote(|remote| {
                remote.url = Some(RemoteCacheUrl::new(server.url()));
                let secret = sheaf_integration::settings::Secret::from_bytes([0x33; 32]);
                remote.secret = Some(RemoteSecret::Key(secret));
            }),
    );
    assert!(matches!(
        call(&jit, [2, 3]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = remote(&jit);
    assert_eq!((stats.rejected, stats.misses), (0, 1), "{stats}");
    drop(jit); // publishes
    assert_eq!(remote_keys(&server).len(), 2);
    assert_eq!(connection.get(&keys[0]), good, "the first secret's entry");
}

#[test]
fn an_oversized_artifact_is_neither_published_nor_downloaded() {
    let server = RedisServer::start();
    let secrets = tempfile::tempdir().unwrap();
    let small = |dir: &Path| {
        settings(&server.url(), secrets.path(), dir)
            .remote(|remote| remote.options.max_entry_bytes = 1024)
    };
    let disk = tempfile::tempdir().unwrap();
    let jit = runtime(small(disk.path()));
    assert!(matches!(
        call(&jit, [2, 3]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = remote(&jit);
    drop(jit);
    assert_eq!((stats.oversized, stats.publishes), (1, 0), "{stats}");
    assert!(remote_keys(&server).is_empty(), "not published");

    // Published by a process with the default bound, refused by the small one.
    let disk = tempfile::tempdir().unwrap();
    let jit = runtime(settings(&server.url(), secrets.path(), disk.path()));
    call(&jit, [2, 3]);
    drop(jit); // publishes
    assert_eq!(remote_keys(&server).len(), 1);
    let disk = tempfile::tempdir().unwrap();
    let jit = runtime(small(disk.path()));
    assert!(matches!(
        call(&jit, [2, 3]),
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    let stats = remote(&jit);
    assert_eq!(
        (stats.oversized, stats.hits, stats.policies_fetched),
        (2, 0, 1),
        "{stats}"
    );
    assert!(
        stats.bytes_fetched < 1024,
        "only sigmoid's learned policy was downloaded, no artifact: {stats}"
    );
}

/// A backend of the test's own: a map in memory, with leases that are
/// always granted and counted.
#[derive(Debug, Default)]
struct InMemory {
    values: std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>,
    leases: std::sync::atomic::AtomicU64,
}

impl RemoteStore for InMemory {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        Ok(match self.values.lock().unwrap().get(key) {
            None => RemoteValue::Missing,
            Some(value) if value.len() as u64 > max_bytes => {
                RemoteValue::TooLarge(value.len() as u64)
            }
            Some(value) => RemoteValue::Found(value.clone()),
        })
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        let mut values = self.values.lock().unwrap();
        values.insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn take_lease(&self, _: &str, _: &str, _: Duration) -> Result<LeaseAnswer, RemoteError> {
        self.leases
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(LeaseAnswer::Taken)
    }
}

#[test]
fn a_store_of_ones_own_is_used_like_a_server_leases_included() {
    let store = std::sync::Arc::new(InMemory::default());
    let secrets = tempfile::tempdir().unwrap();
    let own = |dir: &Path| {
        support::blocking()
            .cache(|cache| cache.dynamic_dims = false)
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
            .remote_store(store.clone())
            .remote(|remote| {
                remote.secret = Some(RemoteSecret::File(secret_file_in(secrets.path())))
            })
    };
    let first = tempfile::tempdir().unwrap();
    let jit = runtime(own(first.path()));
    for shape in SHAPES {
        call(&jit, shape);
    }
    assert_eq!(remote(&jit).leases_taken, SHAPES.len() as u64);
    drop(jit); // publishes
    let values = store.values.lock().unwrap();
    let artifacts = values.keys().filter(|name| !is_policy(name)).count();
    assert_eq!(artifacts, SHAPES.len());
    drop(values);
    assert_eq!(
        store.leases.load(std::sync::atomic::Ordering::Relaxed),
        SHAPES.len() as u64
    );

    let second = tempfile::tempdir().unwrap();
    let jit = runtime(own(second.path()));
    for shape in SHAPES {
        call(&jit, shape);
    }
    let stats = remote(&jit);
    assert_eq!((stats.hits, stats.leases_taken), (3, 0), "{stats}");
}
