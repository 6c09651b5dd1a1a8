//! [`JitCache`]: the thread-safe handle and the compile orchestration.

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::byte_size::ByteSize;
use crate::config::CacheConfig;
use crate::dispatch::{Dispatch, FallbackReason, Origin, Outcome};
use crate::error::{CompileFailure, ConfigError};
use crate::explain::MissReason;
use crate::function_cache::Evicted;
use crate::function_id::FunctionId;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::state::{
    CompileResult, Finished, Inner, Miss, MissAction, NotCached, Note, Started, Step,
};
use crate::stats::CacheStats;

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
    state: Mutex<Inner<E>>,
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
        d.field("config", &self.shared.config).finish()
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
    pub fn new(config: CacheConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self::build(config))
    }

    fn build(config: CacheConfig) -> Self {
        JitCache {
            shared: Arc::new(Shared {
                state: Mutex::new(Inner::new(&config)),
                config,
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
    fn lock(&self) -> MutexGuard<'_, Inner<E>> {
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides how to run a call of `func` with `sig`: a cached executable,
    /// one compiled now by `compile` (outside the lock; concurrent misses on
    /// the same signature compile once), or the interpreter.
    ///
    /// A panic in `compile` is caught and stored as a failed compile of `sig`.
    pub fn get_or_compile<F>(&self, func: &FunctionId, sig: &Signature, compile: F) -> Dispatch<E>
    where
        F: FnOnce(&Signature) -> Result<E, CompileFailure>,
    {
        let step = self.lock().begin_call(func, sig, &self.shared.config);
        match step {
            Step::Hit { exe, notes } => {
                log_notes(func, notes);
                Dispatch::Compiled {
                    exe,
                    origin: Origin::Hit,
                }
            }
            Step::Miss(miss) => self.on_miss(func, sig, miss, compile),
        }
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
    ) -> (R, Outcome) {
        match self.get_or_compile(func, sig, compile) {
            Dispatch::Compiled { exe, origin } => (run(&exe), Outcome::Compiled(origin)),
            Dispatch::Interpret { reason } => (interpret(&reason), Outcome::Interpreted(reason)),
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
        let Miss {
            number,
            reason,
            action,
            notes,
        } = miss;
        log_miss(func, sig, number, &reason, &action);
        log_notes(func, notes);
        match action {
            MissAction::Interpret(reason) => Dispatch::Interpret { reason },
            MissAction::Wait(flight) => match flight.wait() {
                Ok(exe) => Dispatch::Compiled {
                    exe,
                    origin: Origin::CompiledByOtherCall,
                },
                Err(error) => {
                    self.lock().count_failed_wait(func);
                    Dispatch::Interpret {
                        reason: FallbackReason::CompileFailed(error),
                    }
                }
            },
            MissAction::Compile { started, flight } => {
                let ticket = CompileTicket {
                    cache: self,
                    func,
                    sig,
                    started,
                    flight,
                    pending: true,
                };
                let start = Instant::now();
                let result = run_compile(compile, sig);
                ticket.finish(result, start.elapsed(), reason)
            }
        }
    }

    /// Drops every entry of `func` and forgets its failures, thrash state and
    /// counters (the totals keep them); returns how many entries were
    /// dropped. Use it when a function is redefined or deleted. Compiles of
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

/// Runs the compile callback, catching a panic and measuring the size.
fn run_compile<E: Executable>(
    compile: impl FnOnce(&Signature) -> Result<E, CompileFailure>,
    sig: &Signature,
) -> Result<(Arc<E>, usize), Arc<CompileFailure>> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        compile(sig).map(|exe| {
            let bytes = exe.size_bytes();
            (Arc::new(exe), bytes)
        })
    }));
    match outcome {
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
    sig: &'a Signature,
    started: Started,
    flight: Arc<Flight<CompileResult<E>>>,
    pending: bool,
}

impl<E: Executable> CompileTicket<'_, E> {
    fn finish(
        mut self,
        result: Result<(Arc<E>, usize), Arc<CompileFailure>>,
        elapsed: Duration,
        miss: MissReason,
    ) -> Dispatch<E> {
        let config = &self.cache.shared.config;
        let Finished {
            evicted,
            not_cached,
            notes,
        } = self.cache.lock().finish_compile(
            self.func,
            self.sig,
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
            Err(error) => tracing::warn!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                setting = "CacheConfig::failed_compile_retry_after",
                "{func}: compiling {sig} failed: {error}. Calls with this signature run in the \
                 interpreter for the next {} calls (CacheConfig::failed_compile_retry_after) or \
                 until JitCache::clear_failures",
                config.failed_compile_retry_after
            ),
        }
        if let (Some(NotCached::FunctionEvicted), Ok(_)) = (not_cached, &result) {
            tracing::debug!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                "{func}: compiled {sig} after the function was evicted; not cached"
            );
        }
        if let (Some(NotCached::TooLarge), Ok((_, bytes))) = (not_cached, &result) {
            tracing::warn!(
                target: "jit_cache",
                function = %func,
                signature = %sig,
                setting = "CacheConfig::max_total_bytes",
                "{func}: the executable for {sig} ({}) exceeds CacheConfig::max_total_bytes ({}); \
                 it runs once and is not cached. Raise CacheConfig::max_total_bytes",
                ByteSize::from(*bytes),
                ByteSize::from(config.max_total_bytes)
            );
        }
        release(evicted);
        for (func, note) in notes {
            note.change.log(&func, note.last_miss.as_ref());
        }
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
) {
    if !tracing::enabled!(target: "jit_cache", tracing::Level::DEBUG) {
        return;
    }
    let action = match action {
        MissAction::Compile {
            started:
                Started {
                    admitted: Some(admit),
                    ..
                },
            ..
        } => format!("compile (admitted at capacity: {admit})"),
        MissAction::Compile { .. } => "compile".to_owned(),
        MissAction::Wait(_) => "wait for the compile in flight".to_owned(),
        MissAction::Interpret(FallbackReason::NotAdmitted { refusal, .. }) => {
            format!("interpret (not admitted at capacity: {refusal})")
        }
        MissAction::Interpret(FallbackReason::Thrashing {
            remaining_cool_down,
            ..
        }) => format!("interpret (thrashing, compiling resumes in {remaining_cool_down} calls)"),
        MissAction::Interpret(FallbackReason::CompileFailed(_)) => "interpret".to_owned(),
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
