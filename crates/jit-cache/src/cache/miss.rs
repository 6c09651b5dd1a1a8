//! A miss, outside the lock: the compile the state decided on runs here
//! (blocking), is prepared here and queued (background), or is waited
//! for; a hot size's own signature is queued beside its dynamic variant.

use std::sync::Arc;

use crate::dispatch::{Dispatch, FallbackReason, Origin};
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::generalize::Generalization;
use crate::pool::QueueFull;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::state::{
    CompileId, CompileResult, Miss, MissAction, Progress, Specialization, Withdrawal,
};
use crate::wait_rule::{Estimates, Position};

use super::queued::{caught, run_compile, QueuedCompile};
use super::ticket::CompileTicket;
use super::{Executable, JitCache, Prepared};

impl<E: Executable> JitCache<E> {
    #[cold]
    pub(super) fn on_miss<F>(
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
                let ticket = CompileTicket::new(self, func, &target, sig, started, flight);
                let result = run_compile(|| compile(&target));
                ticket.finish(result, reason)
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
    pub(super) fn on_queueing_miss<P, W>(
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
                let ticket = CompileTicket::new(self, func, &target, sig, started, flight);
                let work = match caught(|| prepare(&target)) {
                    Ok(Prepared::Queue(work)) => work,
                    Ok(Prepared::Ready(exe)) => {
                        let bytes = exe.size_bytes();
                        return ticket.ready((Arc::new(exe), bytes), reason);
                    }
                    Err(error) => return ticket.prepare_failed(error, reason),
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
                let id = CompileId {
                    func,
                    sig: &target,
                    generation: started.generation,
                };
                self.lock().queued(id, &flight, ticket, !waits);
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
    pub(super) fn specialize<P, W>(
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
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            "{func}: compiling {sig} in the background: {reason}"
        );
        let ticket = CompileTicket::new(self, func, sig, sig, started, flight);
        // The call runs the dynamic variant: it takes no result from here.
        let _served_meanwhile = match caught(|| prepare(sig)) {
            Ok(Prepared::Queue(work)) => {
                if let Some((flight, queued)) = self.submit(ticket, reason, work, false) {
                    let id = CompileId {
                        func,
                        sig,
                        generation: started.generation,
                    };
                    self.lock().queued(id, &flight, queued, false);
                }
                return;
            }
            Ok(Prepared::Ready(exe)) => {
                let bytes = exe.size_bytes();
                ticket.finish(Ok((Arc::new(exe), bytes)), reason)
            }
            Err(error) => ticket.finish(Err(error), reason),
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
            target: crate::log_targets::RECOMPILES,
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
}

/// The signature a compile is for: the call's, or its generalization's.
fn compiled_signature(sig: &Signature, generalization: Option<Box<Generalization>>) -> Signature {
    match generalization {
        Some(generalization) => generalization.into_signature(),
        None => sig.clone(),
    }
}
