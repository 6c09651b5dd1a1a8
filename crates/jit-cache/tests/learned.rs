//! What the policy learned, kept between processes: a cache given a
//! `PolicyMemory` starts each function from what an earlier cache learned
//! (dims that went dynamic, signatures that were cached) and hands it what
//! it learns when that changes, never on a hit. The memory here keeps each
//! function's policy as the text of a policy file, as the disk cache does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jit_cache::{
    stable_hash, CacheConfig, CompileFailure, DType, Dispatch, FallbackReason, FunctionId,
    JitCache, LearnedPolicy, Origin, PolicyMemory, PolicyScope, Prepared, Provenance, Refusal,
    Signature,
};
use test_support::mock_cache::{expected, mlp, run, MockCompiler, MockExe, Ran};

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
        LearnedPolicy::from_text(&self.text(func), &PolicyScope::new(func, COMPILER, TARGET))
            .unwrap()
    }

    /// The text kept of `func`.
    fn text(&self, func: &FunctionId) -> String {
        self.files.lock().unwrap()[func.name()].clone()
    }

    /// Replaces the text kept of `func` (a forger's).
    fn forge(&self, func: &FunctionId, text: String) {
        self.files
            .lock()
            .unwrap()
            .insert(func.name().to_owned(), text);
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

/// A first cache runs batch sizes 3, 5, 7 and 9: batch 3 static, then the
/// dynamic variant from batch 5 on.
fn learn_a_ragged_batch(memory: &Arc<TextMemory>) {
    let cache = remembering(memory, CacheConfig::default());
    let compiler = MockCompiler::new();
    for b in [3, 5, 7, 9, 3] {
        let (ran, _) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
        assert!(matches!(ran, Ran::Compiled(_)));
    }
    assert_eq!(compiler.compiles(), 2);
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
    assert_eq!(hot, [&mlp(-1), &mlp(3)]);

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
    let mut config = CacheConfig::default();
    config.function_capacity = 2;
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
    // Batch 3 cached; the dynamic variant cached as batch 5 makes the
    // batch vary: two changes, the hits change nothing.
    assert_eq!(keeps, [1, 1, 2, 2, 2, 2, 2, 2, 2]);
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
    assert_eq!(compiler.compiles(), 2, "one static size, then dynamic");
    assert_eq!(compiler.compiles_of(&mlp(42)), 0);
}

/// A count no call pattern gives: the forger's.
const ABSURD: u32 = 4_000_000_000;

/// The `hot` lines of a policy's text, each with its count made
/// [`ABSURD`].
fn absurd_hot_lines(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix("hot\t"))
        .map(|rest| {
            let (_, sig) = rest.split_once('\t').unwrap();
            format!("hot\t{ABSURD}\t{sig}")
        })
        .collect()
}

/// `genuine` (a policy's text) with `forged` hot lines before its own, and
/// an end line that matches again, as a forger with write access to the
/// policy files would make it.
fn with_forged_lines(genuine: &str, forged: &[String]) -> String {
    let mut lines: Vec<&str> = genuine
        .lines()
        .filter(|l| !l.starts_with("end\t"))
        .collect();
    let first_hot = lines
        .iter()
        .position(|line| line.starts_with("hot\t"))
        .unwrap_or(lines.len());
    let forged = forged.iter().map(String::as_str);
    lines.splice(first_hot..first_hot, forged);
    let body: String = lines.iter().map(|line| format!("{line}\n")).collect();
    format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes()))
}

/// The hot signatures of `func` that a cache started on `memory` recalls
/// (those within its capacity, the restore bound).
fn restored(memory: &TextMemory, func: &FunctionId, config: &CacheConfig) -> Vec<Signature> {
    let kept = memory.kept(func);
    let capacity = config.capacity_for(func.name());
    kept.hot()
        .iter()
        .take(capacity)
        .map(|(sig, _)| sig.clone())
        .collect()
}

#[test]
#[cfg_attr(
    miri,
    ignore = "ranking logic over 64 policy rewrites, 150 s under miri: its calls, memory and \
              policy text are those the other tests here run"
)]
fn a_forged_policy_is_outranked_by_what_is_used_then_forgotten() {
    let memory = Arc::new(TextMemory::default());
    let softmax = FunctionId::new("softmax", 7);
    let sig = |n| Signature::builder().arg(DType::F32, &[n]).build();
    let real: Vec<Signature> = (1..=6).map(sig).collect();
    let forged: Vec<Signature> = (1000..1064).map(sig).collect();
    // The forger's policy: 64 hot signatures, never called, each claiming
    // billions of calls (a cache of capacity 64 writes their lines).
    {
        let mut config = CacheConfig::default();
        config.function_capacity = 64;
        let cache = remembering(&memory, config);
        let compiler = MockCompiler::new();
        for s in &forged {
            run(&cache, &softmax, s, &compiler);
        }
    }
    let lines = absurd_hot_lines(&memory.text(&softmax));
    assert_eq!(lines.len(), LearnedPolicy::MAX_HOT);
    let text = memory.text(&softmax);
    let header: String = text
        .lines()
        .filter(|line| !line.starts_with("hot\t") && !line.starts_with("end\t"))
        .map(|line| format!("{line}\n"))
        .collect();
    memory.forge(&softmax, with_forged_lines(&header, &lines));
    let recalled = memory.kept(&softmax);
    assert!(recalled.hot().iter().all(|(_, count)| *count == ABSURD));

    // Processes that call the real six, a few times each.
    let config = CacheConfig::default();
    let use_the_real_ones = || {
        let cache = remembering(&memory, config.clone());
        let compiler = MockCompiler::new();
        for _ in 0..5 {
            for s in &real {
                let (ran, _) = run(&cache, &softmax, s, &compiler);
                assert_eq!(ran, Ran::Compiled(expected(s)));
            }
        }
        compiler.compiles()
    };
    assert_eq!(use_the_real_ones(), 6);
    // The next start restores every real one, ahead of anything forged.
    let next = memory.kept(&softmax);
    let first: Vec<&Signature> = next.hot().iter().take(6).map(|(s, _)| s).collect();
    assert!(real.iter().all(|s| first.contains(&s)), "{:?}", next.hot());
    assert!(
        next.hot()[6..].iter().all(|(_, count)| *count < ABSURD),
        "what was not called lost its rank: {:?}",
        next.hot()
    );

    // A couple of runs later, what nobody calls is gone.
    for _ in 0..2 {
        assert_eq!(use_the_real_ones(), 6);
    }
    let mut now = restored(&memory, &softmax, &config);
    now.sort_by_key(|s| s.args()[0].dims()[0]);
    assert_eq!(now, real, "{:?}", memory.kept(&softmax).hot());
    assert_eq!(memory.kept(&softmax).hot().len(), 6);
    // And then nothing changes: nothing is written.
    let keeps = memory.keeps();
    assert_eq!(use_the_real_ones(), 6);
    assert_eq!(memory.keeps(), keeps);
}

#[test]
fn recalled_signatures_called_in_this_process_outrank_forged_ones() {
    let memory = Arc::new(TextMemory::default());
    learn_a_ragged_batch(&memory);
    // Forged static sizes (written by a cache without dynamic dims), with
    // absurd counts, before the genuine records: 6 forged, and the dynamic
    // variant and batch 3: the capacity's 8.
    let forged = Arc::new(TextMemory::default());
    {
        let mut config = CacheConfig::default();
        config.dynamic_dims = false;
        let cache = remembering(&forged, config);
        let compiler = MockCompiler::new();
        for b in 1000..1006 {
            run(&cache, &mlp_layer(), &mlp(b), &compiler);
        }
    }
    let lines = absurd_hot_lines(&forged.text(&mlp_layer()));
    assert_eq!(lines.len(), 6);
    memory.forge(
        &mlp_layer(),
        with_forged_lines(&memory.text(&mlp_layer()), &lines),
    );
    assert_eq!(memory.kept(&mlp_layer()).hot().len(), 8);

    // A process calls batch 3 (and 5), served by the dynamic variant, and
    // caches four static signatures of other classes.
    let config = CacheConfig::default();
    {
        let cache = remembering(&memory, config.clone());
        let compiler = MockCompiler::new();
        for b in [40, 3, 5, 3, 5] {
            let (ran, _) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
            assert_eq!(ran, Ran::Compiled(expected(&mlp(-1))), "batch {b}");
        }
        for rank in 1..=4 {
            let other = Signature::builder().arg(DType::I32, &vec![2; rank]).build();
            run(&cache, &mlp_layer(), &other, &compiler);
        }
        assert_eq!(compiler.compiles(), 5);
    }
    let restored = restored(&memory, &mlp_layer(), &config);
    assert!(
        restored.contains(&mlp(3)) && restored.contains(&mlp(-1)),
        "batch 3 and the dynamic variant, called, outrank what was not: {:?}",
        memory.kept(&mlp_layer()).hot()
    );

    // So the next process gets batch 3 back static, as it was.
    let cache = remembering(&memory, config);
    let compiler = MockCompiler::new();
    let (ran, _) = run(&cache, &mlp_layer(), &mlp(3), &compiler);
    assert_eq!(ran, Ran::Compiled(expected(&mlp(3))));
}
