//! The persistent artifact cache: hits without compiling, damaged and
//! rejected entries replaced, concurrent writers, the size bound.

#![cfg(not(any(miri, feature = "mock")))]

mod compiler_support;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime};

use compiler_support::*;
use iree_safe::compiler::{
    Artifact, CompileError, CompileOptions, Compiler, CompilerVersion, DiskCache, DiskCacheConfig,
};

/// A stand-in compiler: returns `artifact:<mlir>` padded to `size` bytes,
/// after waiting at `barrier` (when given) so that callers overlap.
#[derive(Debug)]
struct Fake {
    version: CompilerVersion,
    size: usize,
    barrier: Option<Arc<Barrier>>,
    delay: Duration,
    calls: AtomicUsize,
}

impl Fake {
    fn new(size: usize) -> Self {
        Fake {
            version: CompilerVersion::new("0.0.0-fake @ 0123456789abcdef", None),
            size,
            barrier: None,
            delay: Duration::ZERO,
            calls: AtomicUsize::new(0),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Compiler for Fake {
    fn compile(&self, mlir: &str, _: &CompileOptions) -> Result<Artifact, CompileError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(barrier) = &self.barrier {
            barrier.wait();
        }
        std::thread::sleep(self.delay);
        let mut bytes = format!("artifact:{mlir}").into_bytes();
        bytes.resize(self.size.max(bytes.len()), b'.');
        Ok(Artifact::new(bytes))
    }

    fn version(&self) -> &CompilerVersion {
        &self.version
    }
}

fn cache(compiler: Arc<dyn Compiler>, dir: &Path) -> DiskCache {
    DiskCache::new(compiler, DiskCacheConfig::at(dir))
}

/// The entry files in the cache folder, and whether anything else is there.
fn entries(cache: &DiskCache) -> Vec<PathBuf> {
    let Ok(listing) = fs::read_dir(cache.directory().unwrap()) else {
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
fn a_fresh_cache_serves_a_hit_without_invoking_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    let program = sigmoid();
    let mlir = program.source();

    let first_compiler = Counting::new(Arc::new(in_process()));
    let first = cache(first_compiler.clone(), dir.path());
    let compiled = first.compile(&mlir, &program.options).unwrap();
    assert_eq!(first_compiler.calls(), 1);
    let stats = first.stats();
    assert_eq!((stats.hits, stats.misses, stats.corrupt), (0, 1, 0));
    assert_eq!(stats.bytes_written, stats.bytes_on_disk);
    assert!(stats.bytes_written > compiled.len() as u64);

    // A new compiler and a new cache object: only the folder is shared.
    let second_compiler = Counting::new(Arc::new(in_process()));
    let second = cache(second_compiler.clone(), dir.path());
    let cached = second.compile(&mlir, &program.options).unwrap();
    assert_eq!(second_compiler.calls(), 0, "a hit must not compile");
    assert_eq!(cached, compiled);
    let stats = second.stats();
    assert_eq!(
        (stats.hits, stats.misses, stats.bytes_read),
        (1, 0, compiled.len() as u64)
    );
    check(&program, &cached);

    // Other options are another entry.
    let other = CompileOptions {
        target_cpu: "generic".to_owned(),
        ..program.options.clone()
    };
    check(&program, &second.compile(&mlir, &other).unwrap());
    assert_eq!(second_compiler.calls(), 1);
    assert_eq!(entries(&second).len(), 2);
}

#[test]
fn damaged_entries_are_detected_deleted_and_recompiled() {
    let dir = tempfile::tempdir().unwrap();
    let program = sigmoid();
    let mlir = program.source();
    let compiler = Counting::new(Arc::new(in_process()));
    let good = cache(compiler.clone(), dir.path())
        .compile(&mlir, &program.options)
        .unwrap();
    let [entry] = entries(&cache(compiler.clone(), dir.path()))
        .try_into()
        .unwrap();
    let intact = fs::read(&entry).unwrap();

    let mut flipped = intact.clone();
    *flipped.last_mut().unwrap() ^= 0x5a;
    let truncated = intact[..intact.len() / 2].to_vec();
    for (damage, bytes) in [("flipped byte", flipped), ("truncated", truncated)] {
        fs::write(&entry, bytes).unwrap();
        let calls_before = compiler.calls();
        let fresh = cache(compiler.clone(), dir.path());
        let artifact = fresh.compile(&mlir, &program.options).unwrap();
        assert_eq!(compiler.calls(), calls_before + 1, "{damage}: recompiled");
        assert_eq!(fresh.stats().corrupt, 1, "{damage}");
        assert_eq!(artifact, good, "{damage}");
        check(&program, &artifact);
        // The entry was replaced by a good one.
        assert_eq!(fs::read(&entry).unwrap(), intact, "{damage}");
    }
}

#[test]
fn an_entry_the_runtime_refuses_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let program = sigmoid();
    let mlir = program.source();
    let real = Counting::new(Arc::new(in_process()));
    // A well-formed entry (valid checksum) whose payload is not a module,
    // stored under the real compiler's key.
    let garbage = Arc::new(Fake {
        version: real.version().clone(),
        ..Fake::new(64)
    });
    cache(garbage.clone(), dir.path())
        .compile(&mlir, &program.options)
        .unwrap();

    let loads = |bytes: &[u8]| runtime().load(bytes).map(drop).map_err(|e| e.to_string());
    let fresh = cache(real.clone(), dir.path());
    let artifact = fresh
        .compile_validated(&mlir, &program.options, &loads)
        .unwrap();
    assert_eq!(real.calls(), 1);
    let stats = fresh.stats();
    assert_eq!((stats.hits, stats.misses, stats.corrupt), (0, 1, 1));
    check(&program, &artifact);

    // The replacement is used from now on.
    let again = cache(real.clone(), dir.path());
    assert_eq!(
        again
            .compile_validated(&mlir, &program.options, &loads)
            .unwrap(),
        artifact
    );
    assert_eq!(real.calls(), 1);

    // A fresh artifact the runtime refuses is an error, and is not stored.
    let refused = cache(garbage, dir.path());
    let other = CompileOptions {
        target_cpu: "generic".to_owned(),
        ..program.options.clone()
    };
    let error = refused
        .compile_validated(&mlir, &other, &loads)
        .unwrap_err();
    assert!(matches!(error, CompileError::Rejected { .. }), "{error:?}");
    assert_eq!(entries(&refused).len(), 1);

    // The caller may also drop an entry it found unusable.
    assert!(again.invalidate(&mlir, &program.options).unwrap());
    assert!(!again.invalidate(&mlir, &program.options).unwrap());
    assert!(entries(&again).is_empty());
}

#[test]
fn concurrent_writers_of_one_key_leave_one_valid_file() {
    let dir = tempfile::tempdir().unwrap();
    const WRITERS: usize = 4;
    // Big enough that the writes take a while and overlap.
    const SIZE: usize = 4 << 20;
    for round in 0..5 {
        let mlir = format!("module @round_{round} {{}}");
        let barrier = Arc::new(Barrier::new(WRITERS));
        let fakes: Vec<Arc<Fake>> = (0..WRITERS)
            .map(|_| {
                Arc::new(Fake {
                    barrier: Some(barrier.clone()),
                    ..Fake::new(SIZE)
                })
            })
            .collect();
        // One cache object per writer, as separate processes would have.
        let caches: Vec<DiskCache> = fakes
            .iter()
            .map(|fake| cache(fake.clone(), dir.path()))
            .collect();
        let results: Vec<Artifact> = std::thread::scope(|scope| {
            let handles: Vec<_> = caches
                .iter()
                .map(|cache| scope.spawn(|| cache.compile(&mlir, &CompileOptions::default())))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        for (fake, cache) in fakes.iter().zip(&caches) {
            assert_eq!(fake.calls(), 1, "every writer missed and compiled");
            assert_eq!(cache.stats().write_errors, 0);
        }
        assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
        // Exactly one entry per key so far, and a fresh reader finds it whole.
        assert_eq!(entries(&caches[0]).len(), round + 1);
        let reader = Arc::new(Fake::new(SIZE));
        let hit = cache(reader.clone(), dir.path())
            .compile(&mlir, &CompileOptions::default())
            .unwrap();
        assert_eq!(reader.calls(), 0);
        assert_eq!(hit, results[0]);
    }
}

#[test]
fn concurrent_misses_in_one_cache_compile_once() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake {
        delay: Duration::from_millis(200),
        ..Fake::new(100)
    });
    let cache = cache(fake.clone(), dir.path());
    let results: Vec<Artifact> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| cache.compile("module {}", &CompileOptions::default())))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect()
    });
    assert_eq!(fake.calls(), 1);
    assert!(results.windows(2).all(|pair| pair[0] == pair[1]));
    let stats = cache.stats();
    assert_eq!((stats.misses, stats.hits), (1, 3));
}

#[test]
fn the_size_bound_evicts_the_least_recently_used_entries() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::new(1000));
    // Entries are 1000 bytes plus an 88-byte header: four do not fit in
    // 4000 bytes, and eviction stops below 90 % (3600), i.e. at three.
    let config = DiskCacheConfig {
        max_bytes: 4000,
        ..DiskCacheConfig::at(dir.path())
    };
    let cache = DiskCache::new(fake.clone(), config.clone());
    let options = CompileOptions::default();
    for name in ["a", "b", "c"] {
        cache.compile(name, &options).unwrap();
    }
    // Make the ages unambiguous whatever the file system's timestamp
    // granularity: a oldest, then b, then c.
    let now = SystemTime::now();
    for entry in entries(&cache) {
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
    cache.compile("a", &options).unwrap();
    assert_eq!(fake.calls(), 3);

    cache.compile("d", &options).unwrap();
    assert_eq!(cache.stats().evictions, 1);
    assert_eq!(cache.stats().bytes_on_disk, 3 * 1088);
    assert_eq!(entries(&cache).len(), 3);
    // `b` was the least recently used: it is gone, the others hit.
    let fresh = DiskCache::new(fake.clone(), config);
    for name in ["a", "c", "d"] {
        fresh.compile(name, &options).unwrap();
    }
    assert_eq!(fake.calls(), 4);
    fresh.compile("b", &options).unwrap();
    assert_eq!(fake.calls(), 5);
}

#[test]
fn disabled_caches_and_unidentified_compilers_bypass_the_disk() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Arc::new(Fake::new(10));
    let disabled = DiskCache::disabled(fake.clone());
    assert_eq!(disabled.directory(), None);
    for _ in 0..2 {
        disabled
            .compile("module {}", &CompileOptions::default())
            .unwrap();
    }
    assert_eq!(fake.calls(), 2);
    assert_eq!(disabled.stats().bypassed, 2);

    // A development build without a version string cannot be told apart
    // from another one: its artifacts are never cached.
    let anonymous = Arc::new(Fake {
        version: CompilerVersion::new("", None),
        ..Fake::new(10)
    });
    let cache = cache(anonymous.clone(), dir.path());
    for _ in 0..2 {
        cache
            .compile("module {}", &CompileOptions::default())
            .unwrap();
    }
    assert_eq!(anonymous.calls(), 2);
    assert_eq!(cache.stats().bypassed, 2);
    assert!(entries(&cache).is_empty());
}

#[test]
fn an_unwritable_folder_does_not_fail_compilations() {
    let dir = tempfile::tempdir().unwrap();
    // The cache folder's place is taken by a file.
    let blocked = dir.path().join("blocked");
    fs::write(&blocked, b"").unwrap();
    let fake = Arc::new(Fake::new(10));
    let cache = cache(fake.clone(), &blocked);
    cache
        .compile("module {}", &CompileOptions::default())
        .unwrap();
    let stats = cache.stats();
    assert_eq!(
        (stats.misses, stats.write_errors, stats.bytes_written),
        (1, 1, 0)
    );
}
