//! [`JitCache`]: the thread-safe handle and the compile orchestration.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::byte_size::ByteSize;
use crate::config::CacheConfig;
use crate::dispatch::{Dispatch, FallbackReason, Origin, Provenance};
use crate::error::{CompileFailure, ConfigError, ErrorChain};
use crate::explain::MissReason;
use crate::failures::NEVER;
use crate::function_cache::Evicted;
use crate::function_id::FunctionId;
use crate::generalize::Generalization;
use crate::learned::{LearnedPolicy, PolicyMemory};
use crate::pool::{Job, Pool, QueueFull};
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::state::{
    CacheState, Caller, CompileResult, Finished, Miss, MissAction, NotCached, Note, Progress,
    Specialization, Started, Step, Withdrawal,
};
use crate::stats::CacheStats;
use crate::wait_rule::{Estimates, Position};

/// What the `prepare` of [`JitCache::get_or_queue`] hands back for the
/// signature to compile.
#[derive(Debug)]
pub enum Prepared<E, W> {
    /// The executable, had without compiling (from a disk cache or an
    /// artifact bundle, say): cached at once, and the call runs it
    /// ([`Origin::CompiledNow`]) instead of interpreting.
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
    /// by this call at once ([`Origin::CompiledNow`]). If `prepare`
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
    /// and returns [`Dispatch::Compiled`] ([`Origin::CompiledNow`] for the
    /// compile it queued, [`Origin::CompiledByOtherCall`] for another's),
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

    #[cold]
    fn on_miss<F>(
        &self,
        func: &FunctionId,
        sig: &Signature,
        miss: Miss<E>,
        compile: F,
    ) -> Dispatch<E>
    where
        F: FnOnce(&Signature) -> Result<E, CompileFailure>,
    {
        let (reason, action, _) = miss.logged(self, func, sig);
        match action {
            MissAction::Interpret(reason) => Dispatch::Interpret { reason },
            MissAction::Wait { flight, .. } => {
                self.wait_for(func, &flight, Origin::CompiledByOtherCall)
            }
            MissAction::Compile {
                started,
                flight,
                generalization,
            } => {
                let target = compiled_signature(sig, generalization);
                let ticket = CompileTicket::new(self, func, (&target, sig), started, flight);
                let start = Instant::now();
                let result = run_compile(|| compile(&target));
                ticket.finish(result, start.elapsed(), reason)
            }
        }
    }

    /// Blocks until the compile in `flight` is done: its executable, or the
    /// interpreter if it failed.
    fn wait_for(
        &self,
        func: &FunctionId,
        flight: &Flight<CompileResult<E>>,
        origin: Origin,
    ) -> Dispatch<E> {
        match flight.wait() {
            Ok(exe) => Dispatch::Compiled { exe, origin },
            Err(error) => {
                self.lock().count_fallback(func);
                Dispatch::Interpret {
                    reason: FallbackReason::CompileFailed(error),
                }
            }
        }
    }

    #[cold]
    fn on_queueing_miss<P, W>(
        &self,
        func: &FunctionId,
        sig: &Signature,
        miss: Miss<E>,
        prepare: P,
    ) -> Dispatch<E>
    where
        P: FnOnce(&Signature) -> Result<Prepared<E, W>, CompileFailure>,
        W: FnOnce() -> Result<E, CompileFailure> + Send + 'static,
    {
        let (reason, action, estimates) = miss.logged(self, func, sig);
        match action {
            MissAction::Interpret(reason) => Dispatch::Interpret { reason },
            // Only with estimates: without, the miss interprets.
            MissAction::Wait { flight, progress } => {
                let position = match progress {
                    Progress::Running(since) => Position::Running {
                        elapsed: since.elapsed(),
                    },
                    Progress::Queued(ticket) => Position::Queued {
                        ahead: self.shared.pool.ahead(ticket),
                    },
                    // Not queued yet: as if it were queued now.
                    Progress::Preparing => Position::Queued {
                        ahead: self.shared.pool.queued(),
                    },
                };
                if self.waits(func, sig, estimates, position) {
                    return self.wait_for(func, &flight, Origin::CompiledByOtherCall);
                }
                self.lock().count_fallback(func);
                Dispatch::Interpret {
                    reason: FallbackReason::CompileInFlight,
                }
            }
            MissAction::Compile {
                started,
                flight,
                generalization,
            } => {
                let target = compiled_signature(sig, generalization);
                let ticket = CompileTicket::new(self, func, (&target, sig), started, flight);
                let start = Instant::now();
                let work = match caught(|| prepare(&target)) {
                    Ok(Prepared::Queue(work)) => work,
                    Ok(Prepared::Ready(exe)) => {
                        let bytes = exe.size_bytes();
                        return ticket.ready((Arc::new(exe), bytes), start.elapsed(), reason);
                    }
                    Err(error) => return ticket.prepare_failed(error, start.elapsed(), reason),
                };
                let Some((flight, ticket)) = self.submit(ticket, reason.clone(), work, true) else {
                    return Dispatch::Interpret {
                        reason: FallbackReason::CompileQueueFull,
                    };
                };
                let position = Position::Queued {
                    ahead: self.shared.pool.ahead(ticket),
                };
                let waits = self.waits(func, &target, estimates, position);
                self.lock()
                    .queued(func, &target, started.generation, &flight, ticket, !waits);
                if waits {
                    self.wait_for(func, &flight, Origin::CompiledNow { miss: reason })
                } else {
                    Dispatch::Interpret {
                        reason: FallbackReason::CompileQueued,
                    }
                }
            }
        }
    }

    /// Submits `work`, the compile that `ticket` is to finish, to the
    /// background pool: the queued job completes the flight from then on.
    /// Returns the flight and the job's ticket, or `None` when the queue is
    /// full (the compile is withdrawn; the submitting call `interprets`, or
    /// runs compiled code).
    fn submit<W>(
        &self,
        ticket: CompileTicket<'_, E>,
        miss: MissReason,
        work: W,
        interprets: bool,
    ) -> Option<(Arc<Flight<CompileResult<E>>>, u64)>
    where
        W: FnOnce() -> Result<E, CompileFailure> + Send + 'static,
    {
        let job = QueuedCompile {
            cache: Arc::downgrade(&self.shared),
            func: ticket.func.clone(),
            sig: ticket.sig.clone(),
            call: ticket.call.clone(),
            started: ticket.started,
            flight: Arc::clone(&ticket.flight),
            miss,
            work: Some(Box::new(work)),
        };
        let flight = ticket.disarm();
        match self.shared.pool.submit(job) {
            Ok(queued) => Some((flight, queued)),
            Err(QueueFull(job)) => {
                job.withdraw(Withdrawal::QueueFull { interprets });
                None
            }
        }
    }

    /// Queues the compile of `sig`, a hot size that a variant with dynamic
    /// dims serves (this call runs that variant): `prepare` runs here as
    /// for a miss, and its result is cached like a queued miss's. Nothing
    /// waits for it; a failure is remembered like any other, and the
    /// dynamic variant keeps serving `sig`.
    #[cold]
    fn specialize<P, W>(
        &self,
        func: &FunctionId,
        sig: &Signature,
        specialization: Specialization<E>,
        prepare: P,
    ) where
        P: FnOnce(&Signature) -> Result<Prepared<E, W>, CompileFailure>,
        W: FnOnce() -> Result<E, CompileFailure> + Send + 'static,
    {
        let Specialization {
            started,
            flight,
            reason,
        } = specialization;
        tracing::debug!(
            target: "jit_cache",
            function = %func,
            signature = %sig,
            "{func}: compiling {sig} in the background: {reason}"
        );
        let ticket = CompileTicket::new(self, func, (sig, sig), started, flight);
        let start = Instant::now();
        // The call runs the dynamic variant: it takes no result from here.
        let _served_meanwhile = match caught(|| prepare(sig)) {
            Ok(Prepared::Queue(work)) => {
                if let Some((flight, queued)) = self.submit(ticket, reason, work, false) {
                    self.lock()
                        .queued(func, sig, started.generation, &flight, queued, false);
                }
                return;
            }
            Ok(Prepared::Ready(exe)) => {
                let bytes = exe.size_bytes();
                ticket.finish(Ok((Arc::new(exe), bytes)), start.elapsed(), reason)
            }
            Err(error) => ticket.finish(Err(error), start.elapsed(), reason),
        };
    }

    /// Whether a queueing miss waits for the compile of `sig` at `position`
    /// (the rule of [`get_or_queue`](Self::get_or_queue)); logs why.
    fn waits(
        &self,
        func: &FunctionId,
        sig: &Signature,
        estimates: Option<Estimates>,
        position: Position,
    ) -> bool {
        let Some(estimates) = estimates else {
            return false;
        };
        let threads = self.shared.pool.threads();
        let waits = estimates.waits(position, threads);
        tracing::debug!(
            target: "jit_cache",
            function = %func,
            signature = %sig,
            "{func}: {} for {sig}: interpreting takes about {:.1?}, the compile about {:.1?} more \
             ({position})",
            if waits { "waits for the compile" } else { "interprets meanwhile" },
            estimates.interpreted,
            estimates.remaining(position, threads),
        );
        waits
    }

    /// Caches `exe`, compiled for `func` and `sig` outside a call (ahead of
    /// time, or in a batch with other signatures), as a compile of that
    /// call would: it counts as a compile taking `compile_time`, and evicts
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
        let bytes = exe.size_bytes();
        let compiled = (Arc::new(exe), bytes);
        let finished =
            self.lock()
                .insert_compiled(func, sig, compiled, compile_time, &self.shared.config);
        let Some(mut finished) = finished else {
            return false;
        };
        tracing::debug!(
            target: "jit_cache",
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

    /// A snapshot of the counters; `Display` prints a report table.
    pub fn stats(&self) -> CacheStats {
        self.lock().stats(&self.shared.config)
    }
}

/// The signature a compile is for: the call's, or its generalization's.
fn compiled_signature(sig: &Signature, generalization: Option<Box<Generalization>>) -> Signature {
    match generalization {
        Some(generalization) => generalization.into_signature(),
        None => sig.clone(),
    }
}

fn hit<E>(func: &FunctionId, exe: Arc<E>, notes: Vec<Note>) -> Dispatch<E> {
    log_notes(func, notes);
    Dispatch::Compiled {
        exe,
        origin: Origin::Hit,
    }
}

type Work<E> = Box<dyn FnOnce() -> Result<E, CompileFailure> + Send>;

/// A compile on the background queue. It holds the cache weakly, so that a
/// queued job never keeps a dropped cache alive; dropped without running,
/// it withdraws its in-flight marker.
struct QueuedCompile<E> {
    cache: Weak<Shared<E>>,
    func: FunctionId,
    /// The signature compiled.
    sig: Signature,
    /// The signature of the call that queued it.
    call: Signature,
    started: Started,
    flight: Arc<Flight<CompileResult<E>>>,
    miss: MissReason,
    /// The prepared compile; taken when it runs or is withdrawn.
    work: Option<Work<E>>,
}

impl<E> QueuedCompile<E> {
    /// Removes the in-flight marker and wakes any blocking waiter: the
    /// compile will not run.
    fn withdraw(mut self, why: Withdrawal) {
        self.withdrawn(why);
    }

    fn withdrawn(&mut self, why: Withdrawal) {
        if self.work.take().is_none() {
            return;
        }
        if let Some(shared) = self.cache.upgrade() {
            shared
                .state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .withdraw_compile(&self.func, &self.sig, self.started.generation, why);
        }
        self.flight
            .complete(Err(Arc::new(CompileFailure::Abandoned)));
    }
}

impl<E: Executable> Job for QueuedCompile<E> {
    /// Compiles and caches, unless the function was evicted since the
    /// compile was queued or the cache is dropped. The cache is held only
    /// weakly while compiling, so that dropping its last handle stops the
    /// pool (after this compile) instead of waiting for the queue.
    fn run(mut self) {
        let start = Instant::now();
        let wanted = self.cache.upgrade().is_some_and(|shared| {
            JitCache { shared }.lock().start_queued(
                &self.func,
                &self.sig,
                self.started.generation,
                start,
            )
        });
        let work = match self.work.take() {
            Some(work) if wanted => work,
            work => {
                self.work = work;
                return self.withdraw(Withdrawal::NotWanted);
            }
        };
        let result = run_compile(work);
        let elapsed = start.elapsed();
        let Some(shared) = self.cache.upgrade() else {
            // The cache is gone: so is everyone who could use the result.
            self.flight
                .complete(Err(Arc::new(CompileFailure::Abandoned)));
            return;
        };
        let cache = JitCache { shared };
        let ticket = CompileTicket {
            cache: &cache,
            func: &self.func,
            sig: &self.sig,
            call: &self.call,
            started: self.started,
            flight: Arc::clone(&self.flight),
            pending: true,
        };
        // No caller waits for this dispatch: later calls find the entry.
        let _cached = ticket.finish(result, elapsed, self.miss.clone());
    }
}

impl<E> Drop for QueuedCompile<E> {
    /// Dropped without running: the pool shut down with the cache.
    fn drop(&mut self) {
        self.withdrawn(Withdrawal::NotWanted);
    }
}

/// Runs a compile, catching a panic and measuring the size.
fn run_compile<E: Executable>(
    compile: impl FnOnce() -> Result<E, CompileFailure>,
) -> Result<(Arc<E>, usize), Arc<CompileFailure>> {
    caught(|| {
        compile().map(|exe| {
            let bytes = exe.size_bytes();
            (Arc::new(exe), bytes)
        })
    })
}

/// Runs a user callback, turning a panic into a failure.
fn caught<T>(f: impl FnOnce() -> Result<T, CompileFailure>) -> Result<T, Arc<CompileFailure>> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(done)) => Ok(done),
        Ok(Err(error)) => Err(Arc::new(error)),
        Err(payload) => Err(Arc::new(CompileFailure::Panicked {
            message: panic_message(payload.as_ref()),
        })),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_owned()
    }
}

/// The duty of the call that compiles: publish a result to the waiters and
/// remove the in-flight marker, also if it unwinds on the way.
struct CompileTicket<'a, E: Executable> {
    cache: &'a JitCache<E>,
    func: &'a FunctionId,
    /// The signature compiled.
    sig: &'a Signature,
    /// The call's signature: `sig`, or what `sig` generalizes.
    call: &'a Signature,
    started: Started,
    flight: Arc<Flight<CompileResult<E>>>,
    pending: bool,
}

impl<'a, E: Executable> CompileTicket<'a, E> {
    /// The duty to finish the compile of `target` for the missing `call`.
    fn new(
        cache: &'a JitCache<E>,
        func: &'a FunctionId,
        (target, call): (&'a Signature, &'a Signature),
        started: Started,
        flight: Arc<Flight<CompileResult<E>>>,
    ) -> Self {
        CompileTicket {
            cache,
            func,
            sig: target,
            call,
            started,
            flight,
            pending: true,
        }
    }

    /// The queueing call's `prepare` failed: the failure of the signature,
    /// which this call takes (it interprets now).
    fn prepare_failed(
        mut self,
        error: Arc<CompileFailure>,
        elapsed: Duration,
        miss: MissReason,
    ) -> Dispatch<E> {
        self.started.caller = Caller::Blocking;
        self.finish(Err(error), elapsed, miss)
    }

    /// The queueing call's `prepare` had the executable without compiling
    /// (from a disk cache, say): cached now, and this call runs it.
    fn ready(mut self, exe: (Arc<E>, usize), elapsed: Duration, miss: MissReason) -> Dispatch<E> {
        self.started.caller = Caller::Blocking;
        self.finish(Ok(exe), elapsed, miss)
    }

    /// Hands the duty to a queued compile: returns the flight, which the
    /// queued compile completes (or withdraws).
    fn disarm(mut self) -> Arc<Flight<CompileResult<E>>> {
        self.pending = false;
        Arc::clone(&self.flight)
    }

    fn finish(
        mut self,
        result: Result<(Arc<E>, usize), Arc<CompileFailure>>,
        elapsed: Duration,
        miss: MissReason,
    ) -> Dispatch<E> {
        let config = &self.cache.shared.config;
        let mut finished = self.cache.lock().finish_compile(
            self.func,
            self.sig,
            Some(self.call),
            self.started,
            &result,
            elapsed,
            config,
        );
        let published: CompileResult<E> = match &result {
            Ok((exe, _)) => Ok(Arc::clone(exe)),
            Err(e) => Err(Arc::clone(e)),
        };
        self.flight.complete(published);
        self.pending = false;
        let (func, sig) = (self.func, self.sig);
        match &result {
            Ok((_, bytes)) => tracing::debug!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                "{func}: compiled {sig} in {elapsed:.1?} ({})",
                ByteSize::from(*bytes)
            ),
            // The lowering's verdict on a call (its dims do not fit, say):
            // the caller's interpreter reports it; the cache only notes it.
            // A call refused as itself is remembered by its own signature.
            Err(error) if error.is_refusal() => {
                let sig = if error.is_call_refusal() {
                    self.call
                } else {
                    sig
                };
                tracing::debug!(
                    target: "jit_cache",
                    function = %func,
                    signature = %sig,
                    "{func}: {sig} not compiled: {}. Calls with this signature run in the \
                     interpreter {}",
                    ErrorChain(&**error),
                    RetryAfter(config.failed_compile_retry_after)
                )
            }
            Err(error) if matches!(miss, MissReason::HotSize { .. }) => tracing::warn!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                setting = "CacheConfig::specialize_hot_sizes",
                "{func}: compiling {sig}, a hot size, failed: {}. The variant with dynamic dims \
                 keeps serving it; it is not tried again {}",
                ErrorChain(&**error),
                RetryAfter(config.failed_compile_retry_after)
            ),
            Err(error) => tracing::warn!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                setting = "CacheConfig::failed_compile_retry_after",
                "{func}: compiling {sig} failed: {}. Calls with this signature run in the \
                 interpreter {}",
                ErrorChain(&**error),
                RetryAfter(config.failed_compile_retry_after)
            ),
        }
        if finished.static_again {
            tracing::warn!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                setting = "CacheConfig::static_shape_functions",
                "{func}: its dims stay static: the variant with dynamic dims {sig} failed to \
                 compile, so later misses like it compile their own shapes. Add `{}` to \
                 CacheConfig::static_shape_functions to skip the attempt",
                func.name()
            );
        }
        let learned = std::mem::take(&mut finished.learned);
        if let Ok((_, bytes)) = &result {
            report_finished(func, sig, *bytes, finished, config);
        } else {
            release(finished.evicted);
            log_finished_notes(finished.notes);
        }
        self.cache.keep(learned);
        match result {
            Ok((exe, _)) => Dispatch::Compiled {
                exe,
                origin: Origin::CompiledNow { miss },
            },
            Err(error) => Dispatch::Interpret {
                reason: FallbackReason::CompileFailed(error),
            },
        }
    }
}

impl<E: Executable> Drop for CompileTicket<'_, E> {
    fn drop(&mut self) {
        if self.pending {
            self.cache
                .lock()
                .abandon_compile(self.func, self.sig, self.started.generation);
            self.flight
                .complete(Err(Arc::new(CompileFailure::Abandoned)));
        }
    }
}

/// How long a failed signature is interpreted, in words.
struct RetryAfter(u64);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            NEVER => f.write_str(
                "until JitCache::clear_failures; it is not retried \
                 (CacheConfig::failed_compile_retry_after is u64::MAX)",
            ),
            calls => write!(
                f,
                "for the next {calls} calls (CacheConfig::failed_compile_retry_after) or until \
                 JitCache::clear_failures"
            ),
        }
    }
}

/// Logs what became of a successful compile of `bytes` bytes, releases the
/// entries it evicted and logs the mode changes they caused.
fn report_finished<E>(
    func: &FunctionId,
    sig: &Signature,
    bytes: usize,
    finished: Finished<E>,
    config: &CacheConfig,
) {
    match finished.not_cached {
        Some(NotCached::FunctionEvicted) => tracing::debug!(
            target: "jit_cache",
            function = %func,
            signature = %sig,
            "{func}: compiled {sig} after the function was evicted; not cached"
        ),
        Some(NotCached::TooLarge) => tracing::warn!(
            target: "jit_cache",
            function = %func,
            signature = %sig,
            setting = "CacheConfig::max_total_bytes",
            "{func}: the executable for {sig} ({}) exceeds CacheConfig::max_total_bytes ({}); \
             it is not cached. Raise CacheConfig::max_total_bytes",
            ByteSize::from(bytes),
            ByteSize::from(config.max_total_bytes)
        ),
        None => {}
    }
    release(finished.evicted);
    log_finished_notes(finished.notes);
}

fn log_finished_notes(notes: Vec<(FunctionId, Note)>) {
    for (func, note) in notes {
        note.change.log(&func, note.last_miss.as_ref());
    }
}

/// Logs and drops evicted entries (outside the lock); returns how many.
fn release<E>(evicted: Vec<(FunctionId, Evicted<E>)>) -> usize {
    let n = evicted.len();
    for (func, e) in evicted {
        tracing::debug!(
            target: "jit_cache",
            function = %func,
            signature = %e.sig,
            "{func}: evicted {} ({}, {})",
            e.sig,
            ByteSize::from(e.bytes),
            e.cause
        );
        // The cache's reference goes now; the executable is freed unless a
        // running call still holds it.
        drop(e.exe);
    }
    n
}

impl<E: Executable> Miss<E> {
    /// Logs the miss and the mode changes it noted, and hands what the
    /// policy learned to `cache`'s memory; returns why it missed, what the
    /// call does, and what a queueing call weighs to wait.
    fn logged(
        self,
        cache: &JitCache<E>,
        func: &FunctionId,
        sig: &Signature,
    ) -> (MissReason, MissAction<E>, Option<Estimates>) {
        let Miss {
            number,
            reason,
            action,
            notes,
            estimates,
            learned,
        } = self;
        log_miss(func, sig, number, &reason, &action, estimates.is_some());
        log_notes(func, notes);
        cache.keep(learned.map(|learned| (func.clone(), learned)));
        (reason, action, estimates)
    }
}

fn log_notes(func: &FunctionId, notes: Vec<Note>) {
    for note in notes {
        note.change.log(func, note.last_miss.as_ref());
    }
}

fn log_miss<E>(
    func: &FunctionId,
    sig: &Signature,
    number: u64,
    reason: &MissReason,
    action: &MissAction<E>,
    may_wait: bool,
) {
    if !tracing::enabled!(target: "jit_cache", tracing::Level::DEBUG) {
        return;
    }
    let action = match action {
        MissAction::Compile {
            generalization: Some(generalization),
            started,
            ..
        } => {
            let verb = match (started.caller, may_wait) {
                (Caller::Background, false) => {
                    "queue the compile of dynamic dims, interpret meanwhile"
                }
                (Caller::Background, true) => "queue the compile of dynamic dims",
                (Caller::Blocking, _) => "compile dynamic dims",
            };
            match started.admitted {
                Some(admit) => format!("{verb} ({generalization}; admitted at capacity: {admit})"),
                None => format!("{verb} ({generalization})"),
            }
        }
        MissAction::Compile {
            started:
                Started {
                    admitted: Some(admit),
                    ..
                },
            ..
        } => format!("compile (admitted at capacity: {admit})"),
        MissAction::Compile {
            started:
                Started {
                    caller: Caller::Background,
                    ..
                },
            ..
        } if !may_wait => "queue the compile, interpret meanwhile".to_owned(),
        MissAction::Compile {
            started:
                Started {
                    caller: Caller::Background,
                    ..
                },
            ..
        } => "queue the compile".to_owned(),
        MissAction::Compile { .. } => "compile".to_owned(),
        MissAction::Wait { .. } if may_wait => {
            "wait for the compile in flight if interpreting takes longer".to_owned()
        }
        MissAction::Wait { .. } => "wait for the compile in flight".to_owned(),
        MissAction::Interpret(FallbackReason::NotAdmitted { refusal, .. }) => {
            format!("interpret (not admitted at capacity: {refusal})")
        }
        MissAction::Interpret(FallbackReason::Thrashing {
            remaining_cool_down,
            ..
        }) => format!("interpret (thrashing, compiling resumes in {remaining_cool_down} calls)"),
        MissAction::Interpret(
            FallbackReason::CompileFailed(_)
            | FallbackReason::CompileQueued
            | FallbackReason::CompileQueueFull,
        ) => "interpret".to_owned(),
        MissAction::Interpret(FallbackReason::CompileInFlight) => {
            "interpret while another call compiles".to_owned()
        }
    };
    tracing::debug!(
        target: "jit_cache",
        function = %func,
        signature = %sig,
        "{func}: miss #{number} ({reason}) -> {action}"
    );
}
