//! Executables compiled ahead of time (`JitCache::insert`): cached like a
//! compile, bounded like one, served as hits.

use std::time::Duration;

use jit_cache::{CacheConfig, FunctionId, JitCache, Origin, Provenance};
use test_support::mock_cache::{expected, f32_sig, run, MockCompiler, Ran};

#[test]
fn inserted_executables_are_hits_within_the_capacity() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.function_capacity = 2;
        config
    })
    .unwrap();
    let f = FunctionId::new("layer", 1);
    let sigs: Vec<_> = (1..=3).map(|n| f32_sig(&[n, 4])).collect();
    for sig in &sigs {
        let exe = compiler.compile(sig).unwrap();
        assert!(cache.insert(&f, sig, exe, Duration::from_millis(5)));
    }
    // A third insert evicted the first: the capacity holds.
    assert!(!cache.contains(&f, &sigs[0]));
    assert!(cache.contains(&f, &sigs[1]) && cache.contains(&f, &sigs[2]));
    let again = compiler.compile(&sigs[2]).unwrap();
    assert!(
        !cache.insert(&f, &sigs[2], again, Duration::ZERO),
        "cached already"
    );
    assert_eq!(compiler.tracker.live(), 2, "the refused one was dropped");
    let (ran, outcome) = run(&cache, &f, &sigs[2], &compiler);
    assert_eq!(
        (ran, outcome),
        (
            Ran::Compiled(expected(&sigs[2])),
            Provenance::Compiled(Origin::Hit)
        )
    );
    let stats = cache.stats();
    let c = &stats.function(&f).unwrap().counters;
    assert_eq!((c.compiles, c.evictions, c.live_entries), (3, 1, 2));
    assert_eq!(c.compile_time, Duration::from_millis(15));
    drop(cache);
    assert_eq!(compiler.tracker.live(), 0);
}
