//! Churn over more signatures than the capacity: bounded entries, fallback,
//! interpreter results, relapse and recovery.

use jit_cache::{
    CacheConfig, CachePolicy, DType, FallbackReason, FunctionId, FunctionMode, JitCache,
    Provenance, Signature,
};
use test_support::mock_cache::{expected, run, MockCompiler, Ran};

fn sig(n: i64) -> Signature {
    Signature::builder()
        .arg(DType::F32, &[n, 4])
        .arg(DType::I32, &[n])
        .arg(DType::F32, &[])
        .build()
}

struct Churn {
    cache: JitCache<test_support::mock_cache::MockExe>,
    compiler: MockCompiler,
    func: FunctionId,
    interpreted: u64,
}

impl Churn {
    /// One call; checks the result against its path and the entry bound.
    fn call(&mut self, n: i64) -> Provenance {
        let s = sig(n);
        let (ran, outcome) = run(&self.cache, &self.func, &s, &self.compiler);
        match (&outcome, ran) {
            (Provenance::Interpreted(_), Ran::Interpreted(v)) => {
                self.interpreted += 1;
                assert_eq!(v, expected(&s));
            }
            (Provenance::Compiled(_), Ran::Compiled(v)) => assert_eq!(v, expected(&s)),
            other => panic!("result from the wrong path: {other:?}"),
        }
        let stats = self.cache.stats();
        assert!(stats.total.live_entries <= 8, "{stats}");
        assert_eq!(self.compiler.tracker.live(), stats.total.live_entries);
        outcome
    }

    fn mode(&self) -> FunctionMode {
        self.cache.stats().function(&self.func).unwrap().mode
    }
}

#[test]
fn churn_falls_back_relapses_and_recovers() {
    let mut config = CacheConfig::default();
    config.policy = CachePolicy::LruCoolDown;
    config.thrash_cool_down = 64;
    config.thrash_cool_down_cap = 256;
    let mut c = Churn {
        cache: JitCache::new(config).unwrap(),
        compiler: MockCompiler::new(),
        func: FunctionId::new("attention", 7),
        interpreted: 0,
    };
    // 16 compiles (the default threshold, 64-call window), then fallback.
    for n in 0..16 {
        assert!(matches!(c.call(n), Provenance::Compiled(_)));
    }
    match c.call(16) {
        Provenance::Interpreted(FallbackReason::Thrashing {
            remaining_cool_down,
            ..
        }) => assert_eq!(remaining_cool_down, 63),
        other => panic!("expected fallback, got {other:?}"),
    }
    assert_eq!(c.compiler.compiles(), 16);
    // The cool-down (calls 17..=80): cached signatures (8..16) stay compiled,
    // the others are interpreted, nothing compiles.
    for i in 17..80 {
        let n = i % 20;
        let outcome = c.call(n);
        assert_eq!(
            matches!(outcome, Provenance::Compiled(_)),
            (8..16).contains(&n),
            "call {i}: {outcome:?}"
        );
    }
    assert_eq!(c.compiler.compiles(), 16);
    assert!(matches!(
        c.mode(),
        FunctionMode::Fallback {
            remaining_cool_down: 0,
            cool_down: 64
        }
    ));
    // Call 81 probes; the churn goes on, so it relapses with a doubled cool-down.
    for i in 80..144 {
        c.call(i % 20);
    }
    assert_eq!(c.compiler.compiles(), 32);
    assert!(
        matches!(c.mode(), FunctionMode::Fallback { cool_down: 128, .. }),
        "{:?}",
        c.mode()
    );
    // The workload settles on 4 signatures: after the cool-down the probe
    // compiles the missing ones and the function recovers.
    let before = c.compiler.compiles();
    for i in 0..260 {
        c.call(i % 4);
    }
    assert_eq!(c.mode(), FunctionMode::Normal);
    assert!(c.compiler.compiles() - before <= 4);
    for i in 0..8 {
        assert!(matches!(
            c.call(i % 4),
            Provenance::Compiled(jit_cache::Origin::Hit)
        ));
    }
    let stats = c.cache.stats();
    let f = stats.function(&c.func).unwrap();
    assert_eq!(f.counters.fallback_calls, c.interpreted);
    assert_eq!(f.counters.compiles, c.compiler.compiles() as u64);
    assert_eq!(
        f.counters.evictions + f.counters.live_entries as u64,
        f.counters.compiles
    );
    drop(c.cache);
    assert_eq!(c.compiler.tracker.live(), 0);
}

/// Thrash settings at their extremes (e.g. "never recover" written as
/// `u64::MAX`) must neither overflow nor wrap into an early recovery.
#[test]
fn extreme_thrash_settings_do_not_overflow() {
    let mut config = CacheConfig::default();
    config.policy = CachePolicy::LruCoolDown;
    config.function_capacity = 2;
    config.thrash_window = u64::MAX;
    config.thrash_threshold = 2;
    config.thrash_cool_down = u64::MAX;
    config.thrash_cool_down_cap = u64::MAX;
    let cache = JitCache::new(config).unwrap();
    let compiler = MockCompiler::new();
    let func = FunctionId::new("extreme", 1);
    let mut interpreted = 0;
    for call in 0..40 {
        let (_, outcome) = run(&cache, &func, &sig(call % 5), &compiler);
        interpreted += u64::from(matches!(outcome, Provenance::Interpreted(_)));
    }
    assert!(interpreted > 0, "fallback engaged");
    assert!(
        matches!(
            cache.stats().functions[0].mode,
            FunctionMode::Fallback { .. }
        ),
        "{}",
        cache.stats()
    );
}
