//! The CPU runtime a signature falls back on when the GPU cannot take it
//! (its compile or its load fails there), opened on first use.

use std::num::NonZeroUsize;
use std::sync::OnceLock;

use iree_safe::compiler::{CompileOptions, CompilerPreference};
use jit_cache::ErrorChain;

use crate::error::JitError;

use super::{DeviceSpec, Placement};

/// The CPU placement of a runtime whose primary device is not a CPU,
/// opened on first use; a failure is logged then, once, and kept.
#[derive(Debug)]
pub(crate) struct CpuFallback {
    device: DeviceSpec,
    workers: Option<NonZeroUsize>,
    options: CompileOptions,
    compiler: CompilerPreference,
    placement: OnceLock<Result<Placement, JitError>>,
}

impl CpuFallback {
    /// The fallback on `device` (at most `workers` workers for
    /// `local-task`) for a primary placement whose code compiles with
    /// `options` by the compiler of `compiler`; `None` when the primary
    /// runs on the CPU already or there is no fallback.
    pub(crate) fn for_primary(
        primary: &Placement,
        device: Option<&DeviceSpec>,
        workers: Option<NonZeroUsize>,
        options: &CompileOptions,
        compiler: &CompilerPreference,
    ) -> Option<CpuFallback> {
        let device = device.filter(|_| !primary.is_cpu())?;
        Some(CpuFallback {
            device: device.clone(),
            workers,
            options: options.clone(),
            compiler: compiler.clone(),
            placement: OnceLock::new(),
        })
    }

    /// The CPU placement, opened now if it was not.
    pub(crate) fn placement(&self) -> Result<&Placement, &JitError> {
        self.placement
            .get_or_init(|| {
                Placement::open(
                    &self.device,
                    self.workers,
                    None,
                    &self.options,
                    &self.compiler,
                )
                .inspect_err(|error| {
                    let error = ErrorChain(error);
                    let driver = self.device.uri();
                    tracing::warn!(
                        target: crate::log_targets::RUNTIME,
                        %driver,
                        %error,
                        "cannot open the CPU fallback `{driver}` ({error}); signatures that fail \
                         on the primary device run in the interpreter",
                    );
                })
            })
            .as_ref()
    }

    /// The CPU placement, if it was opened.
    pub(crate) fn opened(&self) -> Option<&Placement> {
        self.placement.get()?.as_ref().ok()
    }
}
