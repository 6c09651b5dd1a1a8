//! Background compiles taken together: misses queued at the same time, of
//! one function or several, compile as one module.
//!
//! Every queued miss (in [`CompileMode::Background`](crate::settings::CompileMode))
//! also enters this queue with its lowering. When a compile thread runs the
//! miss's job and the lowering is still here, it takes it with the lowerings
//! queued before others (a fair share: the queue's length over the compile
//! threads, at most the configured limit) and compiles them in one compiler
//! invocation, which pays IREE's fixed cost per compile once
//! ([`Pipeline::batch`](crate::compile::pipeline::Pipeline)). When another thread
//! already took the job's lowering into its batch, this thread compiles a
//! batch of what is still queued, if anything, then waits for its own
//! result: no thread idles while lowerings wait.
//!
//! Every result is delivered to its ticket, also when a batch's compile
//! unwinds (each undelivered ticket of it gets an abandoned compile). A
//! ticket whose job is dropped without running leaves the queue
//! ([`Ticket`]'s `Drop`).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use jit_cache::single_flight::Flight;
use jit_cache::CompileFailure;

use crate::compile::lowering::LoweredVariant;
use crate::compile::variant::Variant;

/// What compiling one lowering produced.
pub(crate) type Compiled = Result<Variant, CompileFailure>;

/// The lowerings of queued misses whose compile has not started.
#[derive(Debug)]
pub(crate) struct BatchQueue {
    pending: Mutex<VecDeque<Arc<Slot>>>,
    /// The most lowerings one compile takes.
    limit: usize,
    /// The compile threads that share the queue.
    threads: usize,
}

/// One queued lowering, then its result (the workspace's one
/// single-flight primitive: the first result delivered wins).
#[derive(Debug)]
struct Slot {
    /// Taken by the thread that compiles it.
    lowering: Mutex<Option<LoweredVariant>>,
    result: Arc<Flight<Compiled>>,
}

/// A queued miss's place in the queue; dropping it before its lowering was
/// taken withdraws the lowering.
#[derive(Debug)]
pub(crate) struct Ticket {
    queue: Arc<BatchQueue>,
    slot: Arc<Slot>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.queue
            .lock()
            .retain(|queued| !Arc::ptr_eq(queued, &self.slot));
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl BatchQueue {
    /// A queue shared by `threads` compile threads whose compiles take at
    /// most `limit` lowerings each (1: every lowering alone).
    pub(crate) fn new(limit: usize, threads: usize) -> Arc<BatchQueue> {
        Arc::new(BatchQueue {
            pending: Mutex::new(VecDeque::new()),
            limit: limit.max(1),
            threads: threads.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Arc<Slot>>> {
        lock(&self.pending)
    }

    /// Queues `lowering`; its job compiles it with [`Ticket::compile`].
    pub(crate) fn push(self: &Arc<Self>, lowering: LoweredVariant) -> Ticket {
        let slot = Arc::new(Slot {
            lowering: Mutex::new(Some(lowering)),
            result: Flight::new(),
        });
        self.lock().push_back(Arc::clone(&slot));
        Ticket {
            queue: Arc::clone(self),
            slot,
        }
    }

    /// Takes the lowerings of one batch off the queue: `own` first (when it
    /// is still queued) and a fair share of the others, or when `own` is
    /// gone, as many of the others as one compile may take (the thread
    /// would otherwise only wait).
    fn take(&self, own: &Arc<Slot>) -> Vec<Arc<Slot>> {
        let mut pending = self.lock();
        let mut batch = Vec::new();
        let share = match pending.iter().position(|slot| Arc::ptr_eq(slot, own)) {
            Some(index) => {
                let share = pending.len().div_ceil(self.threads);
                batch.extend(pending.remove(index));
                share
            }
            None => pending.len(),
        };
        while batch.len() < share.clamp(1, self.limit) {
            let Some(slot) = pending.pop_front() else {
                break;
            };
            batch.push(slot);
        }
        batch
    }
}

impl Ticket {
    /// Compiles this ticket's lowering, in a batch taken as the module docs
    /// say, with `compile` (which returns one result per lowering, in
    /// order), and returns its result.
    pub(crate) fn compile(
        &self,
        compile: impl FnOnce(Vec<LoweredVariant>) -> Vec<Compiled>,
    ) -> Compiled {
        let batch = self.queue.take(&self.slot);
        if !batch.is_empty() {
            let delivery = Delivery(batch);
            let lowerings = delivery
                .0
                .iter()
                .filter_map(|slot| lock(&slot.lowering).take())
                .collect();
            for (slot, result) in delivery.0.iter().zip(compile(lowerings)) {
                slot.result.complete(result);
            }
        }
        self.slot.result.wait()
    }
}

/// The slots of a batch being compiled: each gets a result, an abandoned
/// compile when the compile did not produce one (it unwound).
struct Delivery(Vec<Arc<Slot>>);

impl Drop for Delivery {
    fn drop(&mut self) {
        for slot in &self.0 {
            slot.result.complete(Err(CompileFailure::Abandoned));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::*;

    fn lowering(entry: &str) -> LoweredVariant {
        LoweredVariant {
            function: "f".into(),
            signature: format!("({entry})"),
            entry: entry.into(),
            functions: String::new(),
            module: String::new(),
            outputs: None,
            metadata: Arc::new(()),
            metadata_bytes: None,
            semantics: crate::config::FloatSemantics::Strict,
            bundles_missed_for: None,
        }
    }

    /// A compile that fails each lowering with its entry's name, recording
    /// the batches it was given.
    fn compile_into(
        batches: &Mutex<Vec<Vec<String>>>,
    ) -> impl FnOnce(Vec<LoweredVariant>) -> Vec<Compiled> + '_ {
        |lowerings| {
            let entries: Vec<String> = lowerings.iter().map(|l| l.entry.clone()).collect();
            lock(batches).push(entries.clone());
            entries
                .into_iter()
                .map(|entry| Err(CompileFailure::message(entry)))
                .collect()
        }
    }

    /// The entry a failed result names.
    fn message(compiled: Compiled) -> String {
        match compiled {
            Err(failure) => std::error::Error::source(&failure)
                .expect("a backend failure has its message as its source")
                .to_string(),
            Ok(_) => panic!("the test compiles nothing"),
        }
    }

    #[test]
    fn a_thread_takes_its_own_and_a_fair_share_and_helps_when_its_own_is_taken() {
        let queue = BatchQueue::new(8, 2);
        let tickets: Vec<Ticket> = ["a", "b", "c", "d", "e"]
            .into_iter()
            .map(|entry| queue.push(lowering(entry)))
            .collect();
        let batches = Mutex::new(Vec::new());
        // `b` is the job run first: it takes itself and ceil(5 / 2) - 1
        // from the front.
        assert_eq!(message(tickets[1].compile(compile_into(&batches))), "b");
        // `a` was taken with it; its thread compiles what is left.
        assert_eq!(message(tickets[0].compile(compile_into(&batches))), "a");
        for (ticket, entry) in tickets.iter().zip(["a", "b", "c", "d", "e"]).skip(2) {
            assert_eq!(message(ticket.compile(compile_into(&batches))), entry);
        }
        assert_eq!(
            *lock(&batches),
            [vec!["b", "a", "c"], vec!["d", "e"]],
            "two compiles for five lowerings"
        );
    }

    #[test]
    fn the_limit_bounds_a_batch_and_one_compiles_each_alone() {
        for (limit, expected) in [(2, vec![2, 2]), (1, vec![1, 1, 1, 1])] {
            let queue = BatchQueue::new(limit, 1);
            let tickets: Vec<Ticket> = (0..4)
                .map(|i| queue.push(lowering(&i.to_string())))
                .collect();
            let batches = Mutex::new(Vec::new());
            for ticket in &tickets {
                ticket.compile(compile_into(&batches)).unwrap_err();
            }
            let sizes: Vec<usize> = lock(&batches).iter().map(Vec::len).collect();
            assert_eq!(sizes, expected, "limit {limit}");
        }
    }

    #[test]
    fn a_dropped_ticket_leaves_the_queue() {
        let queue = BatchQueue::new(8, 1);
        let (a, b) = (queue.push(lowering("a")), queue.push(lowering("b")));
        drop(b);
        let batches = Mutex::new(Vec::new());
        assert_eq!(message(a.compile(compile_into(&batches))), "a");
        assert_eq!(*lock(&batches), [vec!["a"]]);
        assert!(queue.lock().is_empty());
    }

    #[test]
    fn a_batch_whose_compile_unwinds_abandons_every_member() {
        let queue = BatchQueue::new(8, 1);
        let (a, b) = (queue.push(lowering("a")), queue.push(lowering("b")));
        let unwound = catch_unwind(AssertUnwindSafe(|| {
            a.compile(|_| panic!("the compiler crashed"))
        }));
        assert!(unwound.is_err());
        // `b` was in `a`'s batch: its job returns at once.
        assert!(matches!(
            b.compile(|_| unreachable!("nothing is left to compile")),
            Err(CompileFailure::Abandoned)
        ));
    }
}
