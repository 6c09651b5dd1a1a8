//! The 4-step shape ping-pong (docs/architecture.md, "The problem"): `sigmoid` alternating `f32[1,5]` and
//! `f32[1,5,1]`.

use jit_cache::{FunctionId, FunctionMode, JitCache, Origin, Provenance};
use test_support::mock_cache::{expected, f32_sig, run, MockCompiler, Ran};

#[test]
fn alternating_shapes_compile_twice_and_keep_two_entries() {
    let calls = if cfg!(miri) { 200 } else { 5_000 };
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let sigmoid = FunctionId::new("sigmoid", 1);
    let (a, b) = (f32_sig(&[1, 5]), f32_sig(&[1, 5, 1]));
    for i in 0..calls {
        let sig = if i % 2 == 0 { &a } else { &b };
        let (ran, outcome) = run(&cache, &sigmoid, sig, &compiler);
        assert_eq!(ran, Ran::Compiled(expected(sig)));
        if i >= 2 {
            assert_eq!(outcome, Provenance::Compiled(Origin::Hit), "call {i}");
        }
    }
    assert_eq!(compiler.compiles(), 2);
    assert_eq!((compiler.compiles_of(&a), compiler.compiles_of(&b)), (1, 1));
    let stats = cache.stats();
    let s = stats.function(&sigmoid).unwrap();
    assert_eq!(s.counters.compiles, 2);
    assert_eq!(s.counters.live_entries, 2);
    assert_eq!(s.counters.hits, calls - 2);
    assert_eq!(s.counters.misses, 2);
    assert_eq!((s.counters.evictions, s.counters.fallback_calls), (0, 0));
    assert_eq!(s.mode, FunctionMode::Normal);
    assert_eq!(compiler.tracker.live(), 2);
    drop(cache);
    assert_eq!(compiler.tracker.live(), 0);
}
