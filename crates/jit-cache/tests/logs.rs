//! Log output: the miss trace and the thrash warnings. Every test here
//! captures logs through the process-global subscriber of `capture_logs`, so
//! they sit in their own binary.

use jit_cache::{CacheConfig, CachePolicy, FunctionId, FunctionMode, JitCache};
use test_support::mock_cache::{capture_logs, expected, f32_sig, run, Behaviour, MockCompiler};

#[test]
fn misses_are_explained_in_the_trace() {
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let sigmoid = FunctionId::new("sigmoid", 1);
    let (a, b) = (f32_sig(&[1, 5]), f32_sig(&[1, 5, 1]));
    let ((), logs) = capture_logs(|| {
        for sig in [&a, &b, &a, &b] {
            run(&cache, &sigmoid, sig, &compiler);
        }
    });
    let misses: Vec<&str> = logs.lines().filter(|l| l.contains(": miss #")).collect();
    assert_eq!(misses.len(), 2, "{logs}");
    assert!(
        misses[0].contains("sigmoid: miss #1 (first call) -> compile"),
        "{logs}"
    );
    assert!(
        misses[1]
            .contains("sigmoid: miss #2 (arg 0: rank 2 → 3 (f32[1,5] vs f32[1,5,1])) -> compile"),
        "{logs}"
    );
}

/// With one slot per function (the original Sheaf JIT), the trace shows the
/// ping-pong, and thrash fallback bounds the compiles it costs.
#[test]
fn one_slot_reproduces_the_ping_pong_and_fallback_bounds_it() {
    let compiler = MockCompiler::new();
    let mut config = CacheConfig::default();
    config.policy = CachePolicy::LruCoolDown;
    config.function_capacity = 1;
    let cache = JitCache::new(config).unwrap();
    let sigmoid = FunctionId::new("sigmoid", 1);
    let (a, b) = (f32_sig(&[1, 5]), f32_sig(&[1, 5, 1]));
    let calls = 40;
    let ((), logs) = capture_logs(|| {
        for i in 0..calls {
            let sig = if i % 2 == 0 { &a } else { &b };
            let (ran, _) = run(&cache, &sigmoid, sig, &compiler);
            assert_eq!(ran.value(), expected(sig));
        }
    });
    assert!(
        logs.contains(
            "sigmoid: miss #3 (arg 0: rank 3 → 2 (f32[1,5,1] vs f32[1,5]); evicted earlier: \
             function capacity 1 reached) -> compile"
        ),
        "{logs}"
    );
    // The default threshold allows 16 compiles per 64 calls; then fallback.
    assert_eq!(compiler.compiles(), 16);
    let warns: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warns.len(), 1, "{logs}");
    assert!(
        warns[0].contains("sigmoid: 16 compiles in the last 64 calls"),
        "{}",
        warns[0]
    );
    assert!(
        warns[0].contains("CacheConfig::thrash_threshold"),
        "{}",
        warns[0]
    );
    assert!(warns[0].contains("Last miss: arg 0: rank"), "{}", warns[0]);
    let s = cache.stats();
    let s = s.function(&sigmoid).unwrap();
    assert_eq!(s.counters.live_entries, 1);
    // Calls 17..40 alternate: the cached shape hits, the other is interpreted.
    assert_eq!(s.counters.fallback_calls, (calls - 16) / 2);
    assert!(matches!(s.mode, FunctionMode::Fallback { .. }));
}

/// Each thrash transition is logged once, at warn level, with the function,
/// the last miss and the setting to change.
#[test]
fn each_thrash_transition_is_logged_once() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.policy = CachePolicy::LruCoolDown;
        config.function_capacity = 1;
        config.thrash_window = 8;
        config.thrash_threshold = 2;
        config.thrash_cool_down = 4;
        config.thrash_cool_down_cap = 6;
        config
    })
    .unwrap();
    let f = FunctionId::new("gelu", 9);
    let sigs = [f32_sig(&[1]), f32_sig(&[2]), f32_sig(&[3])];
    let ((), logs) = capture_logs(|| {
        // Cycling through 3 signatures: engage, probe, relapse, probe, relapse.
        for i in 0..24 {
            run(&cache, &f, &sigs[i % 3], &compiler);
        }
        // One signature only: the next probe recovers.
        for _ in 0..20 {
            run(&cache, &f, &sigs[0], &compiler);
        }
    });
    let warns: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    let kinds: Vec<&str> = warns
        .iter()
        .map(|w| {
            if w.contains("reached the thrash threshold") {
                "engaged"
            } else if w.contains("compiling new signatures again") {
                "probe"
            } else if w.contains("still thrashing") {
                "relapse"
            } else if w.contains("back to normal") {
                "recovered"
            } else {
                "other"
            }
        })
        .collect();
    assert_eq!(
        kinds[..5],
        ["engaged", "probe", "relapse", "probe", "relapse"],
        "{logs}"
    );
    assert_eq!(kinds[kinds.len() - 2..], ["probe", "recovered"], "{logs}");
    assert!(!kinds.contains(&"other"), "{logs}");
    for w in &warns {
        assert!(w.contains("gelu: "), "{w}");
        assert!(w.contains("CacheConfig::"), "{w}");
        assert!(w.contains("Last miss: "), "{w}");
    }
    assert!(
        warns[2]
            .contains("next 6 calls (doubled, capped by CacheConfig::thrash_cool_down_cap = 6)"),
        "{}",
        warns[2]
    );
    assert_eq!(
        cache.stats().function(&f).unwrap().mode,
        FunctionMode::Normal
    );
}

/// Under the adaptive policy the trace says why each miss at capacity does
/// or does not compile, and the budget's changes are warnings.
#[test]
fn admission_decisions_and_budget_changes_are_logged() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.function_capacity = 2;
        config
    })
    .unwrap();
    let f = FunctionId::new("conv", 3);
    let mut restricted = false;
    let ((), logs) = capture_logs(|| {
        // Bursts of 12 calls on one signature after another: each burst's
        // entry is evicted long before it serves its share of calls.
        for k in 0..12 {
            for _ in 0..12 {
                run(&cache, &f, &f32_sig(&[k]), &compiler);
            }
            restricted |= matches!(
                cache.stats().function(&f).unwrap().mode,
                FunctionMode::Restricted { .. }
            );
        }
        // One signature for good: its entry pays off.
        for _ in 0..300 {
            run(&cache, &f, &f32_sig(&[99]), &compiler);
        }
    });
    assert!(restricted, "{logs}");
    assert!(
        logs.contains("conv: miss #3 (arg 0: dim 0: 1 → 2 (f32[1] vs f32[2])) -> interpret (not admitted at capacity: not called recently)"),
        "{logs}"
    );
    assert!(
        logs.contains("-> compile (admitted at capacity: the working set moved to"),
        "{logs}"
    );
    let warns: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warns.len(), 2, "{logs}");
    assert!(
        warns[0].contains("conv: compiled signatures keep being evicted before they pay off")
            && warns[0].contains("raise CacheConfig::function_capacity"),
        "{}",
        warns[0]
    );
    assert!(
        warns[1].contains("conv: an admitted signature paid off"),
        "{}",
        warns[1]
    );
    assert_eq!(
        cache.stats().function(&f).unwrap().mode,
        FunctionMode::Normal
    );
}

/// A failed compile's warning says for how long its signature is
/// interpreted, and says so in words when it is never retried.
#[test]
fn a_failed_compile_says_when_it_is_retried() {
    let warning = |retry_after: u64| {
        let compiler = MockCompiler::with(|_| 100, |_| Behaviour::Fail);
        let cache = JitCache::new({
            let mut config = CacheConfig::default();
            config.failed_compile_retry_after = retry_after;
            config
        })
        .unwrap();
        let f = FunctionId::new("conv", 4);
        let ((), logs) = capture_logs(|| {
            run(&cache, &f, &f32_sig(&[7]), &compiler);
        });
        let warns: Vec<String> = logs
            .lines()
            .filter(|l| l.contains("WARN"))
            .map(str::to_owned)
            .collect();
        assert_eq!(warns.len(), 1, "{logs}");
        warns[0].clone()
    };
    let counted = warning(5);
    assert!(
        counted.contains(
            "Calls with this signature run in the interpreter for the next 5 calls \
             (CacheConfig::failed_compile_retry_after) or until JitCache::clear_failures"
        ),
        "{counted}"
    );
    let never = warning(u64::MAX);
    assert!(
        never.contains(
            "Calls with this signature run in the interpreter until \
             JitCache::clear_failures; it is not retried"
        ),
        "{never}"
    );
    assert!(!never.contains(&u64::MAX.to_string()), "{never}");
}
