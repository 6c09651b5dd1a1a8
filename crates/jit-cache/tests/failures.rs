//! Failed compiles are remembered per signature, retried later, and a
//! panicking compile callback does not poison the cache.

use jit_cache::{
    CacheConfig, CompileFailure, ErrorChain, FallbackReason, FunctionId, FunctionMode, JitCache,
    MissReason, Origin, Provenance,
};
use test_support::mock_cache::{expected, f32_sig, run, Behaviour, MockCompiler, Ran};

fn config() -> CacheConfig {
    {
        let mut config = CacheConfig::default();
        config.failed_compile_retry_after = 3;
        config
    }
}

fn failed_error(outcome: &Provenance) -> &CompileFailure {
    match outcome {
        Provenance::Interpreted(FallbackReason::CompileFailed(e)) => e,
        other => panic!("expected a failed compile, got {other:?}"),
    }
}

#[test]
fn a_failed_signature_is_interpreted_then_retried() {
    let bad = f32_sig(&[7, 7]);
    let bad2 = bad.clone();
    let compiler = MockCompiler::with(
        |_| 100,
        move |s| {
            if *s == bad2 {
                Behaviour::Fail
            } else {
                Behaviour::Succeed
            }
        },
    );
    let cache = JitCache::new(config()).unwrap();
    let f = FunctionId::new("conv", 1);

    let (ran, outcome) = run(&cache, &f, &bad, &compiler);
    assert_eq!(ran, Ran::Interpreted(expected(&bad)));
    // The backend's error is the failure's source, shown once in the chain.
    let failure = failed_error(&outcome);
    assert_eq!(failure.to_string(), "the compile failed");
    let backend = std::error::Error::source(failure).expect("the backend's error");
    assert_eq!(backend.to_string(), "unsupported op for (f32[7,7])");
    assert!(backend.source().is_none());
    assert_eq!(
        ErrorChain(failure).to_string(),
        "the compile failed: unsupported op for (f32[7,7])"
    );
    // Only that signature is affected; the function keeps compiling.
    let good = f32_sig(&[2]);
    let (ran, _) = run(&cache, &f, &good, &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&good)));
    // The next 3 calls with it are interpreted without compiling.
    for _ in 0..3 {
        let (ran, outcome) = run(&cache, &f, &bad, &compiler);
        assert_eq!(ran, Ran::Interpreted(expected(&bad)));
        failed_error(&outcome);
        assert_eq!(compiler.compiles_of(&bad), 1);
    }
    let stats = cache.stats();
    let s = stats.function(&f).unwrap();
    assert!(matches!(
        s.last_miss,
        Some(MissReason::CompileFailedEarlier {
            retry_in_calls: 0,
            ..
        })
    ));
    assert_eq!(s.mode, FunctionMode::Normal);
    // Then it is retried (and fails again).
    run(&cache, &f, &bad, &compiler);
    assert_eq!(compiler.compiles_of(&bad), 2);
    // An explicit clear retries at once.
    assert_eq!(cache.clear_failures(), 1);
    run(&cache, &f, &bad, &compiler);
    assert_eq!(compiler.compiles_of(&bad), 3);
    let s = cache.stats();
    let s = s.function(&f).unwrap();
    assert_eq!((s.counters.compiles, s.counters.failed_compiles), (4, 3));
    assert_eq!(s.counters.fallback_calls, 6);
    assert_eq!(s.counters.live_entries, 1);
}

#[test]
fn a_retry_that_succeeds_caches_the_signature() {
    let flaky = f32_sig(&[3]);
    let attempts = std::sync::atomic::AtomicUsize::new(0);
    let cache = JitCache::new(config()).unwrap();
    let compiler = MockCompiler::new();
    let f = FunctionId::new("conv", 1);
    let compile = |s: &jit_cache::Signature| {
        if attempts.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            Err(CompileFailure::message("transient"))
        } else {
            compiler.compile(s)
        }
    };
    let outcomes: Vec<bool> = (0..6)
        .map(|_| {
            matches!(
                cache.get_or_compile(&f, &flaky, compile),
                jit_cache::Dispatch::Compiled { .. }
            )
        })
        .collect();
    assert_eq!(outcomes, [false, false, false, false, true, true]);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[test]
fn a_panicking_compile_is_a_failed_compile_and_the_cache_keeps_working() {
    let boom = f32_sig(&[6, 6, 6]);
    let boom2 = boom.clone();
    let compiler = MockCompiler::with(
        |_| 100,
        move |s| {
            if *s == boom2 {
                Behaviour::Panic
            } else {
                Behaviour::Succeed
            }
        },
    );
    let cache = JitCache::new(config()).unwrap();
    let f = FunctionId::new("conv", 1);
    let (ran, outcome) = run(&cache, &f, &boom, &compiler);
    assert_eq!(ran, Ran::Interpreted(expected(&boom)));
    let e = failed_error(&outcome);
    assert!(e.is_panic());
    assert!(
        e.to_string()
            .contains("mock backend crashed on (f32[6,6,6])"),
        "{e}"
    );
    // Remembered like any failure: no second compile for now.
    run(&cache, &f, &boom, &compiler);
    assert_eq!(compiler.compiles_of(&boom), 1);
    // The cache is not poisoned.
    let good = f32_sig(&[1]);
    for expected_origin in [false, true] {
        let (ran, outcome) = run(&cache, &f, &good, &compiler);
        assert_eq!(ran, Ran::Compiled(expected(&good)));
        assert_eq!(
            outcome == Provenance::Compiled(Origin::Hit),
            expected_origin
        );
    }
    assert_eq!(cache.stats().total.failed_compiles, 1);
}

#[test]
fn a_failure_never_retried_says_so() {
    let compiler = MockCompiler::with(|_| 100, |_| Behaviour::Fail);
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.failed_compile_retry_after = u64::MAX;
        config
    })
    .unwrap();
    let f = FunctionId::new("conv", 1);
    let bad = f32_sig(&[7]);
    for _ in 0..3 {
        let (ran, _) = run(&cache, &f, &bad, &compiler);
        assert_eq!(ran, Ran::Interpreted(expected(&bad)));
    }
    assert_eq!(compiler.compiles_of(&bad), 1);
    let stats = cache.stats();
    let last = stats.function(&f).unwrap().last_miss.as_ref().unwrap();
    assert!(
        matches!(
            last,
            MissReason::CompileFailedEarlier {
                retry_in_calls: u64::MAX,
                ..
            }
        ),
        "not counted down: {last:?}"
    );
    assert_eq!(
        last.to_string(),
        "compile failed earlier (the compile failed: unsupported op for (f32[7])); not \
         retried: JitCache::clear_failures() retries it"
    );
    assert_eq!(cache.clear_failures(), 1);
    run(&cache, &f, &bad, &compiler);
    assert_eq!(compiler.compiles_of(&bad), 2, "cleared, so retried");
}

/// The lowering's refusal is remembered like a failure, but it is no
/// compile: counted in `refusals` only, and shown in its own column.
#[test]
fn a_refused_signature_is_remembered_but_not_counted_as_a_compile() {
    let cache = JitCache::new(config()).unwrap();
    let f = FunctionId::new("mlp_layer", 1);
    let bad = f32_sig(&[5, 32]);
    let lowerings = std::cell::Cell::new(0);
    let lower =
        |_: &jit_cache::Signature| -> Result<test_support::mock_cache::MockExe, CompileFailure> {
            lowerings.set(lowerings.get() + 1);
            Err(CompileFailure::refused(std::io::Error::other(
                "x is f32[5,32] but W is f32[64,256]",
            )))
        };
    for _ in 0..3 {
        let jit_cache::Dispatch::Interpret {
            reason: FallbackReason::CompileFailed(failure),
        } = cache.get_or_compile(&f, &bad, lower)
        else {
            panic!("a refused signature runs in the interpreter");
        };
        assert!(failure.is_refusal());
        assert_eq!(failure.to_string(), "the lowering refused this signature");
        assert_eq!(
            failure.backend_error().unwrap().to_string(),
            "x is f32[5,32] but W is f32[64,256]"
        );
        assert_eq!(
            ErrorChain(&*failure).to_string(),
            "the lowering refused this signature: x is f32[5,32] but W is f32[64,256]"
        );
    }
    assert_eq!(lowerings.get(), 1, "remembered like a failed compile");
    let stats = cache.stats();
    for c in [&stats.total, &stats.function(&f).unwrap().counters] {
        assert_eq!((c.refusals, c.compiles, c.failed_compiles), (1, 0, 0));
        assert_eq!(c.compile_time, std::time::Duration::ZERO);
        assert_eq!(c.fallback_calls, 3);
    }
    let report = stats.to_string();
    let lines: Vec<&str> = report.lines().collect();
    let columns = |line: &str| -> Vec<String> {
        line.split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let header = columns(lines[1]);
    let at = header
        .iter()
        .position(|c| c == "lowering refused")
        .unwrap_or_else(|| panic!("no refusal column: {report}"));
    let row = columns(lines[2]);
    assert_eq!(row[0], "mlp_layer", "{report}");
    assert_eq!(row[at], "1", "{report}");
    assert_eq!(
        row[header.iter().position(|c| c == "compiles").unwrap()],
        "0"
    );
}
