//! Global entry and byte budgets, eviction across functions, and the release
//! of every executable exactly once.

use jit_cache::{
    CacheConfig, Dispatch, EvictionCause, FunctionId, JitCache, MissReason, Origin, Provenance,
};
use test_support::mock_cache::{expected, f32_sig, run, MockCompiler, Ran};

fn compiled_now(outcome: Provenance) -> MissReason {
    match outcome {
        Provenance::Compiled(Origin::CompiledNow { miss }) => miss,
        other => panic!("expected a compile, got {other:?}"),
    }
}

#[test]
fn the_entry_budget_evicts_the_global_lru_whatever_its_function() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.max_total_entries = 5;
        config
    })
    .unwrap();
    let f: Vec<FunctionId> = (0..3)
        .map(|i| FunctionId::new(format!("f{i}"), 0))
        .collect();
    let (s1, s2) = (f32_sig(&[1]), f32_sig(&[2]));
    for (func, sig) in [(0, &s1), (1, &s1), (2, &s1), (0, &s2), (1, &s2)] {
        run(&cache, &f[func], sig, &compiler);
    }
    // Touch f0's oldest entry; f1's (f32[1]) is now the least recently used.
    assert_eq!(
        run(&cache, &f[0], &s1, &compiler).1,
        Provenance::Compiled(Origin::Hit)
    );
    run(&cache, &f[2], &s2, &compiler);
    let stats = cache.stats();
    assert_eq!(stats.total.live_entries, 5);
    let live: Vec<usize> = f
        .iter()
        .map(|id| stats.function(id).unwrap().counters.live_entries)
        .collect();
    assert_eq!(live, [2, 1, 2]);
    assert_eq!(stats.function(&f[1]).unwrap().counters.evictions, 1);
    assert_eq!(
        compiler.tracker.live(),
        5,
        "the evicted executable was dropped at once"
    );
    // Calling it again explains the eviction.
    let miss = compiled_now(run(&cache, &f[1], &s1, &compiler).1);
    assert_eq!(
        miss,
        MissReason::Evicted {
            cause: EvictionCause::EntryBudget { max_entries: 5 },
            differences: s2.differences(&s1),
        }
    );
    assert_eq!(cache.stats().total.evictions, 2);
    drop(cache);
    assert_eq!(compiler.tracker.created(), 7);
    assert_eq!(compiler.tracker.dropped(), 7);
}

#[test]
fn the_byte_budget_evicts_until_the_bytes_fit_and_skips_oversized_executables() {
    // Size from the first dim: f32[n] weighs n bytes.
    let compiler = MockCompiler::with(
        |s| s.args()[0].dims()[0] as usize,
        |_| test_support::mock_cache::Behaviour::Succeed,
    );
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.max_total_bytes = 1000;
        config
    })
    .unwrap();
    let (a, b) = (FunctionId::new("a", 0), FunctionId::new("b", 0));
    run(&cache, &a, &f32_sig(&[400]), &compiler);
    run(&cache, &b, &f32_sig(&[300]), &compiler);
    run(&cache, &a, &f32_sig(&[200]), &compiler);
    assert_eq!(cache.stats().total.live_bytes, 900);
    // 700 more bytes: the two oldest (400 of a, then 300 of b) must go.
    run(&cache, &b, &f32_sig(&[700]), &compiler);
    let stats = cache.stats();
    assert_eq!((stats.total.live_entries, stats.total.live_bytes), (2, 900));
    assert_eq!(stats.function(&a).unwrap().counters.live_bytes, 200);
    assert_eq!(stats.total.evictions, 2);
    assert_eq!(compiler.tracker.live(), 2);
    // An executable larger than the whole budget runs but is not cached.
    let huge = f32_sig(&[1500]);
    for _ in 0..2 {
        let (ran, outcome) = run(&cache, &a, &huge, &compiler);
        assert_eq!(ran, Ran::Compiled(expected(&huge)));
        assert!(matches!(
            outcome,
            Provenance::Compiled(Origin::CompiledNow { .. })
        ));
    }
    assert_eq!(compiler.compiles_of(&huge), 2);
    assert_eq!(cache.stats().total.live_bytes, 900);
    assert_eq!(compiler.tracker.live(), 2);
    drop(cache);
    assert_eq!(compiler.tracker.live(), 0);
}

#[test]
fn an_entry_evicted_while_in_use_lives_until_the_call_ends() {
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    let sig = f32_sig(&[1, 5]);
    let Dispatch::Compiled { exe, .. } = cache.get_or_compile(&f, &sig, |s| compiler.compile(s))
    else {
        panic!("expected compiled code");
    };
    assert_eq!(cache.evict_function(&f), 1);
    assert_eq!(cache.stats().total.live_entries, 0);
    assert_eq!(compiler.tracker.live(), 1, "still in use");
    assert_eq!(exe.result, expected(&sig));
    drop(exe);
    assert_eq!(compiler.tracker.live(), 0);
    assert!(cache.stats().function(&f).is_none());
    assert_eq!(cache.stats().total.evictions, 1);
}

#[test]
fn per_function_capacity_overrides_and_clear() {
    let compiler = MockCompiler::new();
    let mut config = CacheConfig::default();
    config.function_capacity_overrides.insert("small".into(), 2);
    let cache = JitCache::new(config).unwrap();
    let (small, big) = (FunctionId::new("small", 0), FunctionId::new("big", 0));
    for n in 1..=5 {
        run(&cache, &small, &f32_sig(&[n]), &compiler);
        run(&cache, &big, &f32_sig(&[n]), &compiler);
    }
    let stats = cache.stats();
    assert_eq!(stats.function(&small).unwrap().capacity, 2);
    assert_eq!(stats.function(&small).unwrap().counters.live_entries, 2);
    assert_eq!(stats.function(&big).unwrap().counters.live_entries, 5);
    assert_eq!(compiler.tracker.live(), 7);
    assert_eq!(cache.clear(), 7);
    assert_eq!(compiler.tracker.live(), 0);
    let stats = cache.stats();
    // "small" compiled its first 2 signatures only: at capacity, signatures
    // called once are not admitted.
    assert_eq!((stats.total.live_entries, stats.total.evictions), (0, 7));
    assert!(stats.functions.is_empty());
    // A redefined function is a different function: it compiles anew.
    run(
        &cache,
        &FunctionId::new("big", 1),
        &f32_sig(&[1]),
        &compiler,
    );
    run(
        &cache,
        &FunctionId::new("big", 0),
        &f32_sig(&[1]),
        &compiler,
    );
    assert_eq!(compiler.tracker.created(), 2 + 5 + 2);
}

#[test]
fn the_report_has_a_row_per_function_and_a_total() {
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let f = FunctionId::new("sigmoid", 1);
    for dims in [&[1, 5][..], &[1, 5, 1], &[1, 5]] {
        run(&cache, &f, &f32_sig(dims), &compiler);
    }
    let report = cache.stats().to_string();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 4, "{report}");
    assert!(
        lines[0].starts_with("jit-cache: 1 functions, 2/4096 entries, 2.0 KiB/256 MiB"),
        "{report}"
    );
    assert!(
        lines[1].starts_with("function ") && lines[1].contains("compile time"),
        "{report}"
    );
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    // name, calls, hits, misses, compiles, failed
    assert_eq!(row[..6], ["sigmoid", "3", "1", "2", "2", "0"], "{report}");
    assert!(
        lines[2].contains("normal  arg 0: rank 2 → 3 (f32[1,5] vs f32[1,5,1])"),
        "{report}"
    );
    assert!(lines[3].starts_with("(total)"), "{report}");
}
