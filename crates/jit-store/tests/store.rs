//! The persistent artifact store: hits without building, damaged and
//! rejected entries replaced, concurrent writers, the size bound, bypasses.

#![cfg(not(miri))] // file system

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use jit_store::{
    ArtifactKey, ArtifactStore, BuildError, Fetched, KeyParts, StoreConfig, StoreError,
    VerifiedArtifact,
};

/// A stand-in compiler: builds `artifact:<program>` padded to `size` bytes,
/// after waiting at `barrier` (when given) so that callers overlap.
#[derive(Debug, Default)]
struct Builder {
    size: usize,
    barrier: Option<Arc<Barrier>>,
    delay: Duration,
    calls: AtomicUsize,
}

impl Builder {
    fn new(size: usize) -> Self {
        Builder {
            size,
            ..Builder::default()
        }
    }

    fn build(&self, program: &str) -> Result<Vec<u8>, std::io::Error> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(barrier) = &self.barrier {
            barrier.wait();
        }
        std::thread::sleep(self.delay);
        let mut bytes = format!("artifact:{program}").into_bytes();
        bytes.resize(self.size.max(bytes.len()), b'.');
        Ok(bytes)
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

fn key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "0.0.0-fake @ 0123456789abcdef",
        runtime: "test-runtime",
        target: "--fake-target",
    })
}

/// Accepts what `Builder` builds, as the runtime accepts real modules.
fn load(artifact: VerifiedArtifact<'_>) -> Result<Vec<u8>, String> {
    let bytes = artifact.bytes();
    if bytes.starts_with(b"artifact:") {
        Ok(bytes.to_vec())
    } else {
        Err("not an artifact".to_owned())
    }
}

/// Fetches `program` from `store`, building it with `builder` on a miss.
fn fetch(store: &ArtifactStore, builder: &Builder, program: &str) -> (Vec<u8>, Fetched) {
    store
        .fetch_or_build(Some(&key(program)), load, || builder.build(program))
        .unwrap()
}

fn store_at(dir: &Path) -> ArtifactStore {
    ArtifactStore::open(StoreConfig::at(dir)).expect("a private folder")
}

/// The entry files in the store's folder (anything else fails the test).
fn entries(store: &ArtifactStore) -> Vec<PathBuf> {
    let Ok(listing) = fs::read_dir(store.directory().unwrap()) else {
        return Vec::new();
    };
    let paths: Vec<PathBuf> = listing.map(|entry| entry.unwrap().path()).collect();
    for path in &paths {
        assert_eq!(
            path.extension().unwrap(),
            "sjit",
            "stray file {}",
            path.display()
        );
    }
    paths
}

#[test]
fn a_fresh_store_serves_a_hit_without_building() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(100);
    let first = store_at(dir.path());
    let (built, fetched) = fetch(&first, &builder, "sigmoid");
    assert_eq!((fetched, builder.calls()), (Fetched::Built, 1));
    let stats = first.stats();
    assert_eq!((stats.hits, stats.misses, stats.corrupt), (0, 1, 0));
    assert_eq!(stats.bytes_written, stats.bytes_on_disk);
    assert!(stats.bytes_written > built.len() as u64);

    // A new store object: only the folder is shared.
    let second = store_at(dir.path());
    let (cached, fetched) = fetch(&second, &builder, "sigmoid");
    assert_eq!(
        (fetched, builder.calls()),
        (Fetched::Disk, 1),
        "a hit must not build"
    );
    assert_eq!(cached, built);
    let stats = second.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.bytes_read),
        (1, 0, built.len() as u64)
    );

    // Another key is another entry.
    fetch(&second, &builder, "softmax");
    assert_eq!(builder.calls(), 2);
    assert_eq!(entries(&second).len(), 2);
}

#[test]
fn damaged_entries_are_detected_deleted_and_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(100);
    let (good, _) = fetch(&store_at(dir.path()), &builder, "sigmoid");
    let [entry] = entries(&store_at(dir.path())).try_into().unwrap();
    let intact = fs::read(&entry).unwrap();

    let mut flipped = intact.clone();
    *flipped.last_mut().unwrap() ^= 0x5a;
    let truncated = intact[..intact.len() / 2].to_vec();
    for (damage, bytes) in [("flipped byte", flipped), ("truncated", truncated)] {
        fs::write(&entry, bytes).unwrap();
        let calls_before = builder.calls();
        let fresh = store_at(dir.path());
        let (artifact, fetched) = fetch(&fresh, &builder, "sigmoid");
        assert_eq!(fetched, Fetched::Built, "{damage}");
        assert_eq!(builder.calls(), calls_before + 1, "{damage}: rebuilt");
        let stats = fresh.stats();
        assert_eq!(stats.corrupt + stats.unauthenticated, 1, "{damage}");
        assert_eq!(artifact, good, "{damage}");
        // The entry was replaced by a good one.
        assert_eq!(fs::read(&entry).unwrap(), intact, "{damage}");
    }
}

#[test]
fn an_entry_the_loader_refuses_is_replaced_and_a_refused_build_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    // A well-formed entry (valid checksum) whose payload the loader refuses.
    let store = store_at(dir.path());
    let garbage = || Ok::<_, std::io::Error>(b"garbage".to_vec());
    store
        .fetch_or_build(
            Some(&key("sigmoid")),
            |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
            garbage,
        )
        .unwrap();

    let builder = Builder::new(10);
    let fresh = store_at(dir.path());
    let (artifact, fetched) = fetch(&fresh, &builder, "sigmoid");
    assert_eq!((fetched, builder.calls()), (Fetched::Built, 1));
    let stats = fresh.stats();
    assert_eq!((stats.hits, stats.misses, stats.corrupt), (0, 1, 1));
    assert!(artifact.starts_with(b"artifact:"));

    // The replacement is used from now on.
    let (again, fetched) = fetch(&store_at(dir.path()), &builder, "sigmoid");
    assert_eq!((fetched, &again), (Fetched::Disk, &artifact));

    // A fresh build the loader refuses is an error, and is not stored.
    let error = fresh
        .fetch_or_build(Some(&key("other")), load, garbage)
        .unwrap_err();
    assert!(matches!(error, BuildError::Rejected(_)), "{error:?}");
    assert_eq!(entries(&fresh).len(), 1);

    // The caller may also drop an entry it found unusable.
    assert!(fresh.invalidate(&key("sigmoid")));
    assert!(!fresh.invalidate(&key("sigmoid")));
    assert!(entries(&fresh).is_empty());
}

#[test]
fn concurrent_writers_of_one_key_leave_one_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    const WRITERS: usize = 4;
    // Big enough that the writes take a while and overlap.
    const SIZE: usize = 4 << 20;
    for round in 0..5 {
        let program = format!("module @round_{round} {{}}");
        let barrier = Arc::new(Barrier::new(WRITERS));
        let builders: Vec<Builder> = (0..WRITERS)
            .map(|_| Builder {
                barrier: Some(barrier.clone()),
                ..Builder::new(SIZE)
            })
            .collect();
        // One store object per writer, as separate processes would have.
        let stores: Vec<ArtifactStore> = builders.iter().map(|_| store_at(dir.path())).collect();
        let results: Vec<Vec<u8>> = std::thread::scope(|scope| {
            let handles: Vec<_> = stores
                .iter()
                .zip(&builders)
                .map(|(store, builder)| scope.spawn(|| fetch(store, builder, &program).0))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (builder, store) in builders.iter().zip(&stores) {
            assert_eq!(builder.calls(), 1, "every writer missed and built");
            assert_eq!(store.stats().write_errors, 0);
        }
        assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
        // Exactly one entry per key so far, and a fresh reader finds it whole.
        assert_eq!(entries(&stores[0]).len(), round + 1);
        let reader = Builder::new(SIZE);
        let (hit, fetched) = fetch(&store_at(dir.path()), &reader, &program);
        assert_eq!((fetched, reader.calls()), (Fetched::Disk, 0));
        assert_eq!(hit, results[0]);
    }
}

#[test]
fn concurrent_misses_in_one_store_build_once() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder {
        delay: Duration::from_millis(200),
        ..Builder::new(100)
    };
    let store = store_at(dir.path());
    let results: Vec<Vec<u8>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| fetch(&store, &builder, "module {}").0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(builder.calls(), 1);
    assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
    let stats = store.stats();
    assert_eq!((stats.misses, stats.hits), (1, 3));
}

#[test]
fn waiters_of_a_failed_build_build_in_turn_not_all_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_at(dir.path());
    let calls = AtomicUsize::new(0);
    let running = AtomicUsize::new(0);
    let overlapped = AtomicUsize::new(0);
    let outcomes: Vec<bool> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    store
                        .fetch_or_build(Some(&key("flaky")), load, || {
                            if running.fetch_add(1, Ordering::SeqCst) > 0 {
                                overlapped.fetch_add(1, Ordering::SeqCst);
                            }
                            std::thread::sleep(Duration::from_millis(50));
                            running.fetch_sub(1, Ordering::SeqCst);
                            // The first build fails; the second succeeds.
                            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                                Err(std::io::Error::other("transient failure"))
                            } else {
                                Ok(b"artifact:flaky".to_vec())
                            }
                        })
                        .is_ok()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(overlapped.load(Ordering::SeqCst), 0, "builds never overlap");
    assert_eq!(calls.load(Ordering::SeqCst), 2, "one failure, one success");
    assert_eq!(outcomes.iter().filter(|ok| !**ok).count(), 1);
}

#[test]
fn the_size_bound_evicts_the_least_recently_used_entries() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(1000);
    // Entries are 1000 bytes plus an 88-byte header: four do not fit in
    // 4000 bytes, and eviction stops below 90 % (3600), i.e. at three.
    let mut config = StoreConfig::at(dir.path());
    config.max_bytes = 4000;
    let store = ArtifactStore::open(config.clone()).unwrap();
    for name in ["a", "b", "c"] {
        fetch(&store, &builder, name);
    }
    // Make the ages unambiguous whatever the file system's timestamp
    // granularity: a oldest, then b, then c.
    let now = SystemTime::now();
    for entry in entries(&store) {
        let text = fs::read(&entry).unwrap();
        let age = [b"artifact:a", b"artifact:b", b"artifact:c"]
            .iter()
            .position(|marker| text.windows(marker.len()).any(|w| w == *marker))
            .unwrap();
        let file = fs::File::options().write(true).open(&entry).unwrap();
        file.set_modified(now - Duration::from_secs(30 - 10 * age as u64))
            .unwrap();
    }
    // A hit makes `a` the most recently used.
    fetch(&store, &builder, "a");
    assert_eq!(builder.calls(), 3);

    fetch(&store, &builder, "d");
    assert_eq!(store.stats().evictions, 1);
    assert_eq!(store.stats().bytes_on_disk, 3 * 1088);
    assert_eq!(entries(&store).len(), 3);
    // `b` was the least recently used: it is gone, the others hit.
    let fresh = ArtifactStore::open(config).unwrap();
    for name in ["a", "c", "d"] {
        fetch(&fresh, &builder, name);
    }
    assert_eq!(builder.calls(), 4);
    fetch(&fresh, &builder, "b");
    assert_eq!(builder.calls(), 5);
}

#[test]
fn disabled_stores_and_unkeyed_builds_bypass_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(10);
    let disabled = ArtifactStore::disabled();
    assert_eq!(disabled.directory(), None);
    for _ in 0..2 {
        fetch(&disabled, &builder, "module {}");
    }
    assert_eq!(builder.calls(), 2);
    assert_eq!(disabled.stats().bypassed, 2);

    // A build the caller cannot key (e.g. a compiler that does not identify
    // its build) is never stored.
    let store = store_at(dir.path());
    for _ in 0..2 {
        store
            .fetch_or_build(None, load, || builder.build("module {}"))
            .unwrap();
    }
    assert_eq!(builder.calls(), 4);
    assert_eq!(store.stats().bypassed, 2);
    assert!(entries(&store).is_empty());
}

#[test]
fn an_unwritable_folder_does_not_fail_builds() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(10);
    let store = store_at(dir.path());
    // After the store opened, its entries' folder is replaced by a file.
    fs::remove_dir_all(dir.path().join("vmfb")).unwrap();
    fs::write(dir.path().join("vmfb"), b"").unwrap();
    fetch(&store, &builder, "module {}");
    let stats = store.stats();
    assert_eq!(
        (stats.misses, stats.write_errors, stats.bytes_written),
        (1, 1, 0)
    );
    // A store cannot open there at all.
    let blocked = dir.path().join("vmfb");
    assert!(matches!(
        ArtifactStore::open(StoreConfig::at(&blocked)),
        Err(StoreError::Io { .. })
    ));
}

#[test]
fn each_disk_miss_is_counted_once_by_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let builder = Builder::new(10);
    let reasons = |store: &ArtifactStore| {
        let s = store.stats();
        (s.absent, s.corrupt, s.refused, s.unauthenticated, s.misses)
    };
    // Absent: counted once per build, though the store looks twice (before
    // and after claiming the build).
    let first = store_at(dir.path());
    fetch(&first, &builder, "absent");
    assert_eq!(reasons(&first), (1, 0, 0, 0, 1));
    assert_eq!(first.stats().hits, 0);
    // A lookup without a build counts its reason too.
    assert!(first.fetch(&key("nothing"), load).is_none());
    assert_eq!(reasons(&first), (2, 0, 0, 0, 1));

    // Refused by the caller's `load`: counted as refused, of corrupt.
    store_at(dir.path())
        .fetch_or_build(
            Some(&key("refused")),
            |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
            || Ok::<_, std::io::Error>(b"garbage".to_vec()),
        )
        .unwrap();
    let second = store_at(dir.path());
    fetch(&second, &builder, "refused");
    assert_eq!(reasons(&second), (0, 1, 1, 0, 1));

    // Unauthenticated: a flipped bit of the payload.
    let entry = first.entry_path(&key("absent")).unwrap();
    let mut bytes = fs::read(&entry).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(&entry, bytes).unwrap();
    let third = store_at(dir.path());
    fetch(&third, &builder, "absent");
    assert_eq!(reasons(&third), (0, 0, 0, 1, 1));
}
