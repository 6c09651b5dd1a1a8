//! What a runtime finishes when the process exits: the background
//! compiles it queued (so that they reach the disk cache for the next
//! process) and the profile it was asked to print.
//!
//! Rust drops no `static` at exit, and Sheaf keeps its runtime in one, so
//! a runtime's `Drop` alone would never run for it. Every runtime is
//! listed here (weakly: the list keeps none alive), and one hook added
//! with [`iree_safe::at_exit`] finishes each runtime still alive when the
//! process exits. It runs on the exiting thread, before the in-process
//! compiler's statics are destroyed; the runtimes it finished are then
//! left as they are (nothing is freed at exit). SIGTERM and SIGINT run the
//! same hook before they end the process, unless the configuration says
//! not to ([`finish_on_signals`]).

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

/// A runtime's work at exit.
pub(crate) trait Finish: Send + Sync {
    fn finish(&self);
}

/// The runtimes created so far (dead ones are pruned as new ones come).
static RUNTIMES: Mutex<Vec<Weak<dyn Finish>>> = Mutex::new(Vec::new());

/// Whether the hook was added (`Err`: it could not be, logged once).
static HOOKED: OnceLock<Result<(), ()>> = OnceLock::new();

/// Lists `runtime` to be finished at exit.
pub(crate) fn finish_at_exit(runtime: Weak<dyn Finish>) {
    let hooked = HOOKED.get_or_init(|| {
        iree_safe::at_exit(finish_all).map_err(|error| {
            tracing::warn!(
                target: crate::log_targets::RUNTIME,
                %error,
                "{error}: a process that exits with background compiles queued drops them, and \
                 SHEAF_JIT_PROFILE prints only when a runtime is dropped"
            );
        })
    });
    if hooked.is_ok() {
        let mut runtimes = RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner);
        runtimes.retain(|runtime| runtime.strong_count() > 0);
        runtimes.push(runtime);
    }
}

/// Makes SIGTERM and SIGINT run the hook before they end the process
/// (`iree_safe::exit_on_signals`), once; says once if they cannot.
pub(crate) fn finish_on_signals() {
    // Not under miri: iree-safe runs against its mock there, which has no
    // signal handlers (miri cannot install them).
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        static TAKEN: OnceLock<()> = OnceLock::new();
        TAKEN.get_or_init(|| match iree_safe::exit_on_signals() {
            Ok(taken) => tracing::debug!(
                target: crate::log_targets::RUNTIME,
                ?taken,
                "these signals finish the runtimes before they end the process"
            ),
            Err(error) => {
                tracing::warn!(target: crate::log_targets::RUNTIME, %error, "{error}")
            }
        });
    }
}

/// The hook: finishes every runtime still alive, in the order they were
/// made.
fn finish_all() {
    let alive: Vec<Arc<dyn Finish>> =
        std::mem::take(&mut *RUNTIMES.lock().unwrap_or_else(PoisonError::into_inner))
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
    for runtime in alive {
        runtime.finish();
        // Dropping the last handle here would tear the runtime down during
        // exit, under threads that may still use it: it is left alive.
        std::mem::forget(runtime);
    }
}
