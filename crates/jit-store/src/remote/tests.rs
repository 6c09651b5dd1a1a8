//! The tier over an in-memory backend: trust, bounds, the breaker, the
//! queue, and the order disk, remote, build.

use std::collections::HashMap;
use std::io;
use std::sync::{Condvar, Mutex};

use super::*;
use crate::breaker::BreakerState;
use crate::entry::tests::{key, secret};
use crate::entry::{Sealer, HEADER_LEN};
use crate::{ArtifactStore, Fetched, StoreConfig};

/// An in-memory [`RemoteStore`] shared by the tiers of a test, that can
/// be made to fail, and to hold its puts until released.
#[derive(Debug, Default)]
struct Memory {
    values: Mutex<HashMap<String, Vec<u8>>>,
    down: std::sync::atomic::AtomicBool,
    requests: AtomicU64,
    /// While set, puts wait; `entered` counts the puts that started.
    hold: Mutex<(bool, u64)>,
    changed: Condvar,
    /// Whether it has leases (else the trait's defaults: none).
    leasing: std::sync::atomic::AtomicBool,
    /// Each lease's owner and expiry.
    leases: Mutex<HashMap<String, (String, Instant)>>,
}

#[derive(Debug, Clone, Default)]
struct Shared(Arc<Memory>);

/// What a [`Shared`] that is down answers.
fn down() -> RemoteError {
    RemoteError::Unavailable {
        url: "memory".to_owned(),
        step: "request",
        source: io::ErrorKind::ConnectionRefused.into(),
    }
}

impl RemoteStore for Shared {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        let memory = &self.0;
        memory.requests.fetch_add(1, Ordering::Relaxed);
        if memory.down.load(Ordering::Relaxed) {
            return Err(down());
        }
        Ok(match memory.values.lock().unwrap().get(key) {
            None => RemoteValue::Missing,
            Some(value) if value.len() as u64 > max_bytes => {
                RemoteValue::TooLarge(value.len() as u64)
            }
            Some(value) => RemoteValue::Found(value.clone()),
        })
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        let memory = &self.0;
        memory.requests.fetch_add(1, Ordering::Relaxed);
        let mut hold = memory.hold.lock().unwrap();
        hold.1 += 1;
        memory.changed.notify_all();
        while hold.0 {
            hold = memory.changed.wait(hold).unwrap();
        }
        drop(hold);
        if memory.down.load(Ordering::Relaxed) {
            return Err(down());
        }
        memory
            .values
            .lock()
            .unwrap()
            .insert(key.to_owned(), value.to_vec());
        Ok(())
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        let memory = &self.0;
        if !memory.leasing.load(Ordering::Relaxed) {
            return Ok(LeaseAnswer::Unsupported);
        }
        memory.requests.fetch_add(1, Ordering::Relaxed);
        if memory.down.load(Ordering::Relaxed) {
            return Err(down());
        }
        let now = Instant::now();
        let mut leases = memory.leases.lock().unwrap();
        if let Some((owner, expiry)) = leases.get(lease).filter(|(_, e)| *e > now) {
            let _ = expiry;
            return Ok(LeaseAnswer::Held {
                owner: owner.clone(),
            });
        }
        leases.insert(lease.to_owned(), (owner.to_owned(), now + ttl));
        Ok(LeaseAnswer::Taken)
    }

    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        let mut leases = self.0.leases.lock().unwrap();
        match leases.get_mut(lease) {
            Some((holder, expiry)) if holder == owner && *expiry > Instant::now() => {
                *expiry = Instant::now() + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        let mut leases = self.0.leases.lock().unwrap();
        if leases.get(lease).is_some_and(|(holder, _)| holder == owner) {
            leases.remove(lease);
        }
        Ok(())
    }
}

impl Shared {
    /// A backend with leases.
    fn leasing() -> Self {
        let backend = Shared::default();
        backend.0.leasing.store(true, Ordering::Relaxed);
        backend
    }

    /// The leases held now.
    fn leases(&self) -> usize {
        let now = Instant::now();
        let leases = self.0.leases.lock().unwrap();
        leases.values().filter(|(_, expiry)| *expiry > now).count()
    }

    fn set_down(&self, down: bool) {
        self.0.down.store(down, Ordering::Relaxed);
    }

    fn requests(&self) -> u64 {
        self.0.requests.load(Ordering::Relaxed)
    }

    fn value(&self, program: &str) -> Option<Vec<u8>> {
        let name = format!("{}{}", default_prefix(), key(program).hex());
        self.0.values.lock().unwrap().get(&name).cloned()
    }

    fn set_value(&self, program: &str, value: Vec<u8>) {
        let name = format!("{}{}", default_prefix(), key(program).hex());
        self.0.values.lock().unwrap().insert(name, value);
    }

    fn hold_puts(&self, hold: bool) {
        self.0.hold.lock().unwrap().0 = hold;
        self.0.changed.notify_all();
    }

    fn wait_for_puts(&self, count: u64) {
        let mut hold = self.0.hold.lock().unwrap();
        while hold.1 < count {
            hold = self.0.changed.wait(hold).unwrap();
        }
    }
}

/// The keys' prefix of a tier with the default options and the tests'
/// secret.
fn default_prefix() -> String {
    let id = secret().identity();
    format!("{}default:{id}:", RemoteOptions::DEFAULT_KEY_PREFIX)
}

/// Whether `tier` answers that the caller compiles `key`.
fn compiles<L: fmt::Display>(
    tier: &RemoteTier,
    key: &ArtifactKey,
    load: impl Fn(VerifiedArtifact<'_>) -> Result<Vec<u8>, L>,
) -> bool {
    matches!(tier.fetch_or_lease(key, load), Fetch::Compile(_))
}

fn tier(backend: &Shared, options: RemoteOptions) -> RemoteTier {
    RemoteTier::new(Box::new(backend.clone()), secret(), options).unwrap()
}

/// A store with no folder over `backend`.
fn store(backend: &Shared, options: RemoteOptions) -> ArtifactStore {
    ArtifactStore::disabled().with_remote(tier(backend, options))
}

fn artifact(program: &str) -> Vec<u8> {
    format!("native code of {program}").into_bytes()
}

/// Fetches `program`, building it if need be; what the loader got.
fn fetch(store: &ArtifactStore, program: &str) -> (Vec<u8>, Fetched) {
    store
        .fetch_or_build(
            Some(&key(program)),
            |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
            || Ok::<_, String>(artifact(program)),
        )
        .unwrap()
}

#[test]
fn a_build_is_published_and_served_to_the_next_process() {
    let backend = Shared::default();
    let first = store(&backend, RemoteOptions::default());
    assert_eq!(fetch(&first, "a"), (artifact("a"), Fetched::Built));
    drop(first); // waits for the publish
    let value = backend.value("a").unwrap();
    assert_eq!(value.len(), HEADER_LEN + artifact("a").len());

    let second = store(&backend, RemoteOptions::default());
    assert_eq!(fetch(&second, "a"), (artifact("a"), Fetched::Remote));
    let stats = second.remote_stats().unwrap();
    assert_eq!((stats.hits, stats.misses, stats.fetches), (1, 0, 1));
    assert_eq!(stats.bytes_fetched, value.len() as u64);
    assert_eq!(second.stats().misses, 0, "nothing was built");
    assert!(stats.to_string().starts_with("remote: 1 hits, 0 misses"));
}

#[test]
fn values_that_do_not_verify_are_counted_and_never_loaded() {
    let backend = Shared::default();
    drop(fetch(&store(&backend, RemoteOptions::default()), "a"));
    let good = backend.value("a").unwrap();
    let mut flipped = good.clone();
    *flipped.last_mut().unwrap() ^= 1;
    let foreign = entry::encode(
        &key("a"),
        Sealer::Secret(&Secret::from_bytes([9; Secret::LEN])),
        b"evil",
    );
    // Each rejection is counted with its reason: (unauthenticated,
    // malformed, refused).
    let reasons = |stats: RemoteStats| (stats.unauthenticated, stats.malformed, stats.refused);
    for (what, value, reason) in [
        ("a flipped bit", flipped, (1, 0, 0)),
        ("garbage", b"garbage".to_vec(), (0, 1, 0)),
        ("another secret's entry", foreign, (1, 0, 0)),
    ] {
        backend.set_value("a", value);
        let store = store(&backend, RemoteOptions::default());
        assert_eq!(
            fetch(&store, "a"),
            (artifact("a"), Fetched::Built),
            "{what}"
        );
        assert_eq!(store.remote_stats().unwrap().rejected, 1, "{what}");
        assert_eq!(reasons(store.remote_stats().unwrap()), reason, "{what}");
        drop(store);
        assert_eq!(backend.value("a").unwrap(), good, "{what}: republished");
    }
    // An entry the caller's `load` refuses is rejected too.
    let store = store(&backend, RemoteOptions::default());
    let refused = store.fetch_or_build(
        Some(&key("a")),
        |loaded| match loaded.bytes() == artifact("a") {
            true => Err("the runtime refused it"),
            false => Ok(Fetched::Built),
        },
        || Ok::<_, String>(b"rebuilt".to_vec()),
    );
    assert!(matches!(refused, Ok((_, Fetched::Built))));
    assert_eq!(store.remote_stats().unwrap().rejected, 1);
    assert_eq!(reasons(store.remote_stats().unwrap()), (0, 0, 1));
}

#[test]
fn artifacts_over_the_bound_are_neither_published_nor_downloaded() {
    let backend = Shared::default();
    let small = RemoteOptions {
        max_entry_bytes: 4,
        ..RemoteOptions::default()
    };
    let store = store(&backend, small.clone());
    fetch(&store, "a");
    drop(store);
    assert_eq!(backend.value("a"), None, "not published");

    drop(fetch(&self::store(&backend, RemoteOptions::default()), "a"));
    let store = self::store(&backend, small);
    assert_eq!(fetch(&store, "a").1, Fetched::Built);
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.oversized, stats.hits, stats.bytes_fetched),
        (2, 0, 0)
    );
}

#[test]
fn failures_open_the_breaker_and_calls_keep_working() {
    let backend = Shared::default();
    backend.set_down(true);
    let options = RemoteOptions {
        failure_threshold: 2,
        cool_down: Duration::from_secs(3600),
        ..RemoteOptions::default()
    };
    let tier = tier(&backend, options.clone());
    let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
    for program in ["a", "b", "c", "d"] {
        assert!(compiles(&tier, &key(program), load));
    }
    let stats = tier.stats();
    assert_eq!(stats.breaker, BreakerState::Open);
    assert_eq!(
        (stats.errors, stats.skipped, stats.breaker_opened),
        (2, 2, 1)
    );
    tier.publish(&key("a"), b"a", Duration::ZERO, None);
    drop(tier);
    assert_eq!(backend.requests(), 2, "nothing is sent while it is open");

    let store = store(&backend, options);
    for program in ["a", "b", "c"] {
        assert_eq!(fetch(&store, program), (artifact(program), Fetched::Built));
    }
}

/// A store that fails every `get` and takes every `put`: one that
/// cannot be read from (a value type it does not have, an ACL that
/// denies reads) but takes writes.
#[derive(Debug, Default)]
struct WriteOnly {
    puts: AtomicU64,
}

impl RemoteStore for Arc<WriteOnly> {
    fn get(&self, _: &str, _: u64) -> Result<RemoteValue, RemoteError> {
        Err(down())
    }

    fn put(&self, _: &str, _: &[u8]) -> Result<(), RemoteError> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn fetches_that_all_fail_open_the_breaker_whatever_publishes_succeed() {
    let backend = Arc::new(WriteOnly::default());
    let options = RemoteOptions {
        failure_threshold: 3,
        cool_down: Duration::from_secs(3600),
        ..RemoteOptions::default()
    };
    let tier = RemoteTier::new(Box::new(Arc::clone(&backend)), secret(), options).unwrap();
    let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
    // A publish that succeeds between each two fetches that fail.
    for n in 0..3 {
        if n > 0 {
            tier.publish(&key("built"), b"built", Duration::ZERO, None);
            // Counted once the breaker heard of it.
            while tier.stats().publishes < n {
                std::thread::yield_now();
            }
        }
        assert!(compiles(&tier, &key("a"), load));
    }
    let stats = tier.stats();
    assert_eq!(
        (stats.fetches, stats.errors, stats.publishes),
        (3, 3, 2),
        "{stats}"
    );
    assert_eq!(stats.breaker, BreakerState::Open, "{stats}");
    assert_eq!(stats.breaker_opened, 1);
    // Skipped from now on, both kinds.
    assert!(compiles(&tier, &key("a"), load));
    tier.publish(&key("built"), b"built", Duration::ZERO, None);
    drop(tier);
    assert_eq!(backend.puts.load(Ordering::Relaxed), 2);
}

#[test]
fn a_full_queue_drops_publishes_instead_of_waiting() {
    let backend = Shared::default();
    let options = RemoteOptions {
        queue: 1,
        ..RemoteOptions::default()
    };
    let tier = tier(&backend, options);
    backend.hold_puts(true);
    tier.publish(&key("a"), b"a", Duration::ZERO, None);
    backend.wait_for_puts(1); // the publisher holds "a"
    tier.publish(&key("b"), b"b", Duration::ZERO, None); // queued
    tier.publish(&key("c"), b"c", Duration::ZERO, None); // dropped
    assert_eq!(tier.stats().dropped, 1);
    assert!(
        !tier.wait_for_publishes(Duration::from_millis(50)),
        "\"a\" is held"
    );
    backend.hold_puts(false);
    assert!(tier.wait_for_publishes(Duration::from_secs(30)));
    assert!(backend.value("a").is_some() && backend.value("b").is_some());
    assert!(tier.wait_for_publishes(Duration::ZERO), "none pending");
    drop(tier);
    assert_eq!(backend.value("c"), None);
}

#[test]
#[cfg_attr(miri, ignore)] // file system
fn the_order_is_disk_then_remote_then_build() {
    let backend = Shared::default();
    drop(fetch(&store(&backend, RemoteOptions::default()), "a"));
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        ArtifactStore::open(StoreConfig::at(dir.path()))
            .unwrap()
            .with_remote(tier(&backend, RemoteOptions::default()))
    };
    let store = open();
    assert_eq!(fetch(&store, "a").1, Fetched::Remote);
    assert!(
        store.entry_path(&key("a")).unwrap().exists(),
        "copied to disk"
    );
    let requests = backend.requests();
    assert_eq!(fetch(&store, "a").1, Fetched::Disk);
    assert_eq!(
        backend.requests(),
        requests,
        "a disk hit never asks the remote"
    );
    drop(store);
    // A fresh process reads it from its disk without asking either.
    let store = open();
    assert_eq!(fetch(&store, "a").1, Fetched::Disk);
    assert_eq!(store.remote_stats().unwrap().fetches, 0);
}

#[test]
fn deployments_with_other_secrets_or_namespaces_keep_apart() {
    let backend = Shared::default();
    let with = |secret: Secret, namespace: &str| {
        let options = RemoteOptions {
            namespace: namespace.parse().unwrap(),
            ..RemoteOptions::default()
        };
        let tier = RemoteTier::new(Box::new(backend.clone()), secret, options).unwrap();
        ArtifactStore::disabled().with_remote(tier)
    };
    let other_secret = Secret::from_bytes([9; Secret::LEN]);
    let deployments = [
        with(secret(), "default"),
        with(other_secret.clone(), "default"),
        with(secret(), "staging"),
    ];
    for store in &deployments {
        assert_eq!(fetch(store, "a"), (artifact("a"), Fetched::Built));
    }
    drop(deployments);
    assert_eq!(backend.0.values.lock().unwrap().len(), 3, "three entries");
    // Each finds its own again, none the others'.
    for (secret, namespace) in [(secret(), "default"), (other_secret, "default")] {
        let store = with(secret, namespace);
        assert_eq!(fetch(&store, "a").1, Fetched::Remote);
        assert_eq!(fetch(&store, "b").1, Fetched::Built);
        let stats = store.remote_stats().unwrap();
        assert_eq!((stats.hits, stats.misses, stats.rejected), (1, 1, 0));
    }
    let key_prefix = tier(&backend, RemoteOptions::default())
        .key_prefix()
        .to_owned();
    assert_eq!(key_prefix, default_prefix());
    assert!(
        key_prefix.starts_with("sheaf-jit:v1:default:") && key_prefix.len() == 38,
        "{key_prefix}"
    );
}

/// Options with leases that a test can wait out: a 300 ms time to live,
/// a 200 ms compile estimate.
fn short_leases() -> RemoteOptions {
    RemoteOptions {
        lease_ttl: Some(Duration::from_millis(300)),
        compile_estimate: Duration::from_millis(200),
        ..RemoteOptions::default()
    }
}

#[test]
#[cfg_attr(miri, ignore)] // threads sleeping for real time
fn processes_missing_one_key_at_once_build_it_once() {
    let backend = Shared::leasing();
    // Two stores: two processes (no folder, so nothing merges them locally).
    let stores = [
        store(&backend, short_leases()),
        store(&backend, short_leases()),
    ];
    let builds = AtomicU64::new(0);
    let build = || {
        builds.fetch_add(1, Ordering::Relaxed);
        // Longer than a first poll, shorter than the wait bound.
        std::thread::sleep(Duration::from_millis(50));
        Ok::<_, String>(artifact("a"))
    };
    let load = |artifact: VerifiedArtifact<'_>| Ok::<_, String>(artifact.bytes().to_vec());
    let fetched: Vec<_> = std::thread::scope(|scope| {
        let threads: Vec<_> = stores
            .iter()
            .map(|store| scope.spawn(|| store.fetch_or_build(Some(&key("a")), load, build)))
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(builds.load(Ordering::Relaxed), 1, "built once");
    assert!(fetched.iter().all(|(bytes, _)| *bytes == artifact("a")));
    let mut sources: Vec<_> = fetched.iter().map(|(_, source)| *source).collect();
    sources.sort_by_key(|source| *source == Fetched::Remote);
    assert_eq!(sources, [Fetched::Built, Fetched::Remote]);
    let stats: Vec<_> = stores.iter().map(|s| s.remote_stats().unwrap()).collect();
    let sum = |field: fn(&RemoteStats) -> u64| stats.iter().map(field).sum::<u64>();
    assert_eq!(
        (
            sum(|s| s.leases_taken),
            sum(|s| s.lease_waits),
            sum(|s| s.waits_found)
        ),
        (1, 1, 1),
        "{stats:?}"
    );
    let shown: String = stats.iter().map(ToString::to_string).collect();
    assert!(
        shown.contains("leases 1 taken, 0 lost") && shown.contains("1 waits (1 found, 0 compiled)"),
        "{shown}"
    );
    drop(stores); // the publisher released the lease once published
    assert_eq!(backend.leases(), 0);
}

#[test]
#[cfg_attr(miri, ignore)] // sleeps for real time
fn a_dead_owners_lease_makes_a_waiter_build_after_the_wait_bound() {
    let backend = Shared::leasing();
    let options = short_leases();
    let name = format!("{}{}:lease", default_prefix(), key("a").hex());
    // Taken by a process that died: never renewed, never released.
    let taken = backend.take_lease(&name, "dead:1:0", Duration::from_secs(3600));
    assert_eq!(taken.unwrap(), LeaseAnswer::Taken);
    let store = store(&backend, options);
    let start = Instant::now();
    assert_eq!(fetch(&store, "a"), (artifact("a"), Fetched::Built));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "waits the compile estimate first: {waited:?}"
    );
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.lease_waits, stats.waits_compiled, stats.leases_taken),
        (1, 1, 0),
        "{stats}"
    );
}

#[test]
#[cfg_attr(miri, ignore)] // sleeps for real time
fn an_expired_lease_is_taken_over_by_a_waiter() {
    let backend = Shared::leasing();
    let options = RemoteOptions {
        compile_estimate: Duration::from_secs(3600),
        ..short_leases()
    };
    let name = format!("{}{}:lease", default_prefix(), key("a").hex());
    let ttl = Duration::from_millis(100);
    assert_eq!(
        backend.take_lease(&name, "dead:1:0", ttl).unwrap(),
        LeaseAnswer::Taken
    );
    let store = store(&backend, options);
    // Bounded by the lease's time to live, not the (hour-long) estimate.
    assert_eq!(fetch(&store, "a"), (artifact("a"), Fetched::Built));
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.lease_waits, stats.waits_compiled, stats.leases_taken),
        (1, 1, 1),
        "{stats}"
    );
}

#[test]
fn a_lease_on_a_failing_store_is_a_miss() {
    let backend = Shared::leasing();
    backend.set_down(true);
    let store = store(&backend, short_leases());
    assert_eq!(fetch(&store, "a"), (artifact("a"), Fetched::Built));
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.errors, stats.lease_waits, stats.leases_taken),
        (1, 0, 0)
    );
}

#[test]
fn without_leases_every_miss_builds() {
    let backend = Shared::leasing();
    let options = RemoteOptions {
        lease_ttl: None,
        ..short_leases()
    };
    let store = store(&backend, options);
    assert_eq!(fetch(&store, "a").1, Fetched::Built);
    let zero = RemoteOptions {
        lease_ttl: Some(Duration::ZERO),
        ..short_leases()
    };
    let zero = self::store(&backend, zero);
    assert_eq!(fetch(&zero, "b").1, Fetched::Built);
    assert_eq!(backend.leases(), 0);
    assert_eq!(store.remote_stats().unwrap().leases_taken, 0);
    assert_eq!(zero.remote_stats().unwrap().leases_taken, 0);
}

#[test]
#[cfg_attr(miri, ignore)] // sleeps for real time
fn a_waiter_does_not_wait_anew_when_the_lease_changes_owner() {
    let backend = Shared::leasing();
    let options = RemoteOptions {
        lease_ttl: Some(Duration::from_millis(100)),
        compile_estimate: Duration::from_millis(300),
        ..RemoteOptions::default()
    };
    let name = format!("{}{}:lease", default_prefix(), key("a").hex());
    let hour = Duration::from_secs(3600);
    assert_eq!(
        backend.take_lease(&name, "a", hour).unwrap(),
        LeaseAnswer::Taken
    );
    let store = store(&backend, options);
    let took_over = backend.clone();
    let owners = std::thread::spawn(move || {
        // "a" dies after 200 ms and "b" takes over; "b" publishes 200 ms
        // later: 400 ms after the wait began, past its one bound of 300 ms
        // (which the takeover does not start again: anyone who can write
        // the lease could otherwise hold the waiter for ever).
        std::thread::sleep(Duration::from_millis(200));
        took_over.release_lease(&name, "a").unwrap();
        assert_eq!(
            took_over.take_lease(&name, "b", hour).unwrap(),
            LeaseAnswer::Taken
        );
        std::thread::sleep(Duration::from_millis(200));
        took_over.set_value(
            "a",
            entry::encode(&key("a"), Sealer::Secret(&secret()), &artifact("a")),
        );
        took_over.release_lease(&name, "b").unwrap();
    });
    assert_eq!(fetch(&store, "a"), (artifact("a"), Fetched::Built));
    owners.join().unwrap();
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.lease_waits, stats.waits_found, stats.waits_compiled),
        (1, 0, 1),
        "{stats}"
    );
}
