//! The background compile pool: a bounded queue of jobs and the threads that
//! run them.
//!
//! [`JitCache::get_or_queue`](crate::JitCache::get_or_queue) submits a job
//! and returns at once; the job compiles outside the cache's lock and
//! publishes its result like a blocking compile. Threads start with the
//! first job, so a cache that never queues never spawns one. Dropping the
//! pool (with the last handle of its cache) discards the jobs not yet
//! started, lets each running job finish its compile and joins the threads:
//! it waits at most one compile per thread, never for the queue.
//!
//! Each submitted job gets a ticket (its number in submission order), so a
//! caller can ask how many jobs are still queued ahead of it
//! ([`Pool::ahead`]); [`Pool::wait_idle`] blocks until no job is queued or
//! running.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// Work for the pool. A job dropped without running (the pool shut down)
/// must withdraw itself in its `Drop`.
pub(crate) trait Job: Send + 'static {
    fn run(self);
}

/// The queue was full: the job is handed back.
pub(crate) struct QueueFull<J>(pub(crate) J);

pub(crate) struct Pool<J> {
    shared: Arc<PoolShared<J>>,
    threads: usize,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

struct PoolShared<J> {
    queue: Mutex<Queue<J>>,
    /// Signalled when a job is queued or the pool shuts down.
    work: Condvar,
    /// Signalled when the pool becomes idle: no job queued or running.
    idle: Condvar,
}

struct Queue<J> {
    jobs: VecDeque<J>,
    capacity: usize,
    /// Threads started or being started.
    started: usize,
    /// Jobs taken off the queue so far: the tickets below it have left the
    /// queue (jobs leave it in ticket order).
    taken: u64,
    /// Jobs queued so far: the next job's ticket.
    submitted: u64,
    /// Jobs being run.
    running: usize,
    shutdown: bool,
}

impl<J> Queue<J> {
    fn is_idle(&self) -> bool {
        self.jobs.is_empty() && self.running == 0
    }
}

impl<J: Job> Pool<J> {
    /// A pool of up to `threads` threads (at least 1) and up to `capacity`
    /// jobs waiting (at least 1).
    pub(crate) fn new(threads: usize, capacity: usize) -> Self {
        Pool {
            shared: Arc::new(PoolShared {
                queue: Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    capacity: capacity.max(1),
                    started: 0,
                    taken: 0,
                    submitted: 0,
                    running: 0,
                    shutdown: false,
                }),
                work: Condvar::new(),
                idle: Condvar::new(),
            }),
            threads: threads.max(1),
            workers: Mutex::new(Vec::new()),
        }
    }

    /// Queues `job`, starting a thread if fewer than the pool's run, and
    /// returns its ticket; hands the job back when the queue is full.
    pub(crate) fn submit(&self, job: J) -> Result<u64, QueueFull<J>> {
        let mut queue = self.shared.lock();
        if queue.jobs.len() >= queue.capacity || queue.shutdown {
            return Err(QueueFull(job));
        }
        queue.jobs.push_back(job);
        let ticket = queue.submitted;
        queue.submitted += 1;
        let start_one = queue.started < self.threads;
        queue.started += usize::from(start_one);
        drop(queue);
        if start_one {
            self.start_worker();
        } else {
            self.shared.work.notify_one();
        }
        Ok(ticket)
    }

    /// Jobs waiting for a thread.
    pub(crate) fn queued(&self) -> usize {
        self.shared.lock().jobs.len()
    }

    /// Jobs still queued ahead of the job with `ticket`; 0 once it left the
    /// queue itself.
    pub(crate) fn ahead(&self, ticket: u64) -> usize {
        let taken = self.shared.lock().taken;
        usize::try_from(ticket.saturating_sub(taken)).unwrap_or(usize::MAX)
    }

    /// Threads that run jobs (at most; they start with the first jobs).
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Blocks until no job is queued or running (true), or `timeout` passes
    /// first (false). A job whose thread could not start stays queued, so
    /// the wait times out.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let queue = self.shared.lock();
        let (queue, _) = self
            .shared
            .idle
            .wait_timeout_while(queue, timeout, |q| !q.is_idle())
            .unwrap_or_else(PoisonError::into_inner);
        queue.is_idle()
    }

    fn start_worker(&self) {
        let shared = Arc::clone(&self.shared);
        let spawned = thread::Builder::new()
            .name("jit-compile".to_owned())
            .spawn(move || shared.work_loop());
        match spawned {
            Ok(handle) => self
                .workers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(handle),
            // No thread: the job waits for a running worker, or for the next
            // submit to try again. With none at all it is withdrawn when the
            // pool drops.
            Err(error) => {
                self.shared.lock().started -= 1;
                tracing::warn!(
                    target: crate::log_targets::RECOMPILES,
                    %error,
                    "cannot start a background compile thread ({error}); queued compiles wait"
                );
            }
        }
    }
}

impl<J: Job> PoolShared<J> {
    fn lock(&self) -> MutexGuard<'_, Queue<J>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn work_loop(&self) {
        loop {
            let job = {
                let queue = self.lock();
                let mut queue = self
                    .work
                    .wait_while(queue, |q| q.jobs.is_empty() && !q.shutdown)
                    .unwrap_or_else(PoisonError::into_inner);
                if queue.shutdown {
                    return;
                }
                let job = queue.jobs.pop_front();
                if job.is_some() {
                    queue.taken += 1;
                    queue.running += 1;
                }
                job
            };
            // Jobs catch their own panics (the compile callback's); one that
            // escapes would only end this thread, after `Running` counts it
            // done.
            if let Some(job) = job {
                let _running = Running(self);
                job.run();
            }
        }
    }
}

/// A job being run: counted done when dropped, also when the job unwinds.
struct Running<'a, J>(&'a PoolShared<J>);

impl<J> Drop for Running<'_, J> {
    fn drop(&mut self) {
        let mut queue = self.0.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.running -= 1;
        let idle = queue.is_idle();
        drop(queue);
        if idle {
            self.0.idle.notify_all();
        }
    }
}

impl<J> Drop for Pool<J> {
    fn drop(&mut self) {
        let withdrawn = {
            let mut queue = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            queue.shutdown = true;
            std::mem::take(&mut queue.jobs)
        };
        self.shared.work.notify_all();
        self.shared.idle.notify_all();
        // Dropped outside the lock: each withdraws its compile.
        drop(withdrawn);
        let me = thread::current().id();
        let workers = std::mem::take(
            self.workers
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for worker in workers {
            // The last handle of the cache can go on a worker, inside a job:
            // that thread ends by itself when the job returns.
            if worker.thread().id() != me {
                let _ = worker.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    type Boxed = Box<dyn FnOnce() + Send>;

    impl Job for Boxed {
        fn run(self) {
            self()
        }
    }

    /// Counts its drops whether or not it ran.
    struct Tracked(Arc<AtomicUsize>);

    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn jobs_run_on_the_pool_threads() {
        let pool = Pool::<Boxed>::new(2, 8);
        let (done, results) = mpsc::channel();
        for i in 0..6 {
            let done = done.clone();
            pool.submit(Box::new(move || {
                done.send((i, thread::current().name().map(str::to_owned)))
                    .unwrap();
            }))
            .unwrap_or_else(|_| panic!("room for 8"));
        }
        let mut got: Vec<_> = (0..6).map(|_| results.recv().unwrap()).collect();
        got.sort();
        assert_eq!(got.len(), 6);
        assert!(got
            .iter()
            .all(|(_, name)| name.as_deref() == Some("jit-compile")));
        assert!(pool.workers.lock().unwrap().len() <= 2);
    }

    #[test]
    fn a_full_queue_hands_the_job_back_and_drop_withdraws_the_waiting_ones() {
        let pool = Pool::<Boxed>::new(1, 2);
        let drops = Arc::new(AtomicUsize::new(0));
        let (started, running) = mpsc::channel();
        let (release, hold) = mpsc::channel::<()>();
        // The one thread blocks in its first job until released.
        pool.submit(Box::new(move || {
            started.send(()).unwrap();
            hold.recv().unwrap();
        }))
        .unwrap_or_else(|_| panic!("an empty queue"));
        running.recv().unwrap();
        for _ in 0..2 {
            let tracked = Tracked(Arc::clone(&drops));
            assert!(pool.submit(Box::new(move || drop(tracked))).is_ok());
        }
        assert_eq!(pool.queued(), 2);
        let tracked = Tracked(Arc::clone(&drops));
        let Err(QueueFull(job)) = pool.submit(Box::new(move || drop(tracked))) else {
            panic!("the queue holds 2");
        };
        drop(job);
        assert_eq!(drops.load(Ordering::SeqCst), 1, "handed back, then dropped");
        release.send(()).unwrap();
        drop(pool);
        // The two waiting jobs were either run or withdrawn, never lost.
        assert_eq!(drops.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn tickets_tell_the_jobs_ahead_and_wait_idle_waits_for_the_last_job() {
        let pool = Pool::<Boxed>::new(1, 8);
        assert!(pool.wait_idle(Duration::ZERO), "idle from the start");
        let (started, running) = mpsc::channel();
        let (release, hold) = mpsc::channel::<()>();
        let hold = Arc::new(Mutex::new(hold));
        let mut tickets = Vec::new();
        for _ in 0..3 {
            let (started, hold) = (started.clone(), Arc::clone(&hold));
            let job: Boxed = Box::new(move || {
                started.send(()).unwrap();
                hold.lock().unwrap().recv().unwrap();
            });
            tickets.push(pool.submit(job).unwrap_or_else(|_| panic!("room for 8")));
        }
        assert_eq!(tickets, [0, 1, 2]);
        let ahead = || -> Vec<usize> { tickets.iter().map(|&t| pool.ahead(t)).collect() };
        running.recv().unwrap();
        // The first job runs; the other two wait in ticket order.
        assert_eq!(ahead(), [0, 0, 1]);
        assert!(!pool.wait_idle(Duration::from_millis(1)), "jobs still run");
        release.send(()).unwrap();
        running.recv().unwrap();
        assert_eq!(ahead(), [0, 0, 0]);
        release.send(()).unwrap();
        release.send(()).unwrap();
        assert!(pool.wait_idle(Duration::from_secs(600)));
        assert_eq!(pool.queued(), 0);
    }

    #[test]
    fn an_idle_pool_spawns_nothing_and_drops_at_once() {
        let pool = Pool::<Boxed>::new(4, 4);
        assert_eq!(pool.queued(), 0);
        assert!(pool.workers.lock().unwrap().is_empty());
        drop(pool);
    }
}
