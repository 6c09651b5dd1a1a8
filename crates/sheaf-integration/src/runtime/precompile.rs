//! Compiling ahead: many signatures, lowered from example calls, compiled
//! together in one module.

use std::time::Instant;

use jit_cache::{CapturedScalar, Signature};

use crate::compile::function::JitFunction;
use crate::compile::lowering::CallerLowering;
use crate::compile::pipeline;
use crate::error::{JitError, LoweringError, VariantError};
use crate::profile::Phase;
use crate::value::{self, Value};

use super::JitRuntime;

/// One call to compile ahead with [`JitRuntime::precompile`]: a function and
/// example arguments.
#[derive(Clone, Copy)]
pub struct Precompile<'a, M = ()> {
    function: &'a JitFunction<M>,
    args: &'a [Value],
    captured: &'a [CapturedScalar],
    lower: Option<&'a CallerLowering<'a, M>>,
}

impl<M> std::fmt::Debug for Precompile<'_, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Precompile")
            .field("function", self.function)
            .field("args", &self.args)
            .field("captured", &self.captured)
            .field("lowered_by_caller", &self.lower.is_some())
            .finish()
    }
}

impl<'a, M> Precompile<'a, M> {
    /// `function` called with `args` (only their signature, and the values
    /// a value-aware lowering reads, matter).
    pub fn new(function: &'a JitFunction<M>, args: &'a [Value]) -> Self {
        Precompile {
            function,
            args,
            captured: &[],
            lower: None,
        }
    }

    /// Lowered by `lower` instead of the function's own lowering (needed
    /// for a function [lowered per call](JitFunction::lowered_per_call)).
    pub fn lowered_by(self, lower: &'a CallerLowering<'a, M>) -> Self {
        Precompile {
            lower: Some(lower),
            ..self
        }
    }

    /// With these captured scalars baked into the code.
    pub fn captured(self, captured: &'a [CapturedScalar]) -> Self {
        Precompile { captured, ..self }
    }
}

/// What [`JitRuntime::precompile`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PrecompileSummary {
    /// Signatures compiled (in one module per device that runs them).
    pub compiled: usize,
    /// Of those, the ones cached (the others were evicted by later ones of
    /// the batch, beyond their function's capacity, or arrived meanwhile).
    pub cached: usize,
    /// Calls skipped: cached already, or repeated.
    pub skipped: usize,
    /// The batch's lowering, compile (or disk fetch) and load time.
    pub compile_time: std::time::Duration,
}

impl JitRuntime {
    /// Compiles ahead the signatures of `calls` (example arguments of one or
    /// several functions: their dtypes, shapes, structure and static
    /// scalars, and any values a lowering reads), all in one module and one
    /// compiler invocation, and caches each variant: later calls with those
    /// signatures are hits. Use it at start for the shapes Sheaf knows.
    ///
    /// Signatures already cached (or repeated in `calls`) are skipped. The
    /// variants share one loaded module, unloaded when the last of them is
    /// evicted; a function keeps at most its capacity of them. Everything
    /// compiles for the primary device (a large contraction for the device
    /// beside it, see `DeviceSettings::parallel_workers`), with no CPU
    /// fallback; a lowering or compile error fails the whole batch and
    /// caches nothing.
    ///
    /// ```no_run
    /// # use sheaf_integration::{artifacts::Precompile, reference, JitConfig, JitRuntime, Value};
    /// # let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// let sigmoid = reference::sigmoid();
    /// let examples: Vec<[Value; 1]> = (1..=8)
    ///     .map(|b| [Value::host(ndarray::ArrayD::<f32>::zeros(ndarray::IxDyn(&[b, 256])))])
    ///     .collect();
    /// let calls: Vec<_> = examples.iter().map(|x| Precompile::new(&sigmoid, x)).collect();
    /// let summary = jit.precompile(&calls)?;
    /// println!("{} variants in {:.2?}", summary.compiled, summary.compile_time);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Precompile`] when a lowering, the compiler or the runtime
    /// refuses the batch (nothing is cached then), and
    /// [`JitError::Unsupported`] for example arguments the cache key cannot
    /// describe.
    pub fn precompile<M: Send + Sync + 'static>(
        &self,
        calls: &[Precompile<'_, M>],
    ) -> Result<PrecompileSummary, JitError> {
        let inner = &*self.inner;
        let mut wanted: Vec<(&Precompile<'_, M>, Signature)> = Vec::new();
        for call in calls {
            let (signature, _) = value::flatten_call(call.args, call.captured)?;
            let repeated = wanted
                .iter()
                .any(|(c, s)| c.function.id() == call.function.id() && *s == signature);
            if !repeated && !inner.cache.contains(call.function.id(), &signature) {
                wanted.push((call, signature));
            }
        }
        let skipped = calls.len() - wanted.len();
        let start = Instant::now();
        let lowerings = wanted
            .iter()
            .map(|(call, signature)| {
                let function = call.function;
                let entry = function.variant_symbol(signature);
                let own = function.lowering();
                let semantics = inner.semantics_of(function);
                let call_values = (signature, Some(call.args));
                let lowered = match (call.lower, own) {
                    (Some(lower), _) => {
                        pipeline::lower(function, lower, call_values, &entry, semantics)
                    }
                    (None, Some(lower)) => {
                        pipeline::lower(function, lower, call_values, &entry, semantics)
                    }
                    (None, None) => Err(VariantError::Lowering {
                        function: function.name().to_owned(),
                        signature: signature.to_string(),
                        source: LoweringError::new(
                            "the function is lowered per call: give its lowering with \
                             `Precompile::lowered_by`",
                        ),
                    }),
                };
                lowered.map_err(JitError::Precompile)
            })
            .collect::<Result<Vec<_>, _>>()?;
        inner.profile.record(Phase::Lower, start.elapsed());
        let compiled = lowerings.len();
        // The compile's clock starts after the lowerings: each phase is
        // counted once.
        let start = Instant::now();
        let variants = inner
            .per_placement(lowerings, |placement, group| {
                inner.pipeline.batch(&group, placement)
            })
            .map_err(JitError::Precompile)?;
        let compile_time = start.elapsed();
        inner.profile.record(Phase::Compile, compile_time);
        let share = compile_time / u32::try_from(variants.len().max(1)).unwrap_or(u32::MAX);
        if let Some(variant) = variants.first() {
            inner.profile.count_source(variant.source);
        }
        let mut cached = 0;
        for ((call, signature), variant) in wanted.iter().zip(variants) {
            cached += usize::from(inner.cache.insert(
                call.function.id(),
                signature,
                variant,
                share,
            ));
        }
        Ok(PrecompileSummary {
            compiled,
            cached,
            skipped,
            compile_time,
        })
    }
}
