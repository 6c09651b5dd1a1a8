//! Compiles in progress: one compile per signature, others wait for it.

use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::error::CompileError;

/// The result of one compile, shared with every call that waited for it.
pub(crate) type CompileResult<E> = Result<Arc<E>, Arc<CompileError>>;

/// A compile in progress. The compiling call fills it exactly once (also when
/// it unwinds, see `cache::CompileTicket`), which wakes every waiter.
#[derive(Debug)]
pub(crate) struct InFlight<E> {
    result: Mutex<Option<CompileResult<E>>>,
    done: Condvar,
}

impl<E> InFlight<E> {
    pub fn new() -> Arc<Self> {
        Arc::new(InFlight {
            result: Mutex::new(None),
            done: Condvar::new(),
        })
    }

    /// Publishes the result and wakes the waiters.
    pub fn complete(&self, result: CompileResult<E>) {
        let mut slot = self.result.lock().unwrap_or_else(PoisonError::into_inner);
        *slot = Some(result);
        drop(slot);
        self.done.notify_all();
    }

    /// Blocks until the result is published.
    pub fn wait(&self) -> CompileResult<E> {
        let slot = self.result.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = self
            .done
            .wait_while(slot, |r| r.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        match &*slot {
            Some(Ok(exe)) => Ok(Arc::clone(exe)),
            Some(Err(e)) => Err(Arc::clone(e)),
            None => unreachable!("wait_while returned before the result was published"),
        }
    }
}
