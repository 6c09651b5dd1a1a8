//! Hot sizes: a size that a variant with dynamic dims serves gets its own
//! static variant, compiled in the background beside the dynamic one, once
//! admission counts it hot; never for a uniform spread of sizes, never
//! beyond the function's capacity or the global budgets, never for a
//! blocking call, and a failed one leaves the dynamic variant serving.

use std::sync::Arc;
use std::time::Duration;

use jit_cache::{
    CacheConfig, CompileFailure, Dispatch, FallbackReason, FunctionId, JitCache, MissReason,
    Origin, Prepared,
};
use test_support::mock_cache::{
    expected, mlp, ragged_batches, run, Behaviour, MockCompiler, MockExe,
};

fn mlp_layer() -> FunctionId {
    FunctionId::new("mlp_layer", 1).with_dynamic_dims()
}

/// Which variant ran a call at batch `b`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Served {
    /// Its own signature's.
    Exact,
    /// The one with the batch dim dynamic.
    Dynamic,
    Interpreted,
}

/// A cache whose calls queue their compiles on the background pool, with
/// the mock compiler; a miss waits until its compile is done, so that each
/// call after it finds what it compiled.
struct Background {
    cache: JitCache<MockExe>,
    compiler: Arc<MockCompiler>,
    f: FunctionId,
}

impl Background {
    fn new(config: CacheConfig, compiler: MockCompiler) -> Self {
        Background {
            cache: JitCache::new(config).unwrap(),
            compiler: Arc::new(compiler),
            f: mlp_layer(),
        }
    }

    /// Calls at batch `b`; returns what served it.
    fn call(&self, b: i64) -> Served {
        let compiler = Arc::clone(&self.compiler);
        let dispatch = self.cache.get_or_queue(&self.f, &mlp(b), |sig| {
            let sig = sig.clone();
            Ok(Prepared::Queue(move || compiler.compile(&sig)))
        });
        match dispatch {
            Dispatch::Compiled { exe, .. } if exe.result == expected(&mlp(b)) => Served::Exact,
            Dispatch::Compiled { exe, .. } => {
                assert_eq!(exe.result, expected(&mlp(-1)), "batch {b}: a wrong variant");
                Served::Dynamic
            }
            Dispatch::Interpret { reason } => {
                assert_eq!(reason, FallbackReason::CompileQueued, "batch {b}");
                self.settle();
                Served::Interpreted
            }
        }
    }

    /// Waits for the compiles queued so far.
    fn settle(&self) {
        assert!(self.cache.wait_for_compiles(Duration::from_secs(60)));
    }

    /// Size 1 compiles static, size 2 the dynamic variant.
    fn with_the_batch_dim_dynamic(self) -> Self {
        for b in 1..=2 {
            assert_eq!(self.call(b), Served::Interpreted);
        }
        assert_eq!(self.call(3), Served::Dynamic);
        self
    }

    fn specializations(&self) -> u64 {
        self.cache.stats().total.specializations
    }
}

#[test]
fn a_hot_size_gets_its_own_variant_beside_the_dynamic_one() {
    let jit =
        Background::new(CacheConfig::default(), MockCompiler::new()).with_the_batch_dim_dynamic();
    // Batch 64, every call: served by the dynamic variant until admission
    // counts it hot (more than once every capacity + 1 calls: 28 of the
    // 256 calls an epoch of a function of capacity 8 remembers).
    let mut dynamic_calls = 0;
    while jit.specializations() == 0 {
        assert_eq!(jit.call(64), Served::Dynamic);
        dynamic_calls += 1;
        assert!(dynamic_calls <= 64, "batch 64 is hot by now");
    }
    assert!(
        dynamic_calls >= 20,
        "a size is hot after a run of calls, not at once ({dynamic_calls})"
    );
    // The call that found it hot ran the dynamic variant; later ones run
    // batch 64's own once it is compiled, beside the dynamic variant.
    jit.settle();
    assert_eq!(jit.call(64), Served::Exact);
    assert_eq!(
        jit.call(65),
        Served::Dynamic,
        "the other sizes stay dynamic"
    );
    assert_eq!(jit.compiler.compiles_of(&mlp(64)), 1);
    assert_eq!(jit.compiler.compiles(), 3);
    let stats = jit.cache.stats();
    let c = &stats.function(&jit.f).unwrap().counters;
    assert_eq!((c.specializations, c.live_entries), (1, 3));
    assert_eq!(c.compiles_queued, 3, "specializations queue like misses");
    assert_eq!(
        c.fallback_calls, 2,
        "only the misses ran in the interpreter"
    );
    assert!(
        stats.to_string().contains("hot sizes specialized: 1"),
        "{stats}"
    );
}

#[test]
fn a_uniform_spread_of_sizes_has_no_hot_size() {
    let jit = Background::new(CacheConfig::default(), MockCompiler::new());
    let calls = if cfg!(miri) { 120 } else { 2000 };
    for b in ragged_batches(calls) {
        jit.call(b);
    }
    jit.settle();
    assert_eq!(jit.specializations(), 0);
    assert_eq!(jit.compiler.compiles(), 2, "the first size, then any");
}

#[test]
fn a_skewed_batch_specializes_its_hot_sizes_only() {
    let jit =
        Background::new(CacheConfig::default(), MockCompiler::new()).with_the_batch_dim_dynamic();
    // Every other call is batch 100 or 50 (a quarter each); the rest are
    // spread over 1..=128.
    let calls = if cfg!(miri) { 240 } else { 2000 };
    for (i, b) in ragged_batches(calls).into_iter().enumerate() {
        let b = match i % 4 {
            0 => 100,
            2 => 50,
            _ => b,
        };
        jit.call(b);
        if i % 16 == 0 {
            jit.settle();
        }
    }
    jit.settle();
    assert_eq!(jit.call(100), Served::Exact);
    assert_eq!(jit.call(50), Served::Exact);
    assert_eq!(jit.specializations(), 2, "batches 100 and 50");
    assert_eq!(jit.compiler.compiles(), 4);
}

#[test]
fn a_specialization_never_evicts() {
    // The function's capacity is full with size 1 and the dynamic
    // variant; then the global byte budget leaves no room.
    let mut full = CacheConfig::default();
    full.function_capacity = 2;
    let mut no_bytes = CacheConfig::default();
    no_bytes.max_total_bytes = 2_500;
    for config in [full, no_bytes] {
        let jit = Background::new(config, MockCompiler::new()).with_the_batch_dim_dynamic();
        for _ in 0..100 {
            assert_eq!(jit.call(64), Served::Dynamic);
        }
        jit.settle();
        assert_eq!(jit.specializations(), 0);
        assert_eq!(jit.compiler.compiles(), 2);
    }
}

#[test]
fn the_switch_and_blocking_calls_keep_hot_sizes_dynamic() {
    let mut off = CacheConfig::default();
    off.specialize_hot_sizes = false;
    let jit = Background::new(off, MockCompiler::new()).with_the_batch_dim_dynamic();
    for _ in 0..100 {
        assert_eq!(jit.call(64), Served::Dynamic);
    }
    assert_eq!(jit.specializations(), 0);

    let compiler = MockCompiler::new();
    let cache = JitCache::new(CacheConfig::default()).unwrap();
    let f = mlp_layer();
    for b in [1, 2, 3].into_iter().chain([64; 100]) {
        let (_, provenance) = run(&cache, &f, &mlp(b), &compiler);
        assert!(provenance.is_compiled());
    }
    assert_eq!(
        compiler.compiles(),
        2,
        "a blocking call would stall a hit for a compile"
    );
    assert_eq!(cache.stats().total.specializations, 0);
}

#[test]
fn a_failed_specialization_leaves_the_dynamic_variant_serving() {
    let compiler = MockCompiler::with(
        |_| 1000,
        |sig| {
            if *sig == mlp(64) {
                Behaviour::Fail
            } else {
                Behaviour::Succeed
            }
        },
    );
    let jit = Background::new(CacheConfig::default(), compiler).with_the_batch_dim_dynamic();
    for _ in 0..if cfg!(miri) { 100 } else { 300 } {
        assert_eq!(jit.call(64), Served::Dynamic);
        jit.settle();
    }
    assert_eq!(
        jit.compiler.compiles_of(&mlp(64)),
        1,
        "the failure is remembered: not retried for its next 1000 calls"
    );
    let c = jit.cache.stats().total;
    assert_eq!((c.specializations, c.failed_compiles), (1, 1));
    assert_eq!(
        c.fallback_calls, 2,
        "only the misses ran in the interpreter"
    );
}

#[test]
fn a_specialization_prepared_at_once_serves_the_next_call() {
    let jit =
        Background::new(CacheConfig::default(), MockCompiler::new()).with_the_batch_dim_dynamic();
    let prepared_at_once = |b: i64| {
        let compiler = Arc::clone(&jit.compiler);
        jit.cache.get_or_queue(&jit.f, &mlp(b), |sig| {
            // From a disk cache, say: no compile is queued.
            Ok::<_, CompileFailure>(
                Prepared::Ready::<_, fn() -> Result<MockExe, CompileFailure>>(
                    compiler.compile(sig)?,
                ),
            )
        })
    };
    let mut calls = 0;
    loop {
        let Dispatch::Compiled { exe, origin } = prepared_at_once(64) else {
            panic!("served compiled");
        };
        assert_eq!(origin, Origin::Hit);
        calls += 1;
        if exe.result == expected(&mlp(64)) {
            break;
        }
        assert!(calls <= 64, "batch 64 is hot by now");
    }
    let stats = jit.cache.stats();
    assert_eq!(stats.total.specializations, 1);
    assert_eq!(stats.total.compiles_queued, 2, "nothing queued for it");
    let reason = MissReason::HotSize {
        served_by: Box::new(mlp(-1)),
        calls: 30,
    };
    assert_eq!(
        reason.to_string(),
        "hot size: 30 recent calls served by (f32[?,16], f32[16,8], f32[8]); its own variant is \
         faster"
    );
}

#[test]
fn sizes_hot_at_once_take_only_the_free_slots() {
    // Capacity 3: size 1 and the dynamic variant leave one slot.
    // Batches 64 and 65 go hot while the first's compile is held back:
    // only one is specialized, and nothing is evicted.
    let mut config = CacheConfig::default();
    config.function_capacity = 3;
    let jit = Background::new(config, MockCompiler::new()).with_the_batch_dim_dynamic();
    let held = Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
    let call_held = |b: i64| {
        let (compiler, held) = (Arc::clone(&jit.compiler), Arc::clone(&held));
        jit.cache.get_or_queue(&jit.f, &mlp(b), |sig| {
            let sig = sig.clone();
            Ok(Prepared::Queue(move || {
                let (lock, released) = &*held;
                let mut holding = lock.lock().unwrap();
                while *holding {
                    holding = released.wait(holding).unwrap();
                }
                compiler.compile(&sig)
            }))
        })
    };
    for _ in 0..300 {
        for b in [64, 65] {
            assert!(matches!(call_held(b), Dispatch::Compiled { .. }));
        }
    }
    assert_eq!(jit.specializations(), 1, "one free slot");
    *held.0.lock().unwrap() = false;
    held.1.notify_all();
    jit.settle();
    let stats = jit.cache.stats();
    assert_eq!(stats.total.evictions, 0, "{stats}");
    assert_eq!((jit.call(1), jit.call(2)), (Served::Exact, Served::Dynamic));
    assert_eq!(
        [jit.call(64), jit.call(65)],
        [Served::Exact, Served::Dynamic]
    );
}

#[test]
fn the_global_budget_holds_room_for_specializations_in_flight() {
    // Room for one more 1000-byte entry in all: two functions' hot sizes
    // go hot while the first specialization is in flight; the second waits
    // for room instead of evicting.
    let mut config = CacheConfig::default();
    config.max_total_entries = 5;
    let cache: JitCache<MockExe> = JitCache::new(config).unwrap();
    let compiler = Arc::new(MockCompiler::new());
    let held = Arc::new((std::sync::Mutex::new(true), std::sync::Condvar::new()));
    let call = |f: &FunctionId, b: i64, hold: bool| {
        let (compiler, held) = (Arc::clone(&compiler), Arc::clone(&held));
        cache.get_or_queue(f, &mlp(b), |sig| {
            let sig = sig.clone();
            Ok(Prepared::Queue(move || {
                let (lock, released) = &*held;
                let mut holding = lock.lock().unwrap();
                while hold && *holding {
                    holding = released.wait(holding).unwrap();
                }
                compiler.compile(&sig)
            }))
        })
    };
    let (f, g) = (mlp_layer(), FunctionId::new("other", 1).with_dynamic_dims());
    for func in [&f, &g] {
        for b in 1..=3 {
            let _ = call(func, b, false);
            assert!(cache.wait_for_compiles(Duration::from_secs(60)));
        }
    }
    assert_eq!(cache.stats().total.live_entries, 4);
    for _ in 0..100 {
        for func in [&f, &g] {
            assert!(matches!(call(func, 64, true), Dispatch::Compiled { .. }));
        }
    }
    assert_eq!(cache.stats().total.specializations, 1, "room for one");
    *held.0.lock().unwrap() = false;
    held.1.notify_all();
    assert!(cache.wait_for_compiles(Duration::from_secs(60)));
    let stats = cache.stats();
    assert_eq!(
        (stats.total.evictions, stats.total.live_entries),
        (0, 5),
        "{stats}"
    );
}
