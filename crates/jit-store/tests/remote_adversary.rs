//! The remote tier against whoever else can write its keys: special files
//! planted in a shared folder (FIFOs at an artifact's value or lock name, a
//! value name that is a link to a FIFO), and a lease rewritten with a new
//! owner every 200 ms (as a renewing owner, or anyone who can write the
//! store, would), on a real `redis-server` and on a shared folder. Every
//! call returns within its bound, with the right artifact; each runs on a
//! thread that fails the test if it takes over its limit.

#![cfg(not(miri))] // processes, sockets, files

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jit_store::{
    ArtifactKey, ArtifactStore, Fetched, RemoteOptions, RemoteStats, RemoteTier, Secret,
};
use test_support::redis::RedisServer;

mod remote_support;
use remote_support::backend;

/// How long a build takes here.
const BUILD: Duration = Duration::from_millis(100);

/// The most any call here may take before the test fails: far over every
/// bound (a hang is what this catches).
const LIMIT: Duration = Duration::from_secs(20);

fn key() -> ArtifactKey {
    remote_support::key_of("module @adversary {}")
}

fn artifact() -> Vec<u8> {
    b"native code of @adversary".to_vec()
}

fn tier(url: &str, options: RemoteOptions) -> RemoteTier {
    RemoteTier::new(backend(url), Secret::from_bytes([7; Secret::LEN]), options).unwrap()
}

/// Fetches the key (building it in [`BUILD`]) through a store over `url`
/// on a thread, then waits for its publish; fails the test unless it
/// returns within [`LIMIT`] with the artifact. Returns where it came from,
/// how long the fetch took, and the tier's counters.
fn fetch_within_limit(url: &str, options: RemoteOptions) -> (Fetched, Duration, RemoteStats) {
    let store = ArtifactStore::disabled().with_remote(tier(url, options));
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let start = Instant::now();
        let load =
            |artifact: jit_store::VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
        let build = || {
            thread::sleep(BUILD);
            Ok::<_, String>(artifact())
        };
        let (bytes, fetched) = store.fetch_or_build(Some(&key()), load, build).unwrap();
        assert_eq!(bytes, artifact());
        let took = start.elapsed();
        // A build is published by the tier's thread: the next fetch of the
        // test must find it there, as a next process would.
        assert!(store.wait_for_publishes(LIMIT), "the publish did not end");
        let _ = done.send((fetched, took, store.remote_stats().unwrap()));
    });
    finished
        .recv_timeout(LIMIT)
        .unwrap_or_else(|_| panic!("the fetch did not return within {LIMIT:?}"))
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// A shared folder and its `file://` address.
fn folder() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    (dir, url)
}

/// The files of the key's value and lease in the shared folder `dir`.
fn names(dir: &Path, url: &str) -> (PathBuf, PathBuf) {
    let tier = tier(url, RemoteOptions::default());
    (
        dir.join(tier.remote_key(&key())),
        dir.join(tier.lease_key(&key())),
    )
}

#[test]
fn a_fifo_at_the_value_name_is_a_miss_and_is_replaced() {
    let (dir, url) = folder();
    let (value, _) = names(dir.path(), &url);
    mkfifo(&value);
    let (fetched, _, stats) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Built);
    assert_eq!((stats.misses, stats.leases_taken), (1, 1), "{stats}");
    // Published over the FIFO: the next process is served.
    let (fetched, _, _) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Remote);
}

#[test]
fn a_value_name_linked_to_a_fifo_is_a_miss_and_the_fifo_is_left_alone() {
    let (dir, url) = folder();
    let (value, _) = names(dir.path(), &url);
    let fifo = dir.path().join("elsewhere");
    mkfifo(&fifo);
    std::os::unix::fs::symlink(&fifo, &value).unwrap();
    let (fetched, _, _) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Built);
    let (fetched, _, _) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Remote);
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}

#[test]
fn a_fifo_at_the_lock_name_is_a_stale_lock_taken_over() {
    let (dir, url) = folder();
    let (_, lease) = names(dir.path(), &url);
    mkfifo(&lease);
    let (fetched, _, stats) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Built);
    assert_eq!(stats.leases_taken, 1, "{stats}");
    // A link to a FIFO at the lock's name is as stale.
    let (dir, url) = folder();
    let (_, lease) = names(dir.path(), &url);
    let fifo = dir.path().join("elsewhere");
    mkfifo(&fifo);
    std::os::unix::fs::symlink(&fifo, &lease).unwrap();
    let (fetched, _, stats) = fetch_within_limit(&url, RemoteOptions::default());
    assert_eq!(fetched, Fetched::Built);
    assert_eq!(stats.leases_taken, 1, "{stats}");
}

/// Rewrites the key's lease with a new owner every 200 ms, each for
/// `ttl`, with `write(owner)`, until dropped.
struct Rotator {
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Rotator {
    fn start(mut write: impl FnMut(&str) + Send + 'static) -> Rotator {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut n = 0u64;
            while !stopped.load(Ordering::Relaxed) {
                write(&format!("adversary:{}:{n:016x}", std::process::id()));
                n += 1;
                thread::sleep(Duration::from_millis(200));
            }
        });
        Rotator {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Rotator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The waiter's options: leases of 2 s (the default), an estimate of 1 s;
/// its bound is then 2.1 s, in all.
fn waiter_options() -> RemoteOptions {
    let mut options = RemoteOptions::default();
    options.compile_estimate = Duration::from_secs(1);
    options
}

/// A lease rewritten with a new owner every 200 ms: the waiter compiles
/// once its one bound (2.1 s) has passed, however long the rewrites go on.
fn a_rotating_lease_does_not_extend_the_wait(url: &str, rotator: Rotator) {
    thread::sleep(Duration::from_millis(300)); // the first owner is there
    let (fetched, took, stats) = fetch_within_limit(url, waiter_options());
    drop(rotator);
    assert_eq!(fetched, Fetched::Built);
    assert_eq!((stats.lease_waits, stats.waits_compiled), (1, 1), "{stats}");
    // The bound (2.1 s), one request and the build; generous for a busy
    // machine, far under what the rotation would hold (forever).
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn redis_a_lease_that_keeps_changing_owner_does_not_extend_the_wait() {
    let server = RedisServer::start();
    let url = server.url();
    let lease = tier(&url, RemoteOptions::default()).lease_key(&key());
    let mut client = server.connection();
    let rotator = Rotator::start(move |owner| {
        let set: [&[u8]; 5] = [b"SET", lease.as_bytes(), owner.as_bytes(), b"PX", b"2000"];
        client.command(&set).unwrap();
    });
    a_rotating_lease_does_not_extend_the_wait(&url, rotator);
}

#[test]
fn folder_a_lock_that_keeps_changing_owner_does_not_extend_the_wait() {
    let (dir, url) = folder();
    let (_, lease) = names(dir.path(), &url);
    let rotator = Rotator::start(move |owner| {
        let expiry = SystemTime::now() + Duration::from_secs(2);
        let millis = expiry.duration_since(UNIX_EPOCH).unwrap().as_millis();
        let temporary = lease.with_extension("rotating");
        std::fs::write(&temporary, format!("{owner}\n{millis}\n")).unwrap();
        std::fs::rename(&temporary, &lease).unwrap();
    });
    a_rotating_lease_does_not_extend_the_wait(&url, rotator);
    drop(dir);
}

/// `SHEAF_JIT_REMOTE_LEASE` of an hour, and the owner dead: the waiter
/// waits [`RemoteOptions::MAX_TTL_WAIT`] (and a poll) at most, not the
/// hour.
#[test]
fn folder_a_dead_owners_lease_of_an_hour_is_not_waited_out() {
    let (_dir, url) = folder();
    let hour = Duration::from_secs(3600);
    let lease = tier(&url, RemoteOptions::default()).lease_key(&key());
    let dead = backend(&url);
    dead.take_lease(&lease, "dead:1:0", hour).unwrap();
    let mut options = RemoteOptions::default();
    options.lease_ttl = Some(hour);
    options.compile_estimate = Duration::from_millis(300);
    let store = ArtifactStore::disabled().with_remote(tier(&url, options));
    let (done, finished) = mpsc::channel();
    thread::spawn(move || {
        let start = Instant::now();
        let load =
            |artifact: jit_store::VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
        let built = store.fetch_or_build(Some(&key()), load, || Ok::<_, String>(artifact()));
        let _ = done.send((built.unwrap().1, start.elapsed()));
    });
    let limit = RemoteOptions::MAX_TTL_WAIT + LIMIT;
    let (fetched, took) = finished
        .recv_timeout(limit)
        .unwrap_or_else(|_| panic!("the fetch did not return within {limit:?}"));
    assert_eq!(fetched, Fetched::Built);
    assert!(took < limit, "{took:?}");
}
