//! [`CompileTicket`]: the duty of the call that compiles, to publish its
//! result to the calls waiting for it and to report it to the state, also
//! if it unwinds on the way.

use std::sync::Arc;
use std::time::Instant;

use crate::dispatch::{Dispatch, FallbackReason, Origin};
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::state::{Caller, CompileId, CompileReport, CompileResult, Started};

use super::log::{log_compiled, log_finished_notes, release, report_finished};
use super::{Executable, JitCache};

/// The duty of the call that compiles: publish a result to the waiters and
/// remove the in-flight marker, also if it unwinds on the way.
pub(super) struct CompileTicket<'a, E: Executable> {
    pub(super) cache: &'a JitCache<E>,
    pub(super) func: &'a FunctionId,
    /// The signature compiled.
    pub(super) sig: &'a Signature,
    /// The call's signature: `sig`, or what `sig` generalizes.
    pub(super) call: &'a Signature,
    pub(super) started: Started,
    pub(super) flight: Arc<Flight<CompileResult<E>>>,
    /// The cache's one compile clock: from the ticket's making (or the
    /// queued job's start) to its result.
    clock: Instant,
    pending: bool,
}

impl<'a, E: Executable> CompileTicket<'a, E> {
    /// The duty to finish the compile of `target` for the missing `call`,
    /// timed from now.
    pub(super) fn new(
        cache: &'a JitCache<E>,
        func: &'a FunctionId,
        target: &'a Signature,
        call: &'a Signature,
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
            clock: Instant::now(),
            pending: true,
        }
    }

    /// The same duty, timed from `start` (a queued compile's, which makes
    /// its ticket when it is done).
    pub(super) fn timed_from(mut self, start: Instant) -> Self {
        self.clock = start;
        self
    }

    /// The queueing call's `prepare` failed: the failure of the signature,
    /// which this call takes (it interprets now).
    pub(super) fn prepare_failed(
        mut self,
        error: Arc<CompileFailure>,
        miss: MissReason,
    ) -> Dispatch<E> {
        self.started.caller = Caller::Blocking;
        self.finish(Err(error), miss)
    }

    /// The queueing call's `prepare` had the executable without compiling
    /// (from a disk cache, say): cached now, and this call runs it.
    pub(super) fn ready(mut self, exe: (Arc<E>, usize), miss: MissReason) -> Dispatch<E> {
        self.started.caller = Caller::Blocking;
        self.finish(Ok(exe), miss)
    }

    /// The compile, as the state names it.
    fn id(&self) -> CompileId<'a> {
        CompileId {
            func: self.func,
            sig: self.sig,
            generation: self.started.generation,
        }
    }

    /// Hands the duty to a queued compile: returns the flight, which the
    /// queued compile completes (or withdraws).
    pub(super) fn disarm(mut self) -> Arc<Flight<CompileResult<E>>> {
        self.pending = false;
        Arc::clone(&self.flight)
    }

    pub(super) fn finish(
        mut self,
        result: Result<(Arc<E>, usize), Arc<CompileFailure>>,
        miss: MissReason,
    ) -> Dispatch<E> {
        let elapsed = self.clock.elapsed();
        let config = &self.cache.shared.config;
        let report = CompileReport {
            sig: self.sig,
            call: Some(self.call),
            started: self.started,
            fetched: result.as_ref().is_ok_and(|(exe, _)| exe.fetched()),
            result: &result,
            elapsed,
        };
        let mut finished = self.cache.lock().finish_compile(self.func, &report, config);
        let published: CompileResult<E> = match &result {
            Ok((exe, _)) => Ok(Arc::clone(exe)),
            Err(e) => Err(Arc::clone(e)),
        };
        self.flight.complete(published);
        self.pending = false;
        let (func, sig) = (self.func, self.sig);
        log_compiled(func, &report, &miss, finished.static_again, config);
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
            self.cache.lock().abandon_compile(self.id());
            self.flight
                .complete(Err(Arc::new(CompileFailure::Abandoned)));
        }
    }
}
