//! The one single-flight primitive of the workspace: a result computed once
//! and handed to everyone who waited for it.
//!
//! [`JitCache`](crate::JitCache) keeps one [`Flight`] per signature being
//! compiled (under its lock, so the "compile or wait" decision is atomic with
//! the lookup); jit-store's `ArtifactStore` keeps one per artifact key
//! being built; sheaf-integration's batch queue one per queued background
//! compile. Whoever builds must complete the flight, also when it unwinds
//! (`cache::CompileTicket` here, jit-store's `artifact_store::Builder`,
//! the batch queue's `Delivery`), which wakes every waiter; a flight
//! completed twice keeps the first value.
//!
//! ```
//! use jit_cache::single_flight::Flight;
//!
//! let flight = Flight::new();
//! let waiter = std::thread::spawn({
//!     let flight = flight.clone();
//!     move || flight.wait()
//! });
//! flight.complete("built");
//! flight.complete("ignored: the first value wins");
//! assert_eq!(waiter.join().unwrap(), "built");
//! ```

use std::sync::{Arc, Condvar, Mutex, PoisonError};

/// A value being computed by one thread and awaited by others.
#[derive(Debug)]
pub struct Flight<V> {
    result: Mutex<Option<V>>,
    done: Condvar,
}

impl<V: Clone> Flight<V> {
    /// A flight with no value yet.
    #[must_use]
    pub fn new() -> Arc<Self> {
        Arc::new(Flight {
            result: Mutex::new(None),
            done: Condvar::new(),
        })
    }

    /// Publishes the value and wakes the waiters. The first value wins.
    pub fn complete(&self, value: V) {
        let mut slot = self.result.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(value);
        }
        drop(slot);
        self.done.notify_all();
    }

    /// Blocks until the value is published.
    pub fn wait(&self) -> V {
        let slot = self.result.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = self
            .done
            .wait_while(slot, |value| value.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        slot.clone()
            .expect("wait_while returned before the value was published")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiters_get_the_first_value() {
        let flight = Flight::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let flight = Arc::clone(&flight);
                std::thread::spawn(move || flight.wait())
            })
            .collect();
        flight.complete(7);
        flight.complete(8);
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), 7);
        }
        assert_eq!(flight.wait(), 7);
    }
}
