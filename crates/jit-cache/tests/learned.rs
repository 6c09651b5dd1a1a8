//! What the policy learned, kept between processes: a cache given a
//! `PolicyMemory` starts each function from what an earlier cache learned
//! (dims that went dynamic, signatures that were cached) and hands it what
//! it learns when that changes, never on a hit. The memory here keeps each
//! function's policy as the text of a policy file, as the disk cache does.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{expected, mlp, run, MockCompiler, MockExe, Ran};
use jit_cache::{
    CacheConfig, CompileFailure, DType, Dispatch, FallbackReason, FunctionId, JitCache,
    LearnedPolicy, Origin, PolicyMemory, PolicyScope, Prepared, Provenance, Refusal, Signature,
};

const COMPILER: &str = "mock compiler 1";
const TARGET: &str = "mock target";

/// Keeps each function's policy as policy-file text, counting what it is
/// asked.
#[derive(Debug, Default)]
struct TextMemory {
    files: Mutex<HashMap<String, String>>,
    recalls: AtomicUsize,
    keeps: AtomicUsize,
    sequences: Mutex<Vec<u64>>,
}

impl TextMemory {
    fn keeps(&self) -> usize {
        self.keeps.load(Ordering::SeqCst)
    }

    /// What is kept of `func`, read back.
    fn kept(&self, func: &FunctionId) -> LearnedPolicy {
        let text = self.files.lock().unwrap()[func.name()].clone();
        LearnedPolicy::from_text(&text, &PolicyScope::new(func, COMPILER, TARGET)).unwrap()
    }
}

impl PolicyMemory for TextMemory {
    fn recall(&self, func: &FunctionId) -> Option<LearnedPolicy> {
        self.recalls.fetch_add(1, Ordering::SeqCst);
        let text = self.files.lock().unwrap().get(func.name())?.clone();
        LearnedPolicy::from_text(&text, &PolicyScope::new(func, COMPILER, TARGET)).ok()
    }

    fn keep(&self, func: &FunctionId, learned: &LearnedPolicy) {
        self.keeps.fetch_add(1, Ordering::SeqCst);
        self.sequences.lock().unwrap().push(learned.sequence());
        let text = learned.to_text(&PolicyScope::new(func, COMPILER, TARGET));
        self.files
            .lock()
            .unwrap()
            .insert(func.name().to_owned(), text);
    }
}

fn mlp_layer() -> FunctionId {
    FunctionId::new("mlp_layer", 0x5eaf).with_dynamic_dims()
}

fn remembering(memory: &Arc<TextMemory>, config: CacheConfig) -> JitCache<MockExe> {
    JitCache::remembering(config, Arc::clone(memory) as Arc<dyn PolicyMemory>).unwrap()
}

/// A first cache runs batch sizes 3, 5 and 7: two static compiles, then the
/// dynamic variant.
fn learn_a_ragged_batch(memory: &Arc<TextMemory>) {
    let cache = remembering(memory, CacheConfig::default());
    let compiler = MockCompiler::new();
    for b in [3, 5, 7, 9, 3] {
        let (ran, _) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
        assert!(matches!(ran, Ran::Compiled(_)));
    }
    assert_eq!(compiler.compiles(), 3);
    assert_eq!(compiler.compiles_of(&mlp(-1)), 1);
}

#[test]
fn a_restarted_cache_compiles_the_dynamic_variant_from_the_first_call() {
    let memory = Arc::new(TextMemory::default());
    learn_a_ragged_batch(&memory);
    let kept = memory.kept(&mlp_layer());
    let class = Signature::builder()
        .arg(DType::F32, &[-1, -1])
        .arg(DType::F32, &[-1, -1])
        .arg(DType::F32, &[-1])
        .build();
    assert_eq!(
        kept.dynamic_dims().collect::<Vec<_>>(),
        [(&class, &[(0, 0)][..])]
    );
    let mut hot: Vec<&Signature> = kept.hot().iter().map(|(sig, _)| sig).collect();
    hot.sort_by_key(|sig| sig.args()[0].dims()[0]);
    assert_eq!(hot, [&mlp(-1), &mlp(3), &mlp(5)]);

    // A new cache (a new process) on the same memory: a batch size never
    // seen compiles the dynamic variant at once, which serves every size.
    let keeps = memory.keeps();
    let cache = remembering(&memory, CacheConfig::default());
    let compiler = MockCompiler::new();
    for b in [40, 3, 41, 5, 7] {
        let (ran, provenance) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
        assert!(provenance.is_compiled(), "batch {b}: {provenance:?}");
        assert_eq!(ran, Ran::Compiled(expected(&mlp(-1))), "batch {b}");
    }
    assert_eq!(
        compiler.compiles(),
        1,
        "the dynamic variant, nothing static"
    );
    let stats = cache.stats();
    let f = stats.function(&mlp_layer()).unwrap();
    assert_eq!(
        (f.counters.generalizations, f.counters.dynamic_hits),
        (1, 4)
    );
    assert_eq!(
        memory.keeps(),
        keeps,
        "what was recalled came back, nothing new was learned"
    );
    assert_eq!(memory.recalls.load(Ordering::SeqCst), 2, "once per cache");

    // Another one, whose first call is a size that was cached: it comes
    // back static, as it was, beside the dynamic variant.
    let cache = remembering(&memory, CacheConfig::default());
    let compiler = MockCompiler::new();
    for (b, served) in [(3, mlp(3)), (40, mlp(-1)), (3, mlp(3)), (5, mlp(-1))] {
        let (ran, _) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
        assert_eq!(ran, Ran::Compiled(expected(&served)), "batch {b}");
    }
    assert_eq!(compiler.compiles(), 2);
    assert_eq!(compiler.compiles_of(&mlp(40)), 0);
}

#[test]
fn a_background_miss_gets_the_dynamic_variant_ready_from_the_first_call() {
    let memory = Arc::new(TextMemory::default());
    learn_a_ragged_batch(&memory);
    let cache = remembering(&memory, CacheConfig::default());
    let prepared = Mutex::new(Vec::new());
    // A disk hit: the executable is had on the calling thread.
    type Queued = fn() -> Result<MockExe, CompileFailure>;
    let prepare = |target: &Signature| -> Result<Prepared<MockExe, Queued>, CompileFailure> {
        prepared.lock().unwrap().push(target.clone());
        let compiler = MockCompiler::new();
        Ok(Prepared::Ready(compiler.compile(target)?))
    };
    for b in [60, 61] {
        let outcome = cache.get_or_queue(&mlp_layer(), &mlp(b), prepare);
        let Dispatch::Compiled { exe, origin } = outcome else {
            panic!("batch {b}: {outcome:?}")
        };
        assert_eq!(exe.result, expected(&mlp(-1)));
        let first = matches!(origin, Origin::CompiledNow { .. });
        assert_eq!(first, b == 60, "{origin:?}");
    }
    assert_eq!(*prepared.lock().unwrap(), [mlp(-1)]);
}

#[test]
fn recalled_hot_signatures_are_admitted_at_capacity_on_their_first_miss() {
    let memory = Arc::new(TextMemory::default());
    let config = CacheConfig {
        function_capacity: 2,
        ..CacheConfig::default()
    };
    let sigmoid = FunctionId::new("sigmoid", 1);
    let sig = |n| Signature::builder().arg(DType::F32, &[n]).build();
    {
        let cache = remembering(&memory, config.clone());
        let compiler = MockCompiler::new();
        for _ in 0..10 {
            run(&cache, &sigmoid, &sig(1), &compiler);
            run(&cache, &sigmoid, &sig(2), &compiler);
        }
        assert_eq!(memory.kept(&sigmoid).hot().len(), 2);
    }
    // Two other signatures fill the capacity first; a signature the last
    // process had cached is still admitted on its first miss, where a
    // signature never seen is refused.
    let cache = remembering(&memory, config);
    let compiler = MockCompiler::new();
    for n in [3, 4] {
        assert!(run(&cache, &sigmoid, &sig(n), &compiler).1.is_compiled());
    }
    let (_, never_seen) = run(&cache, &sigmoid, &sig(5), &compiler);
    assert!(
        matches!(
            never_seen,
            Provenance::Interpreted(FallbackReason::NotAdmitted {
                refusal: Refusal::FirstSeen,
                ..
            })
        ),
        "{never_seen:?}"
    );
    let (ran, recalled) = run(&cache, &sigmoid, &sig(1), &compiler);
    assert!(recalled.is_compiled(), "{recalled:?}");
    assert_eq!(ran, Ran::Compiled(expected(&sig(1))));
}

#[test]
fn what_is_learned_is_kept_when_it_changes_never_on_a_hit() {
    let memory = Arc::new(TextMemory::default());
    let cache = remembering(&memory, CacheConfig::default());
    let compiler = MockCompiler::new();
    let mut keeps = Vec::new();
    for b in [3, 3, 5, 5, 7, 9, 11, 3, 5] {
        run(&cache, &mlp_layer(), &mlp(b), &compiler);
        keeps.push(memory.keeps());
    }
    // Batch 3 cached; 5 cached (and the batch varies); the dynamic variant
    // cached: three changes, the hits change nothing.
    assert_eq!(keeps, [1, 1, 2, 2, 3, 3, 3, 3, 3]);
    let sequences = memory.sequences.lock().unwrap().clone();
    assert!(sequences.windows(2).all(|w| w[0] < w[1]), "{sequences:?}");
    // Forgetting the function forgets it here; what was learned stays kept,
    // and is recalled when it is called again.
    cache.evict_function(&mlp_layer());
    run(&cache, &mlp_layer(), &mlp(20), &compiler);
    assert_eq!(compiler.compiles_of(&mlp(20)), 0, "the dynamic variant");
    assert_eq!(memory.recalls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_cache_without_memory_learns_from_nothing() {
    let cache: JitCache<MockExe> = JitCache::new(CacheConfig::default()).unwrap();
    let compiler = MockCompiler::new();
    for b in [40, 41, 42] {
        run(&cache, &mlp_layer(), &mlp(b), &compiler);
    }
    assert_eq!(compiler.compiles(), 3, "two static sizes, then dynamic");
    assert_eq!(compiler.compiles_of(&mlp(42)), 0);
}
