//! Property test: the cache against a simple reference model (linear scans
//! over a list of entries with last-use times) on random call sequences.

use std::collections::HashMap;

use jit_cache::{
    CacheConfig, CachePolicy, FallbackReason, FunctionId, JitCache, Origin, Provenance,
};
use proptest::prelude::*;
use test_support::mock_cache::{f32_sig, run, Behaviour, MockCompiler};

const FUNCTIONS: usize = 3;
const CAPACITIES: [usize; FUNCTIONS] = [2, 3, 4];
const MAX_ENTRIES: usize = 6;
const MAX_BYTES: usize = 1500;
const RETRY_AFTER: u64 = 2;
/// Executable size per signature; signature 6 exceeds the byte budget.
const SIZES: [usize; 8] = [100, 250, 400, 600, 900, 300, 1600, 200];
/// Compiling signature 7 always fails.
const FAILING: usize = 7;

#[derive(Clone, Debug)]
enum Op {
    Call { f: usize, s: usize },
    EvictFunction(usize),
    Clear,
    ClearFailures,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        20 => (0..FUNCTIONS, 0..SIZES.len()).prop_map(|(f, s)| Op::Call { f, s }),
        1 => (0..FUNCTIONS).prop_map(Op::EvictFunction),
        1 => Just(Op::Clear),
        1 => Just(Op::ClearFailures),
    ]
}

/// What a call should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Hit,
    Compiled,
    Failed,
}

#[derive(Debug)]
struct Entry {
    f: usize,
    s: usize,
    last_use: u64,
}

#[derive(Debug, Default)]
struct Model {
    entries: Vec<Entry>,
    /// Calls left before retrying, per failed (function, signature).
    failures: HashMap<(usize, usize), u64>,
    clock: u64,
    compiles: usize,
    evictions: u64,
}

impl Model {
    fn call(&mut self, f: usize, s: usize) -> Expect {
        self.clock += 1;
        if let Some(e) = self.entries.iter_mut().find(|e| (e.f, e.s) == (f, s)) {
            e.last_use = self.clock;
            return Expect::Hit;
        }
        if let Some(left) = self.failures.get_mut(&(f, s)) {
            if *left > 0 {
                *left -= 1;
                return Expect::Failed;
            }
            self.failures.remove(&(f, s));
        }
        self.compiles += 1;
        if s == FAILING {
            self.failures.insert((f, s), RETRY_AFTER);
            return Expect::Failed;
        }
        if SIZES[s] > MAX_BYTES {
            return Expect::Compiled;
        }
        self.entries.push(Entry {
            f,
            s,
            last_use: self.clock,
        });
        if self.entries.iter().filter(|e| e.f == f).count() > CAPACITIES[f] {
            self.evict_lru(|e| e.f == f);
        }
        while self.entries.len() > MAX_ENTRIES || self.bytes() > MAX_BYTES {
            self.evict_lru(|_| true);
        }
        Expect::Compiled
    }

    fn evict_lru(&mut self, within: impl Fn(&Entry) -> bool) {
        let oldest = (0..self.entries.len())
            .filter(|&i| within(&self.entries[i]))
            .min_by_key(|&i| self.entries[i].last_use)
            .expect("an entry to evict");
        self.entries.remove(oldest);
        self.evictions += 1;
    }

    fn evict_function(&mut self, f: usize) {
        let before = self.entries.len();
        self.entries.retain(|e| e.f != f);
        self.evictions += (before - self.entries.len()) as u64;
        self.failures.retain(|&(ff, _), _| ff != f);
    }

    fn bytes(&self) -> usize {
        self.entries.iter().map(|e| SIZES[e.s]).sum()
    }

    fn live(&self, f: usize) -> usize {
        self.entries.iter().filter(|e| e.f == f).count()
    }
}

fn config() -> CacheConfig {
    let mut config = CacheConfig::default();
    config.max_total_entries = MAX_ENTRIES;
    config.max_total_bytes = MAX_BYTES;
    config.failed_compile_retry_after = RETRY_AFTER;
    config.policy = CachePolicy::LruCoolDown;
    config.thrash_threshold = usize::MAX; // the model has no thrash fallback
    for (f, &cap) in CAPACITIES.iter().enumerate() {
        config
            .function_capacity_overrides
            .insert(format!("f{f}"), cap);
    }
    config
}

fn check(ops: &[Op]) -> Result<(), TestCaseError> {
    let sigs: Vec<_> = (0..SIZES.len()).map(|s| f32_sig(&[s as i64])).collect();
    let failing = sigs[FAILING].clone();
    let sizes = sigs.clone();
    let compiler = MockCompiler::with(
        move |sig| SIZES[sizes.iter().position(|s| s == sig).unwrap()],
        move |sig| {
            if *sig == failing {
                Behaviour::Fail
            } else {
                Behaviour::Succeed
            }
        },
    );
    let cache = JitCache::new(config()).unwrap();
    let funcs: Vec<_> = (0..FUNCTIONS)
        .map(|f| FunctionId::new(format!("f{f}"), 0))
        .collect();
    let mut model = Model::default();
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Call { f, s } => {
                let (_, outcome) = run(&cache, &funcs[f], &sigs[s], &compiler);
                let got = match outcome {
                    Provenance::Compiled(Origin::Hit) => Expect::Hit,
                    Provenance::Compiled(Origin::CompiledNow { .. }) => Expect::Compiled,
                    Provenance::Interpreted(FallbackReason::CompileFailed(_)) => Expect::Failed,
                    other => return Err(TestCaseError::fail(format!("op {i}: {other:?}"))),
                };
                prop_assert_eq!(got, model.call(f, s), "op {}: {:?}", i, op);
            }
            Op::EvictFunction(f) => {
                let n = cache.evict_function(&funcs[f]);
                prop_assert_eq!(n, model.live(f));
                model.evict_function(f);
            }
            Op::Clear => {
                prop_assert_eq!(cache.clear(), model.entries.len());
                for f in 0..FUNCTIONS {
                    model.evict_function(f);
                }
            }
            Op::ClearFailures => {
                cache.clear_failures();
                model.failures.clear();
            }
        }
        let stats = cache.stats();
        prop_assert_eq!(stats.total.live_entries, model.entries.len(), "op {}", i);
        prop_assert_eq!(stats.total.live_bytes, model.bytes(), "op {}", i);
        prop_assert_eq!(stats.total.evictions, model.evictions, "op {}", i);
        prop_assert_eq!(compiler.compiles(), model.compiles, "op {}", i);
        for (f, id) in funcs.iter().enumerate() {
            let live = stats.function(id).map_or(0, |s| s.counters.live_entries);
            prop_assert_eq!(live, model.live(f), "op {} f{}", i, f);
        }
        // Every executable not cached was dropped at once.
        prop_assert_eq!(compiler.tracker.live(), model.entries.len());
    }
    drop(cache);
    prop_assert_eq!(compiler.tracker.live(), 0);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn cache_matches_the_reference_model(
        ops in prop::collection::vec(op(), 1..if cfg!(miri) { 40 } else { 120 })
    ) {
        check(&ops)?;
    }
}
