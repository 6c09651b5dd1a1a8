//! The adaptive policy under churn: one-off signatures never evict hot
//! ones, hot signatures stay compiled, compiled code comes back as soon as
//! the working set fits again, and a property test of what every trace must
//! satisfy.

use std::collections::HashSet;

use jit_cache::{
    CacheConfig, DType, FallbackReason, FunctionId, JitCache, Origin, Provenance, Refusal,
    Signature,
};
use proptest::prelude::*;
use test_support::mock_cache::{expected, run, MockCompiler, Ran};

const CAPACITY: usize = 4;

fn sig(n: u64) -> Signature {
    Signature::builder()
        .arg(DType::F32, &[n as i64 + 1, 8])
        .build()
}

struct Workload {
    cache: JitCache<test_support::mock_cache::MockExe>,
    compiler: MockCompiler,
    func: FunctionId,
    capacity: usize,
}

impl Workload {
    fn new() -> Self {
        Self::with_capacity(CAPACITY)
    }

    fn with_capacity(capacity: usize) -> Self {
        let mut config = CacheConfig::default();
        config.function_capacity = capacity;
        Workload {
            cache: JitCache::new(config).unwrap(),
            compiler: MockCompiler::new(),
            func: FunctionId::new("layer", 1),
            capacity,
        }
    }

    fn live(&self) -> usize {
        self.cache.stats().total.live_entries
    }

    /// One call; checks its result and the entry bound.
    fn call(&self, n: u64) -> Provenance {
        let s = sig(n);
        let (ran, outcome) = run(&self.cache, &self.func, &s, &self.compiler);
        let value = match (ran, &outcome) {
            (Ran::Compiled(v), Provenance::Compiled(_))
            | (Ran::Interpreted(v), Provenance::Interpreted(_)) => v,
            other => panic!("result from the wrong path: {other:?}"),
        };
        assert_eq!(value, expected(&s));
        assert!(self.live() <= self.capacity);
        outcome
    }
}

/// A small deterministic generator (xorshift), so that every run sees the
/// same trace.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[test]
fn one_off_signatures_never_evict_hot_ones() {
    let w = Workload::new();
    let mut one_offs = 0;
    for i in 0..if cfg!(miri) { 100 } else { 500 } {
        let n = if i % 5 == 4 { 1000 + i } else { i % 5 };
        let outcome = w.call(n);
        if n >= 1000 {
            one_offs += 1;
            match outcome {
                Provenance::Interpreted(FallbackReason::NotAdmitted { refusal, .. }) => {
                    assert_eq!(refusal, Refusal::FirstSeen);
                }
                other => panic!("call {i}: a one-off signature ran {other:?}"),
            }
        } else if i >= 5 {
            assert_eq!(outcome, Provenance::Compiled(Origin::Hit), "call {i}");
        }
    }
    assert_eq!(w.compiler.compiles(), CAPACITY);
    let stats = w.cache.stats();
    let f = stats.function(&w.func).unwrap();
    assert_eq!(f.counters.admissions_refused, one_offs);
    assert_eq!(f.last_refusal, Some(Refusal::FirstSeen));
    let report = stats.to_string();
    assert!(report.contains("refused"), "{report}");
}

#[test]
fn hot_signatures_stay_compiled_under_skewed_churn() {
    let w = Workload::new();
    let mut rng = Rng(0x5eed);
    let calls = if cfg!(miri) { 800 } else { 6000 };
    let mut compiles_at_half = 0;
    for i in 0..calls {
        // 70% of calls on 4 hot signatures, 30% spread over 40 cold ones.
        let n = if rng.below(10) < 7 {
            rng.below(4)
        } else {
            100 + rng.below(40)
        };
        let outcome = w.call(n);
        if i == calls / 2 {
            compiles_at_half = w.compiler.compiles();
        }
        if i >= calls / 2 && n < 4 {
            assert_eq!(outcome, Provenance::Compiled(Origin::Hit), "call {i}");
        }
    }
    assert_eq!(
        w.compiler.compiles(),
        compiles_at_half,
        "no compile in the second half"
    );
    let stats = w.cache.stats();
    let f = stats.function(&w.func).unwrap();
    assert!(f.counters.admissions_refused > 0, "{stats}");
}

#[test]
fn compiled_code_returns_as_soon_as_the_working_set_fits() {
    let w = Workload::new();
    let mut rng = Rng(0xb0b);
    for _ in 0..if cfg!(miri) { 400 } else { 3000 } {
        w.call(rng.below(40));
    }
    let before = w.compiler.compiles();
    // The workload narrows to three signatures never seen before.
    let mut last_interpreted = None;
    for i in 0..if cfg!(miri) { 60 } else { 300 } {
        if let Provenance::Interpreted(_) = w.call(500 + i % 3) {
            last_interpreted = Some(i);
        }
    }
    let last = last_interpreted.expect("new signatures miss at first");
    assert!(last < 4 * CAPACITY as u64, "interpreted up to call {last}");
    assert_eq!(w.compiler.compiles() - before, 3);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// What any trace satisfies: below capacity every miss compiles; at
    /// capacity a signature never called before never compiles and is
    /// refused as first seen; a working set that fits is never refused;
    /// every refusal runs in the interpreter; the counters add up.
    #[test]
    fn every_trace_keeps_the_admission_rules(
        capacity in 1usize..5,
        trace in prop::collection::vec(0u64..8, 1..if cfg!(miri) { 60 } else { 400 }),
    ) {
        let w = Workload::with_capacity(capacity);
        let mut seen = HashSet::new();
        let distinct: HashSet<u64> = trace.iter().copied().collect();
        for (i, &n) in trace.iter().enumerate() {
            let full = w.live() == capacity;
            let outcome = w.call(n);
            let first = seen.insert(n);
            match (&outcome, full, first) {
                (Provenance::Compiled(Origin::CompiledNow { .. }), true, true) => {
                    prop_assert!(false, "call {i}: a first-seen signature compiled at capacity");
                }
                (Provenance::Interpreted(why), false, _) => {
                    prop_assert!(false, "call {i}: interpreted below capacity: {why}");
                }
                (
                    Provenance::Interpreted(FallbackReason::NotAdmitted { refusal, .. }),
                    true,
                    true,
                ) => prop_assert_eq!(*refusal, Refusal::FirstSeen),
                (Provenance::Interpreted(FallbackReason::NotAdmitted { .. }), true, false) => {
                    prop_assert!(distinct.len() > capacity, "call {i}: refused, yet all fit");
                }
                (Provenance::Interpreted(why), ..) => {
                    prop_assert!(false, "call {i}: unexpected fallback: {why}");
                }
                _ => {}
            }
        }
        let stats = w.cache.stats();
        let f = stats.function(&w.func).unwrap();
        let c = &f.counters;
        prop_assert_eq!(c.hits + c.misses, trace.len() as u64);
        prop_assert_eq!(c.compiles, w.compiler.compiles() as u64);
        prop_assert_eq!(c.evictions + c.live_entries as u64, c.compiles);
        prop_assert_eq!(c.fallback_calls, c.admissions_refused);
        prop_assert_eq!(c.live_entries, w.compiler.tracker.live());
        if distinct.len() <= capacity {
            prop_assert_eq!(c.compiles, distinct.len() as u64);
        }
    }
}
