//! [`JitCache`]: the thread-safe handle and the compile orchestration.
//!
//! - `mod.rs`: the handle and its public methods.
//! - `miss.rs`: what a miss does once the state decided (compile, queue,
//!   wait, interpret), outside the lock.
//! - `ticket.rs`: [`CompileTicket`](ticket::CompileTicket), the duty of the
//!   call that compiles.
//! - `queued.rs`: a compile on the background pool; running a callback.
//! - `log.rs`: what the cache logs, and the drop of evicted executables.

mod log;
mod miss;
mod queued;
mod ticket;

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::byte_size::ByteSize;
use crate::cached::CachedEntry;
use crate::config::CacheConfig;
use crate::dispatch::{Dispatch, FallbackReason, Provenance};
use crate::error::{CompileFailure, ConfigError};
use crate::function_id::FunctionId;
use crate::learned::{LearnedPolicy, PolicyMemory};
use crate::pool::Pool;
use crate::signature::Signature;
use crate::state::{CacheState, Caller, Step};
use crate::stats::CacheStats;

use log::{hit, release, report_finished};
use queued::QueuedCompile;

/// What the `prepare` of [`JitCache::get_or_queue`] hands back for the
/// signature to compile.
#[derive(Debug)]
#[expect(
    clippy::exhaustive_enums,
    reason = "the two answers a `prepare` closure can give (ready, or compile in the background); \
        the cache handles each, and another would change what every `prepare` must decide"
)]
pub enum Prepared<E, W> {
    /// The executable, had without compiling (from a disk cache or an
    /// artifact bundle, say): cached at once, and the call runs it
    /// ([`Origin::CompiledNow`](crate::Origin::CompiledNow)) instead of interpreting.
    Ready(E),
    /// The compile to queue on the background pool.
    Queue(W),
}

/// A compiled artifact the cache can hold, e.g. a loaded IREE module.
///
/// Dropping it must release its memory: the cache drops its reference as soon
/// as the entry is evicted (callers still running it keep it alive).
pub trait Executable: Send + Sync + 'static {
    /// Approximate memory held by the executable, counted against
    /// `CacheConfig::max_total_bytes`.
    fn size_bytes(&self) -> usize;

    /// Whether the compile closure fetched this executable ready-made (from
    /// a disk or remote store, an artifact bundle) rather than compiling it.
    /// A fetched miss counts in [`Counters::fetches`](crate::Counters::fetches),
    /// not as a compile, and its time stays out of `compile_time` and of the
    /// compile-time estimate the wait rule uses: a fetch that takes a
    /// millisecond is no sample of how long a compile takes. The default,
    /// `false`, counts every closure run as a compile.
    fn fetched(&self) -> bool {
        false
    }
}

/// A bounded, thread-safe cache of compiled executables, keyed by function
/// and [`Signature`].
///
/// Cloning is cheap and clones share the cache. One lock guards the state; it
/// is never held while compiling, running user callbacks, dropping
/// executables or logging. See the crate documentation for the policy.
pub struct JitCache<E> {
    shared: Arc<Shared<E>>,
}

/// What the handles of one cache share.
struct Shared<E> {
    config: CacheConfig,
    state: Mutex<CacheState<E>>,
    /// Runs queued compiles; dropped (and joined) with the last handle.
    pool: Pool<QueuedCompile<E>>,
    /// Keeps what the policy learns between processes, if anything does.
    memory: Option<Arc<dyn PolicyMemory>>,
}

impl<E> Clone for JitCache<E> {
    fn clone(&self) -> Self {
        JitCache {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<E> fmt::Debug for JitCache<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JitCache");
        if let Ok(state) = self.shared.state.try_lock() {
            d.field("live_entries", &state.live_entries());
        }
        d.field("config", &self.shared.config)
            .field("remembering", &self.shared.memory.is_some())
            .finish()
    }
}

impl<E: Executable> Default for JitCache<E> {
    /// A cache with [`CacheConfig::default`].
    fn default() -> Self {
        Self::build(CacheConfig::default())
    }
}

impl<E: Executable> JitCache<E> {
    /// A cache with `config`, after [`CacheConfig::validate`].
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`CacheConfig::validate`].
    pub fn new(config: CacheConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self::build(config))
    }

    /// A cache with `config` that keeps what its policy learns in `memory`
    /// and starts each function from what `memory` recalls of it: the
    /// dims that went dynamic and the signatures that were cached in
    /// earlier processes (see [`LearnedPolicy`]). `memory` is asked once
    /// per function, on the calling thread of its first call (and again
    /// after [`evict_function`](Self::evict_function) or
    /// [`clear`](Self::clear)), and told what was learned each time that
    /// changes: on compile completions, and on misses that make a dim
    /// vary, never on a hit.
    ///
    /// # Errors
    ///
    /// The [`ConfigError`] of [`CacheConfig::validate`].
    pub fn remembering(
        config: CacheConfig,
        memory: Arc<dyn PolicyMemory>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self::build_with(config, Some(memory)))
    }

    fn build(config: CacheConfig) -> Self {
        Self::build_with(config, None)
    }

    fn build_with(config: CacheConfig, memory: Option<Arc<dyn PolicyMemory>>) -> Self {
        JitCache {
            shared: Arc::new(Shared {
                state: Mutex::new(CacheState::new(&config, memory.is_some())),
                pool: Pool::new(config.compile_threads, config.compile_queue),
                config,
                memory,
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CacheConfig {
        &self.shared.config
    }

    /// The state lock. The lock never guards user code, so a poisoned lock
    /// can only come from a panic in this crate between consistent states;
    /// the cache keeps working rather than failing every later call.
    fn lock(&self) -> MutexGuard<'_, CacheState<E>> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts a call of `func` with `sig` and decides what it does; a
    /// function first seen by a remembering cache is recalled first.
    #[inline]
    fn begin(&self, func: &FunctionId, sig: &Signature, caller: Caller) -> Step<E> {
        let config = &self.shared.config;
        let step = self.lock().begin_call(func, sig, config, caller);
        step.unwrap_or_else(|| self.begin_first_call(func, sig, caller))
    }

    #[cold]
    fn begin_first_call(&self, func: &FunctionId, sig: &Signature, caller: Caller) -> Step<E> {
        let recalled = self.recall(func);
        let config = &self.shared.config;
        let mut state = self.lock();
        state.recalled(func, recalled, config);
        state
            .begin_call(func, sig, config, caller)
            .expect("the function was just recalled")
    }

    /// Makes sure a remembering cache has recalled `func` before it makes
    /// its state (a report or an insert may come before any call).
    fn recall_if_first_seen(&self, func: &FunctionId) {
        if self.lock().needs_recall(func) {
            let recalled = self.recall(func);
            self.lock().recalled(func, recalled, &self.shared.config);
        }
    }

    /// What the memory recalls of `func` (outside the lock: it reads a
    /// file, say).
    fn recall(&self, func: &FunctionId) -> Option<LearnedPolicy> {
        self.shared.memory.as_ref()?.recall(func)
    }

    /// Hands what the policy learned to the memory (outside the lock).
    fn keep(&self, learned: impl IntoIterator<Item = (FunctionId, LearnedPolicy)>) {
        if let Some(memory) = &self.shared.memory {
            for (func, learned) in learned {
                memory.keep(&func, &learned);
            }
        }
    }

    /// Decides how to run a call of `func` with `sig`: a cached executable,
    /// one compiled now by `compile` (outside the lock; concurrent misses on
    /// the same signature compile once), or the interpreter.
    ///
    /// `compile` receives the signature to compile: `sig`, or its
    /// generalization with dynamic dims. Given a generalization, a
    /// `compile` whose lowering can refuse a call checks `sig` itself first
    /// and returns [`CompileFailure::call_refused`] when it is refused (see
    /// [`get_or_queue`](Self::get_or_queue)).
    ///
    /// A panic in `compile` is caught and stored as a failed compile of `sig`.
    pub fn get_or_compile<F>(&self, func: &FunctionId, sig: &Signature, compile: F) -> Dispatch<E>
    where
        F: FnOnce(&Signature) -> Result<E, CompileFailure>,
    {
        match self.begin(func, sig, Caller::Blocking) {
            // Blocking calls never specialize a hot size.
            Step::Hit { exe, notes, .. } => hit(func, exe, notes),
            Step::Miss(miss) => self.on_miss(func, sig, miss, compile),
        }
    }

    /// Like [`get_or_compile`](Self::get_or_compile), but a miss that is to
    /// compile queues its compile on the background pool
    /// ([`CacheConfig::compile_threads`]) and, as a rule, returns
    /// [`FallbackReason::CompileQueued`] at once: the caller runs the
    /// interpreter, and later calls of `sig` run compiled once the compile
    /// is done.
    ///
    /// The compile comes in two parts. `prepare` runs on the calling thread,
    /// outside the lock, and only when this miss compiles (a hit, or a miss
    /// that interprets, runs nothing and copies nothing): it receives the
    /// signature to compile (the call's, or its generalization with dynamic
    /// dims) and does what must happen on the caller's thread (lowering the
    /// caller's own IR, which need not be `Send`); it returns the work to
    /// queue ([`Prepared::Queue`]), which compiles that signature on a pool
    /// thread, or the executable itself when it was had without compiling
    /// ([`Prepared::Ready`]: a disk-cache hit, say), which is cached and run
    /// by this call at once ([`Origin::CompiledNow`](crate::Origin::CompiledNow)). If `prepare`
    /// fails (or panics: the panic is caught), that is the failure of the
    /// signature, remembered like a failed compile (or a refusal,
    /// [`CompileFailure::refused`]); the call returns
    /// [`FallbackReason::CompileFailed`] at once and nothing is queued.
    /// Given a generalization (the call's own dims helped make its dims
    /// vary), a `prepare` whose lowering can refuse a call lowers the
    /// call's own signature first, and returns
    /// [`CompileFailure::call_refused`] when that is refused: the call then
    /// counts for nothing (see "Dynamic dims" in the README).
    ///
    /// Misses of a signature already queued or compiling return
    /// [`FallbackReason::CompileInFlight`]; beyond
    /// [`CacheConfig::compile_queue`] waiting compiles, a miss returns
    /// [`FallbackReason::CompileQueueFull`] and queues nothing.
    ///
    /// # When a miss waits
    ///
    /// Interpreting is not always cheaper than waiting. Once the caller has
    /// reported how long interpreting `func` takes
    /// ([`report_interpreted`](Self::report_interpreted)), a miss whose
    /// compile is queued (by this call, or in flight for another) compares
    /// that time with the compile's expected remaining time:
    ///
    /// ```text
    /// expected = mean compile time × (jobs queued ahead of it / compile_threads + 1)
    ///            − the time it has compiled already, if it is running
    /// ```
    ///
    /// where the mean compile time is `func`'s own mean over its successful
    /// compiles, else the whole cache's, else 1 s (a running compile is
    /// expected to need at least an eighth of the mean more, and one that
    /// has run past the mean as long again as it has run). If interpreting is
    /// expected to take longer, the call blocks until the compile is done
    /// and returns [`Dispatch::Compiled`] ([`Origin::CompiledNow`](crate::Origin::CompiledNow) for the
    /// compile it queued, [`Origin::CompiledByOtherCall`](crate::Origin::CompiledByOtherCall) for another's),
    /// or [`FallbackReason::CompileFailed`] if the compile fails or is
    /// withdrawn. Without a reported time the call interprets. Do not call
    /// it from inside a queued compile: a wait there could wait for its own
    /// thread.
    ///
    /// A queued compile is dropped without running when its function is
    /// evicted ([`evict_function`](Self::evict_function),
    /// [`clear`](Self::clear)) or the cache is dropped; dropping the last
    /// handle waits for the compiles already running, not for the queue.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// use jit_cache::{
    ///     CompileFailure, DType, Dispatch, Executable, FallbackReason, FunctionId, JitCache,
    ///     Origin, Prepared, Signature,
    /// };
    ///
    /// struct Module {
    ///     rank: usize,
    /// }
    ///
    /// impl Executable for Module {
    ///     fn size_bytes(&self) -> usize {
    ///         1024
    ///     }
    /// }
    ///
    /// let cache: JitCache<Module> = JitCache::default();
    /// let sigmoid = FunctionId::new("sigmoid", 1);
    /// // Lowers on the calling thread; the returned compile runs on the pool.
    /// let prepare = |target: &Signature| -> Result<_, CompileFailure> {
    ///     let rank = target.args()[0].rank();
    ///     Ok(Prepared::Queue(move || -> Result<Module, CompileFailure> { Ok(Module { rank }) }))
    /// };
    /// let rows = Signature::builder().arg(DType::F32, &[1, 5]).build();
    /// assert!(matches!(
    ///     cache.get_or_queue(&sigmoid, &rows, prepare),
    ///     Dispatch::Interpret { reason: FallbackReason::CompileQueued }
    /// ));
    /// assert!(cache.wait_for_compiles(Duration::from_secs(600)));
    /// let Dispatch::Compiled { exe, .. } = cache.get_or_queue(&sigmoid, &rows, prepare) else {
    ///     panic!("compiled by now");
    /// };
    /// assert_eq!(exe.rank, 2);
    ///
    /// // Interpreting it takes an hour: the next miss waits for its compile.
    /// cache.report_interpreted(&sigmoid, Duration::from_secs(3600));
    /// let cube = Signature::builder().arg(DType::F32, &[1, 5, 1]).build();
    /// assert!(matches!(
    ///     cache.get_or_queue(&sigmoid, &cube, prepare),
    ///     Dispatch::Compiled { origin: Origin::CompiledNow { .. }, .. }
    /// ));
    /// ```
    pub fn get_or_queue<P, W>(&self, func: &FunctionId, sig: &Signature, prepare: P) -> Dispatch<E>
    where
        P: FnOnce(&Signature) -> Result<Prepared<E, W>, CompileFailure>,
        W: FnOnce() -> Result<E, CompileFailure> + Send + 'static,
    {
        match self.begin(func, sig, Caller::Background) {
            Step::Hit {
                exe,
                notes,
                specialize: None,
            } => hit(func, exe, notes),
            Step::Hit {
                exe,
                notes,
                specialize: Some(specialization),
            } => {
                self.specialize(func, sig, *specialization, prepare);
                hit(func, exe, notes)
            }
            Step::Miss(miss) => self.on_queueing_miss(func, sig, miss, prepare),
        }
    }

    /// Records that interpreting a call of `func` took `took`, for the rule
    /// by which a miss of [`get_or_queue`](Self::get_or_queue) waits for
    /// its compile rather than interpreting. The function's interpreted
    /// time is an exponentially weighted moving average of these reports:
    /// the first sets it, each later one moves it by 1/8 of the difference
    /// (the weight TCP gives a new round-trip time), so that one slow call
    /// does not decide alone. It is forgotten with the function
    /// ([`evict_function`](Self::evict_function), [`clear`](Self::clear)).
    pub fn report_interpreted(&self, func: &FunctionId, took: Duration) {
        self.recall_if_first_seen(func);
        self.lock()
            .report_interpreted(func, took, &self.shared.config);
    }

    /// Blocks until no background compile ([`get_or_queue`](Self::get_or_queue))
    /// is queued or running, and returns true; or returns false once
    /// `timeout` has passed first. When it returns true, every compile
    /// queued before the call has been cached (or has failed, or was
    /// withdrawn). Compiles that callers of
    /// [`get_or_compile`](Self::get_or_compile) run on their own threads are
    /// not waited for. Called from inside a queued compile, it waits for
    /// that compile too, so it times out.
    pub fn wait_for_compiles(&self, timeout: Duration) -> bool {
        self.shared.pool.wait_idle(timeout)
    }

    /// [`get_or_compile`](Self::get_or_compile), then `run` the executable or
    /// `interpret`; returns the result and how the call ran.
    pub fn call<R>(
        &self,
        func: &FunctionId,
        sig: &Signature,
        compile: impl FnOnce(&Signature) -> Result<E, CompileFailure>,
        run: impl FnOnce(&E) -> R,
        interpret: impl FnOnce(&FallbackReason) -> R,
    ) -> (R, Provenance) {
        match self.get_or_compile(func, sig, compile) {
            Dispatch::Compiled { exe, origin } => (run(&exe), Provenance::Compiled(origin)),
            Dispatch::Interpret { reason } => (interpret(&reason), Provenance::Interpreted(reason)),
        }
    }

    /// Caches `exe`, compiled for `func` and `sig` outside a call (ahead of
    /// time, or in a batch with other signatures), as a compile of that
    /// call would: it counts as a compile taking `compile_time` (a fetch
    /// when [`Executable::fetched`] says so), and evicts
    /// what the function's capacity and the global budgets require (at most
    /// the function's capacity of inserted signatures stay). Returns `false`,
    /// dropping `exe`, when `sig` is cached or being compiled already.
    pub fn insert(
        &self,
        func: &FunctionId,
        sig: &Signature,
        exe: E,
        compile_time: Duration,
    ) -> bool {
        self.recall_if_first_seen(func);
        let (bytes, fetched) = (exe.size_bytes(), exe.fetched());
        let compiled = (Arc::new(exe), bytes);
        let finished = self.lock().insert_compiled(
            func,
            sig,
            (compiled, fetched),
            compile_time,
            &self.shared.config,
        );
        let Some(mut finished) = finished else {
            return false;
        };
        tracing::debug!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            "{func}: inserted {sig} compiled ahead ({})",
            ByteSize::from(bytes)
        );
        let learned = std::mem::take(&mut finished.learned);
        report_finished(func, sig, bytes, finished, &self.shared.config);
        self.keep(learned);
        true
    }

    /// Whether `func` has `sig` cached (a hit, were it called now).
    pub fn contains(&self, func: &FunctionId, sig: &Signature) -> bool {
        self.lock().contains(func, sig)
    }

    /// Drops every entry of `func` and forgets its failures, thrash state and
    /// counters (the totals keep them); returns how many entries were
    /// dropped. A [remembering](Self::remembering) cache recalls the
    /// function again at its next call (what its memory keeps stays). Use it when a function is redefined or deleted. Compiles of
    /// `func` in flight still deliver their executable to their callers (and
    /// waiters) but do not enter the cache.
    pub fn evict_function(&self, func: &FunctionId) -> usize {
        let evicted = self.lock().remove_function(func);
        release(evicted)
    }

    /// [`evict_function`](Self::evict_function) for every function; returns
    /// how many entries were dropped.
    pub fn clear(&self) -> usize {
        let evicted = self.lock().remove_all();
        release(evicted)
    }

    /// Forgets every remembered compile failure so the next call of each
    /// failed signature compiles again; returns how many were forgotten.
    pub fn clear_failures(&self) -> usize {
        self.lock().clear_failures()
    }

    /// Every cached executable with its function and signature (a
    /// snapshot: the executables stay alive while the caller holds them).
    pub fn entries(&self) -> Vec<(FunctionId, Signature, Arc<E>)> {
        self.lock().entries()
    }

    /// What the cache holds, one row per cached executable: function,
    /// signature, bytes, hits and how recently it was used (see
    /// [`CachedEntry`]); by function name, then most recently used first.
    /// A snapshot: the executables stay alive while the caller holds them.
    ///
    /// ```
    /// use jit_cache::{CompileFailure, DType, Executable, FunctionId, JitCache, Signature};
    ///
    /// struct Module;
    /// impl Executable for Module {
    ///     fn size_bytes(&self) -> usize {
    ///         1000
    ///     }
    /// }
    ///
    /// let cache: JitCache<Module> = JitCache::default();
    /// let f = FunctionId::new("f", 1);
    /// let compile = |_: &Signature| Ok::<_, CompileFailure>(Module);
    /// for n in [1, 2, 1, 1] {
    ///     let sig = Signature::builder().arg(DType::F32, &[n]).build();
    ///     let _ = cache.get_or_compile(&f, &sig, compile);
    /// }
    /// let rows: Vec<_> = cache
    ///     .cached(None)
    ///     .iter()
    ///     .map(|e| (e.signature.to_string(), e.bytes, e.hits, e.calls_since_use))
    ///     .collect();
    /// assert_eq!(rows, [("(f32[1])".into(), 1000, 2, 0), ("(f32[2])".into(), 1000, 0, 2)]);
    /// ```
    pub fn cached(&self, only: Option<&FunctionId>) -> Vec<CachedEntry<E>> {
        self.lock().cached(only)
    }

    /// A snapshot of the counters; `Display` prints a report table.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats(&self.shared.config)
    }
}
