//! Automatic dynamic dims: a function whose compile accepts them gets one
//! variant for a dim that varies, which serves every size of it; rank
//! changes, opted-out functions and failed dynamic compiles stay static;
//! exact signatures are preferred (and kept), then the most specific
//! dynamic one.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use jit_cache::{
    ArgSpec, CacheConfig, CapturedScalar, CompileFailure, DType, Dispatch, FallbackReason,
    FunctionId, JitCache, Origin, Prepared, Provenance, Signature,
};
use test_support::mock_cache::{
    capture_logs, expected, f32_sig, mlp, ragged_batches, run, Behaviour, MockCompiler, MockExe,
    Ran,
};

fn dynamic(name: &str) -> FunctionId {
    FunctionId::new(name, 1).with_dynamic_dims()
}

/// The executable that served `sig`, and whether it was compiled for a
/// signature with dynamic dims (its result is the sum of the dims it was
/// compiled for, so it tells which).
fn served(ran: Ran, sig: &Signature, general: &Signature) -> &'static str {
    match ran {
        Ran::Compiled(result) if result == expected(sig) => "exact",
        Ran::Compiled(result) if result == expected(general) => "dynamic",
        Ran::Compiled(_) => "another variant",
        Ran::Interpreted(_) => "interpreter",
    }
}

#[test]
fn a_ragged_batch_compiles_two_variants_and_runs_every_call_compiled() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("mlp_layer");
    let calls = if cfg!(miri) { 120 } else { 2000 };
    let mut by = std::collections::HashMap::new();
    for b in ragged_batches(calls) {
        let sig = mlp(b);
        let (ran, _) = run(&cache, &f, &sig, &compiler);
        *by.entry(served(ran, &sig, &mlp(-1))).or_insert(0) += 1;
    }
    assert_eq!(
        compiler.compiles(),
        2,
        "the first batch size, then any from the second"
    );
    assert_eq!(compiler.compiles_of(&mlp(-1)), 1);
    assert_eq!(by.get("interpreter"), None);
    assert_eq!(by.get("another variant"), None);
    let exact = by.get("exact").copied().unwrap_or(0);
    assert_eq!(by["dynamic"] + exact, calls, "{by:?}");
    let stats = cache.stats();
    let c = &stats.function(&f).unwrap().counters;
    assert_eq!(
        (c.generalizations, c.live_entries),
        (1, 2),
        "the first size stays"
    );
    assert_eq!(
        c.dynamic_hits as usize,
        by["dynamic"] - 1,
        "one dynamic call compiled"
    );
    assert_eq!(compiler.tracker.live(), 2);
    let last = stats
        .function(&f)
        .unwrap()
        .last_generalization
        .clone()
        .unwrap();
    assert_eq!(last.dims(), [(0, 0)]);
    assert_eq!(last.signature(), &mlp(-1));
    let report = stats.to_string();
    assert!(
        report.contains("dynamic dims: mlp_layer: arg 0 dim 0 took 2 distinct values: compiling"),
        "{report}"
    );
}

#[test]
fn rank_changes_stay_separate_variants() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("sigmoid");
    for i in 0..20 {
        let dims: &[i64] = if i % 2 == 0 { &[1, 5] } else { &[1, 5, 1] };
        run(&cache, &f, &f32_sig(dims), &compiler);
    }
    assert_eq!(
        compiler.compiles(),
        2,
        "the shape ping-pong: two ranks, two variants"
    );
    // A second row count generalizes the rank-2 class only.
    let (ran, _) = run(&cache, &f, &f32_sig(&[2, 5]), &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&f32_sig(&[-1, 5]))));
    let (ran, _) = run(&cache, &f, &f32_sig(&[3, 5]), &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&f32_sig(&[-1, 5]))));
    assert!(cache.contains(&f, &f32_sig(&[1, 5, 1])));
    assert!(cache.contains(&f, &f32_sig(&[1, 5])), "exact entries stay");
    let (ran, _) = run(&cache, &f, &f32_sig(&[1, 5, 1]), &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&f32_sig(&[1, 5, 1]))));
    assert_eq!(compiler.compiles(), 3);
}

#[test]
fn static_functions_the_opt_out_and_the_global_switch_compile_every_shape() {
    let sizes = [1, 2, 3, 2, 1];
    let compiles = |config: CacheConfig, f: &FunctionId| {
        let compiler = MockCompiler::new();
        let cache = JitCache::new(config).unwrap();
        for &b in &sizes {
            run(&cache, f, &mlp(b), &compiler);
        }
        let stats = cache.stats();
        let generalizations = stats.total.generalizations;
        (compiler.compiles(), generalizations)
    };
    let mut opt_out = CacheConfig::default();
    opt_out.static_shape_functions.insert("mlp_layer".into());
    let mut off = CacheConfig::default();
    off.dynamic_dims = false;
    assert_eq!(
        compiles(CacheConfig::default(), &dynamic("mlp_layer")),
        (2, 1),
        "size 1 static, then any"
    );
    assert_eq!(
        compiles(CacheConfig::default(), &FunctionId::new("mlp_layer", 1)),
        (3, 0)
    );
    assert_eq!(compiles(opt_out.clone(), &dynamic("mlp_layer")), (3, 0));
    assert_eq!(compiles(opt_out, &dynamic("other")), (2, 1), "by name");
    assert_eq!(compiles(off, &dynamic("mlp_layer")), (3, 0));
    let mut eager = CacheConfig::default();
    eager.dynamic_dims_after = 1;
    let compiler = MockCompiler::new();
    let cache = JitCache::new(eager).unwrap();
    for b in [3, 3, 4] {
        run(&cache, &dynamic("f"), &mlp(b), &compiler);
    }
    let every = mlp(3).with_dynamic_dims(&[(0, 0), (0, 1), (1, 0), (1, 1), (2, 0)]);
    assert_eq!(
        (compiler.compiles_of(&every), compiler.compiles()),
        (1, 1),
        "every dim dynamic from the first call"
    );
}

#[test]
fn exact_signatures_come_first_then_the_most_specific_dynamic_one() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("f");
    let any = f32_sig(&[-1, -1]);
    let any_rows = f32_sig(&[-1, 5]);
    let exact = f32_sig(&[3, 5]);
    for sig in [&any, &any_rows, &exact] {
        let exe = compiler.compile(sig).unwrap();
        assert!(cache.insert(&f, sig, exe, Duration::ZERO));
    }
    let ran = |dims: &[i64]| run(&cache, &f, &f32_sig(dims), &compiler).0;
    assert_eq!(ran(&[3, 5]), Ran::Compiled(expected(&exact)));
    assert_eq!(ran(&[4, 5]), Ran::Compiled(expected(&any_rows)));
    assert_eq!(ran(&[4, 6]), Ran::Compiled(expected(&any)));
    assert_eq!(ran(&[0, 0]), Ran::Compiled(expected(&any)));
    assert_eq!(compiler.compiles(), 3, "no call compiled");
    let again = compiler.compile(&any).unwrap();
    assert!(
        !cache.insert(&f, &any, again, Duration::ZERO),
        "cached already"
    );
    assert_eq!(cache.entries().len(), 3);
}

#[test]
fn a_dynamic_variant_leaves_the_entries_it_covers_serving_their_calls() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.function_capacity = 3;
        config
    })
    .unwrap();
    let f = dynamic("f");
    let run_dims = |dims: &[i64]| run(&cache, &f, &f32_sig(dims), &compiler).0;
    assert_eq!(
        run_dims(&[3, 5]),
        Ran::Compiled(expected(&f32_sig(&[3, 5])))
    );
    for rows in [4, 5] {
        assert_eq!(
            run_dims(&[rows, 5]),
            Ran::Compiled(expected(&f32_sig(&[-1, 5])))
        );
    }
    assert_eq!(
        run_dims(&[3, 5]),
        Ran::Compiled(expected(&f32_sig(&[3, 5]))),
        "exact first"
    );
    // At capacity the usual eviction applies: another class evicts a less
    // frequent entry once admitted.
    for _ in 0..20 {
        run_dims(&[6, 5]);
        run_dims(&[7]);
    }
    assert!(cache.contains(&f, &f32_sig(&[-1, 5])) && cache.contains(&f, &f32_sig(&[7])));
    assert!(cache.contains(&f, &f32_sig(&[3, 5])), "room for three");
    assert_eq!(compiler.tracker.live(), 3);
}

#[test]
fn a_failed_dynamic_compile_leaves_the_class_static() {
    let compiler = MockCompiler::with(
        |_| 1000,
        |sig| {
            if sig.has_dynamic_dims() {
                Behaviour::Fail
            } else {
                Behaviour::Succeed
            }
        },
    );
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("f");
    let ((), logs) = capture_logs(|| {
        assert!(matches!(
            run(&cache, &f, &mlp(1), &compiler).0,
            Ran::Compiled(_)
        ));
        let (ran, outcome) = run(&cache, &f, &mlp(2), &compiler);
        assert_eq!(ran, Ran::Interpreted(expected(&mlp(2))));
        assert!(matches!(
            outcome,
            Provenance::Interpreted(FallbackReason::CompileFailed(_))
        ));
        for b in 2..6 {
            let (ran, _) = run(&cache, &f, &mlp(b), &compiler);
            assert_eq!(ran, Ran::Compiled(expected(&mlp(b))), "static again");
        }
    });
    assert_eq!(compiler.compiles_of(&mlp(-1)), 1, "tried once");
    assert_eq!(compiler.compiles(), 6);
    assert!(
        logs.contains("its dims stay static: the variant with dynamic dims"),
        "{logs}"
    );
    assert!(
        logs.contains("compile dynamic dims (arg 0 dim 0 took 2 distinct values: compiling"),
        "{logs}"
    );
}

#[test]
fn at_capacity_a_dynamic_variant_is_admitted_like_any_signature() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.function_capacity = 2;
        config
    })
    .unwrap();
    let f = dynamic("f");
    // Two hot signatures of other classes fill the cache.
    let hot = |k: i64| {
        Signature::builder()
            .arg(DType::F32, &[4])
            .captured(CapturedScalar::i64("k", k))
            .build()
    };
    let call = |sig: &Signature| run(&cache, &f, sig, &compiler);
    for _ in 0..50 {
        call(&hot(1));
        call(&hot(2));
    }
    // Ragged calls of a third class, among the hot ones, do not evict them:
    // the class's variant is refused while it is rarer.
    for (i, b) in ragged_batches(60).into_iter().enumerate() {
        let (_, outcome) = call(&f32_sig(&[b, 3]));
        if i < 2 {
            assert!(
                matches!(
                    outcome,
                    Provenance::Interpreted(FallbackReason::NotAdmitted { .. })
                ),
                "{outcome:?}"
            );
        }
        call(&hot(1));
        call(&hot(2));
    }
    assert!(cache.contains(&f, &hot(1)) && cache.contains(&f, &hot(2)));
    // Once the ragged class is all the function sees, its dynamic variant
    // comes in and serves every size.
    let mut compiled = 0;
    for b in ragged_batches(40) {
        let (ran, _) = call(&f32_sig(&[b, 3]));
        compiled += usize::from(ran == Ran::Compiled(expected(&f32_sig(&[-1, 3]))));
    }
    assert!(
        compiled >= 30,
        "{compiled} of 40 calls ran the dynamic variant"
    );
    assert_eq!(compiler.compiles_of(&f32_sig(&[-1, 3])), 1);
}

#[test]
fn background_compiles_generalize_too() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("f");
    let queue = |b: i64| {
        let compiler = Arc::clone(&compiler);
        cache.get_or_queue(&f, &mlp(b), |sig| {
            let sig = sig.clone();
            Ok(Prepared::Queue(move || compiler.compile(&sig)))
        })
    };
    let compiled_for = |b: i64| -> Signature {
        for _ in 0..10_000 {
            if let Dispatch::Compiled { exe, origin } = queue(b) {
                assert_eq!(origin, Origin::Hit);
                return [mlp(b), mlp(-1)]
                    .into_iter()
                    .find(|sig| expected(sig) == exe.result)
                    .expect("compiled for the call or for any batch");
            }
            thread::sleep(Duration::from_millis(1));
        }
        panic!("the background compile never finished");
    };
    assert_eq!(compiled_for(1), mlp(1));
    assert!(matches!(
        queue(2),
        Dispatch::Interpret {
            reason: FallbackReason::CompileQueued
        }
    ));
    assert_eq!(compiled_for(2), mlp(-1), "a second size");
    assert_eq!(compiled_for(3), mlp(-1), "a size never seen before");
    assert_eq!(compiler.compiles(), 2);
    let stats = cache.stats();
    assert_eq!(stats.total.generalizations, 1);
    let s = stats.function(&f).unwrap();
    assert_eq!(s.last_generalization.as_ref().unwrap().dims(), [(0, 0)]);
}

/// `mlp_layer` called with an inner dim `k` that may not fit its weights
/// (W is f32[16,8]).
fn mlp_k(b: i64, k: i64) -> Signature {
    Signature::builder()
        .arg(DType::F32, &[b, k])
        .arg(DType::F32, &[16, 8])
        .arg(DType::F32, &[8])
        .build()
}

/// The lowering: it refuses a signature whose inner dims are both static
/// and differ; one with x's inner dim dynamic it lowers (with a check at
/// run time), so a K that had been made dynamic would compile.
fn lower(compiler: &MockCompiler, sig: &Signature) -> Result<MockExe, CompileFailure> {
    let (k, w) = (sig.args()[0].dims()[1], sig.args()[1].dims()[0]);
    if k != ArgSpec::DYNAMIC && k != w {
        return Err(CompileFailure::refused(std::io::Error::other(format!(
            "x has {k} columns but W has {w} rows"
        ))));
    }
    compiler.compile(sig)
}

/// The compile callback's contract: to compile `target`, a generalization
/// of the `call`'s signature, it first lowers the call's own signature, and
/// a refusal of that is the call's ([`CompileFailure::call_refused`]).
fn vetted(
    compiler: &MockCompiler,
    call: &Signature,
    target: &Signature,
) -> Result<MockExe, CompileFailure> {
    if target != call {
        if let Err(CompileFailure::Refused(why)) = lower(&MockCompiler::new(), call) {
            return Err(CompileFailure::call_refused(Message(why.to_string())));
        }
    }
    lower(compiler, target)
}

/// An error known by its message.
#[derive(Debug)]
struct Message(String);

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

#[test]
fn calls_whose_dims_do_not_fit_never_widen_a_function() {
    let compiler = MockCompiler::new();
    // Two distinct values make a dim vary (the default): any bad inner dim
    // beside the good one would, if it counted.
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("mlp_layer");
    let call = |sig: &Signature| {
        cache.call(
            &f,
            sig,
            |target| vetted(&compiler, sig, target),
            |exe| Ran::Compiled(exe.result),
            |_| Ran::Interpreted(expected(sig)),
        )
    };
    assert_eq!(call(&mlp(5)).0, Ran::Compiled(expected(&mlp(5))));
    for k in [32, 33, 34] {
        // Each asks for K dynamic; its own signature is refused first.
        for _ in 0..2 {
            let (ran, outcome) = call(&mlp_k(5, k));
            assert_eq!(ran, Ran::Interpreted(expected(&mlp_k(5, k))), "k = {k}");
            let Some(FallbackReason::CompileFailed(failure)) = outcome.fallback() else {
                panic!("refused: {outcome:?}");
            };
            assert!(failure.is_call_refusal(), "{failure:?}");
        }
    }
    let stats = cache.stats();
    let c = &stats.function(&f).unwrap().counters;
    assert_eq!(
        (c.refusals, c.compiles),
        (3, 1),
        "a bad call is refused once"
    );
    assert_eq!((c.generalizations, c.live_entries), (0, 1), "{stats}");
    assert!(stats.function(&f).unwrap().last_generalization.is_none());
    // A good call with a new batch size widens the batch, and the batch
    // only: K was never committed.
    assert_eq!(call(&mlp(7)).0, Ran::Compiled(expected(&mlp(-1))));
    assert_eq!(call(&mlp(11)).0, Ran::Compiled(expected(&mlp(-1))));
    let stats = cache.stats();
    let s = stats.function(&f).unwrap();
    assert_eq!(s.last_generalization.as_ref().unwrap().dims(), [(0, 0)]);
    assert_eq!(compiler.compiles(), 2, "one static, one dynamic");
}

#[test]
fn a_ragged_batch_generalizes_at_its_second_good_size() {
    let compiler = MockCompiler::new();
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("mlp_layer");
    let call = |sig: &Signature| {
        cache
            .call(
                &f,
                sig,
                |target| vetted(&compiler, sig, target),
                |exe| Ran::Compiled(exe.result),
                |_| Ran::Interpreted(expected(sig)),
            )
            .0
    };
    // A refused call counts for nothing (had it counted, the next call
    // would see a second K, and compile it dynamic)...
    assert!(matches!(call(&mlp_k(2, 32)), Ran::Interpreted(_)));
    assert_eq!(call(&mlp(1)), Ran::Compiled(expected(&mlp(1))));
    // ...and the second good size compiles the dynamic batch.
    for b in [2, 3, 50, 128] {
        assert_eq!(call(&mlp(b)), Ran::Compiled(expected(&mlp(-1))));
    }
    assert_eq!(compiler.compiles(), 2);
    let stats = cache.stats();
    assert_eq!(stats.total.generalizations, 1);
    let s = stats.function(&f).unwrap();
    assert_eq!(s.last_generalization.as_ref().unwrap().dims(), [(0, 0)]);
    // A bad call after the batch went dynamic is refused as itself: the
    // class stays dynamic for good calls.
    assert!(matches!(call(&mlp_k(9, 33)), Ran::Interpreted(_)));
    assert_eq!(call(&mlp(77)), Ran::Compiled(expected(&mlp(-1))));
    assert_eq!(compiler.compiles(), 2);
}

#[test]
fn queued_compiles_that_are_refused_commit_nothing_either() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::new(CacheConfig::default()).unwrap();
    let f = dynamic("mlp_layer");
    let queue = |sig: &Signature| {
        let compiler = Arc::clone(&compiler);
        let call = sig.clone();
        let dispatch = cache.get_or_queue(&f, sig, |target| {
            let target = target.clone();
            Ok(Prepared::Queue(move || vetted(&compiler, &call, &target)))
        });
        assert!(cache.wait_for_compiles(Duration::from_secs(600)));
        dispatch
    };
    let queued = |d: Dispatch<MockExe>| {
        matches!(
            d,
            Dispatch::Interpret {
                reason: FallbackReason::CompileQueued
            }
        )
    };
    assert!(queued(queue(&mlp(5))));
    for k in [32, 33, 34] {
        assert!(queued(queue(&mlp_k(5, k))), "the lowering runs on the pool");
    }
    assert!(queued(queue(&mlp(7))));
    assert!(cache.contains(&f, &mlp(-1)), "the batch, not K");
    let c = cache.stats().total;
    assert_eq!((c.refusals, c.live_entries, c.compiles), (3, 2, 2));
}

/// While sizes' compiles are in flight, their dims count: with one queued,
/// a second size queues the dynamic variant, not a compile of its own.
#[test]
fn the_dims_of_a_compile_in_flight_count_for_the_next_miss() {
    let compiler = Arc::new(MockCompiler::new());
    let cache: JitCache<MockExe> = JitCache::new({
        let mut config = CacheConfig::default();
        config.compile_threads = 1;
        config
    })
    .unwrap();
    let f = dynamic("mlp_layer");
    let (open, gate) = std::sync::mpsc::channel::<()>();
    let gate = Arc::new(std::sync::Mutex::new(gate));
    let queue = |b: i64| {
        let (compiler, gate) = (Arc::clone(&compiler), Arc::clone(&gate));
        cache.get_or_queue(&f, &mlp(b), |target| {
            let target = target.clone();
            Ok(Prepared::Queue(move || {
                gate.lock().unwrap().recv().unwrap();
                compiler.compile(&target)
            }))
        })
    };
    for b in [1, 2, 3, 4] {
        assert!(matches!(queue(b), Dispatch::Interpret { .. }));
    }
    for _ in 0..2 {
        open.send(()).unwrap();
    }
    assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    assert_eq!(compiler.compiles_of(&mlp(1)), 1);
    assert_eq!(compiler.compiles_of(&mlp(-1)), 1, "2, 3 and 4 share it");
    assert_eq!(compiler.compiles(), 2);
}
