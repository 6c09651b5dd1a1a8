//! Large contractions on several cores beside `local-sync`.
//!
//! `local-sync` runs each call on the calling thread: nothing is cheaper for
//! the small calls a JIT mostly makes, but a large matmul gets one core.
//! `local-task` spreads a dispatch's workgroups over its workers, at the
//! cost of waking them on every call (the README, "Large contractions
//! beside `local-sync`", has the figures). So when the code runs on `local-sync`, modules whose largest
//! contraction reaches [`parallel_contraction`] multiply-adds load on a
//! `local-task` device opened beside it, and everything else stays put.
//! The threshold is the host CPU's ([`parallel_contraction`]: lower on
//! AVX2-only x86-64 cores, which take longer over the same work).
//! The code is the same for both (one target, one disk key); tensors pass
//! between the two as they are (`iree_safe::Device::open_beside`).

use std::num::NonZeroUsize;
use std::sync::OnceLock;

use jit_cache::ErrorChain;

use super::contraction::{self, Work};
use super::{parallel_contraction, Placement};

/// The `local-task` placement beside a `local-sync` primary, opened on the
/// first module that needs it.
#[derive(Debug)]
pub(crate) struct ParallelCpu {
    workers: NonZeroUsize,
    /// `None` when it could not be opened (logged once): the primary runs
    /// everything then.
    placement: OnceLock<Option<Placement>>,
}

impl ParallelCpu {
    /// The parallel placement for `primary` with at most `workers`
    /// workers, or `None` when it would not help: the primary is not
    /// `local-sync`, or there is only one worker.
    pub(crate) fn for_primary(
        primary: &Placement,
        workers: Option<NonZeroUsize>,
    ) -> Option<ParallelCpu> {
        let workers = workers.filter(|workers| workers.get() > 1)?;
        primary.is_local_sync().then(|| ParallelCpu {
            workers,
            placement: OnceLock::new(),
        })
    }

    /// Where `module` runs: beside `primary` when its largest contraction
    /// is known to reach [`parallel_contraction`] multiply-adds (one of a
    /// size told only at run time may be small, and stays), else on
    /// `primary`.
    pub(crate) fn placement_for<'a>(
        &'a self,
        primary: &'a Placement,
        module: &str,
    ) -> &'a Placement {
        let large = matches!(
            contraction::largest(module),
            Work::Known(contraction) if contraction.multiply_adds >= parallel_contraction()
        );
        if !large {
            return primary;
        }
        self.opened(primary).unwrap_or(primary)
    }

    /// The placement, once it was opened.
    pub(crate) fn get(&self) -> Option<&Placement> {
        self.placement.get()?.as_ref()
    }

    fn opened(&self, primary: &Placement) -> Option<&Placement> {
        self.placement
            .get_or_init(|| {
                primary
                    .beside(self.workers)
                    .inspect_err(|error| {
                        let error = ErrorChain(error);
                        tracing::warn!(
                            target: crate::log_targets::RUNTIME,
                            workers = self.workers,
                            %error,
                            "cannot open a `local-task` device beside `local-sync` ({error}); \
                             large contractions run on `local-sync`"
                        );
                    })
                    .ok()
            })
            .as_ref()
    }
}
