//! A mock backend for `jit_cache::JitCache` (feature `jit-cache`), shared by
//! jit-cache's and jit-store's tests: an executable that counts its
//! creations and drops, a compiler that counts compiles per signature and
//! can fail or panic, and an interpreter with known results.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use jit_cache::{CompileFailure, DType, Executable, FunctionId, JitCache, Provenance, Signature};

/// Counts mock executables created and dropped (one per test, so tests run
/// in parallel without sharing counts).
#[derive(Debug, Default)]
pub struct Tracker {
    created: AtomicUsize,
    dropped: AtomicUsize,
}

impl Tracker {
    pub fn created(&self) -> usize {
        self.created.load(Ordering::SeqCst)
    }

    pub fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }

    /// Executables alive now.
    pub fn live(&self) -> usize {
        self.created() - self.dropped()
    }
}

/// A compiled "module": returns `expected(sig)` of the signature it was
/// compiled for, so reusing the wrong executable gives a wrong result.
#[derive(Debug)]
pub struct MockExe {
    pub size: usize,
    pub result: i64,
    tracker: Arc<Tracker>,
}

impl Executable for MockExe {
    fn size_bytes(&self) -> usize {
        self.size
    }
}

impl Drop for MockExe {
    fn drop(&mut self) {
        self.tracker.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// What the mock compiler does with a signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behaviour {
    Succeed,
    Fail,
    Panic,
}

type SizeFn = Box<dyn Fn(&Signature) -> usize + Send + Sync>;
type BehaviourFn = Box<dyn Fn(&Signature) -> Behaviour + Send + Sync>;

/// Counts compiles, per signature and in all.
pub struct MockCompiler {
    pub tracker: Arc<Tracker>,
    per_signature: Mutex<HashMap<Signature, usize>>,
    size: SizeFn,
    behaviour: BehaviourFn,
}

impl std::fmt::Debug for MockCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockCompiler")
            .field("tracker", &self.tracker)
            .field("compiles", &self.compiles())
            .finish_non_exhaustive()
    }
}

impl Default for MockCompiler {
    /// Every compile succeeds with 1000-byte executables.
    fn default() -> Self {
        Self::with(|_| 1000, |_| Behaviour::Succeed)
    }
}

impl MockCompiler {
    /// Every compile succeeds with 1000-byte executables.
    pub fn new() -> Self {
        Self::default()
    }

    pub fn with(
        size: impl Fn(&Signature) -> usize + Send + Sync + 'static,
        behaviour: impl Fn(&Signature) -> Behaviour + Send + Sync + 'static,
    ) -> Self {
        MockCompiler {
            tracker: Arc::default(),
            per_signature: Mutex::default(),
            size: Box::new(size),
            behaviour: Box::new(behaviour),
        }
    }

    pub fn compile(&self, sig: &Signature) -> Result<MockExe, CompileFailure> {
        *self
            .per_signature
            .lock()
            .unwrap()
            .entry(sig.clone())
            .or_default() += 1;
        match (self.behaviour)(sig) {
            Behaviour::Succeed => {
                self.tracker.created.fetch_add(1, Ordering::SeqCst);
                Ok(MockExe {
                    size: (self.size)(sig),
                    result: expected(sig),
                    tracker: Arc::clone(&self.tracker),
                })
            }
            Behaviour::Fail => Err(CompileFailure::message(format!("unsupported op for {sig}"))),
            Behaviour::Panic => panic!("mock backend crashed on {sig}"),
        }
    }

    /// Compiles of `sig` so far.
    pub fn compiles_of(&self, sig: &Signature) -> usize {
        self.per_signature
            .lock()
            .unwrap()
            .get(sig)
            .copied()
            .unwrap_or(0)
    }

    /// Compiles so far.
    pub fn compiles(&self) -> usize {
        self.per_signature.lock().unwrap().values().sum()
    }
}

/// The value both the executable and the interpreter compute: the sum of
/// all dims plus the bits of the captured scalars.
pub fn expected(sig: &Signature) -> i64 {
    let dims: i64 = sig.args().iter().flat_map(|a| a.dims()).sum();
    let captured = sig
        .captured()
        .iter()
        .fold(0i64, |acc, c| acc.wrapping_add(c.value().bits() as i64));
    dims.wrapping_add(captured)
}

/// What a call returned and which path produced it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ran {
    Compiled(i64),
    Interpreted(i64),
}

impl Ran {
    /// The result, compiled or interpreted.
    pub fn value(self) -> i64 {
        match self {
            Ran::Compiled(v) | Ran::Interpreted(v) => v,
        }
    }
}

/// One call through `JitCache::call` with the mock backend.
pub fn run(
    cache: &JitCache<MockExe>,
    func: &FunctionId,
    sig: &Signature,
    compiler: &MockCompiler,
) -> (Ran, Provenance) {
    cache.call(
        func,
        sig,
        |s| compiler.compile(s),
        |exe| Ran::Compiled(exe.result),
        |_reason| Ran::Interpreted(expected(sig)),
    )
}

/// `mlp_layer`'s signature at batch `b`: x `f32[b,16]`, W `f32[16,8]`, b `f32[8]`.
pub fn mlp(b: i64) -> Signature {
    Signature::builder()
        .arg(DType::F32, &[b, 16])
        .arg(DType::F32, &[16, 8])
        .arg(DType::F32, &[8])
        .build()
}

/// `calls` batch sizes uniform in 1..=128 from a fixed-seed xorshift
/// generator (the ragged batch).
pub fn ragged_batches(calls: usize) -> Vec<i64> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    (0..calls)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 128) as i64 + 1
        })
        .collect()
}

/// A one-argument f32 signature.
pub fn f32_sig(dims: &[i64]) -> Signature {
    Signature::builder().arg(DType::F32, dims).build()
}

/// Runs `f` and returns its result with the `jit_cache` events (up to debug
/// level) that this thread logged meanwhile (see
/// [`crate::logs::capture_logs`]: a test binary that checks logs
/// must call this around every cache call, in every test).
pub fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    crate::logs::capture_logs(crate::logs::Level::DEBUG, f)
}
