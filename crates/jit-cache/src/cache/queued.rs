//! [`QueuedCompile`]: a compile on the background pool, and how a user's
//! compile callback is run (a panic caught, the size measured).

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, PoisonError, Weak};
use std::time::Instant;

use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::pool::Job;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::state::{CompileId, CompileResult, Started, Withdrawal};

use super::ticket::CompileTicket;
use super::{Executable, JitCache, Shared};

pub(super) type Work<E> = Box<dyn FnOnce() -> Result<E, CompileFailure> + Send>;

/// A compile on the background queue. It holds the cache weakly, so that a
/// queued job never keeps a dropped cache alive; dropped without running,
/// it withdraws its in-flight marker.
pub(super) struct QueuedCompile<E> {
    pub(super) cache: Weak<Shared<E>>,
    pub(super) func: FunctionId,
    /// The signature compiled.
    pub(super) sig: Signature,
    /// The signature of the call that queued it.
    pub(super) call: Signature,
    pub(super) started: Started,
    pub(super) flight: Arc<Flight<CompileResult<E>>>,
    pub(super) miss: MissReason,
    /// The prepared compile; taken when it runs or is withdrawn.
    pub(super) work: Option<Work<E>>,
}

impl<E> QueuedCompile<E> {
    /// The compile, as the state names it.
    fn id(&self) -> CompileId<'_> {
        CompileId {
            func: &self.func,
            sig: &self.sig,
            generation: self.started.generation,
        }
    }

    /// Removes the in-flight marker and wakes any blocking waiter: the
    /// compile will not run.
    pub(super) fn withdraw(mut self, why: Withdrawal) {
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
                .withdraw_compile(self.id(), why);
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
        let wanted = self
            .cache
            .upgrade()
            .is_some_and(|shared| JitCache { shared }.lock().start_queued(self.id(), start));
        let work = match self.work.take() {
            Some(work) if wanted => work,
            work => {
                self.work = work;
                return self.withdraw(Withdrawal::NotWanted);
            }
        };
        let result = run_compile(work);
        let Some(shared) = self.cache.upgrade() else {
            // The cache is gone: so is everyone who could use the result.
            self.flight
                .complete(Err(Arc::new(CompileFailure::Abandoned)));
            return;
        };
        let cache = JitCache { shared };
        let ticket = CompileTicket::new(
            &cache,
            &self.func,
            &self.sig,
            &self.call,
            self.started,
            Arc::clone(&self.flight),
        )
        .timed_from(start);
        // No caller waits for this dispatch: later calls find the entry.
        let _cached = ticket.finish(result, self.miss.clone());
    }
}

impl<E> Drop for QueuedCompile<E> {
    /// Dropped without running: the pool shut down with the cache.
    fn drop(&mut self) {
        self.withdrawn(Withdrawal::NotWanted);
    }
}

/// Runs a compile, catching a panic and measuring the size.
pub(super) fn run_compile<E: Executable>(
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
pub(super) fn caught<T>(
    f: impl FnOnce() -> Result<T, CompileFailure>,
) -> Result<T, Arc<CompileFailure>> {
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
