//! Making variants for the cache: a miss lowered on the calling thread,
//! vetted, then compiled (alone or with others queued beside it) on the
//! device its code suits, or on the CPU fallback when the GPU refuses it;
//! or served by an artifact bundle without lowering.

use std::time::{Duration, Instant};

use jit_cache::{CompileFailure, ErrorChain, Signature};

use crate::compile::function::JitFunction;
use crate::compile::lowering::{Lowered, LoweredVariant, LoweringContext};
use crate::compile::pipeline;
use crate::compile::variant::{ArtifactSource, Variant};
use crate::error::{LoweringError, VariantError};
use crate::placement::{CpuFallback, FloatSemantics, Placement};
use crate::profile::Phase;
use crate::value::Value;

use super::Inner;

impl Inner {
    /// The float semantics `function` compiles with: its own, else the
    /// runtime's.
    pub(super) fn semantics_of<M>(&self, function: &JitFunction<M>) -> FloatSemantics {
        function.float_semantics().unwrap_or(self.float_semantics)
    }

    /// Lowers `signature` of `function` with `lower` on the calling thread
    /// (a refusal is the signature's failure, not a compile).
    pub(super) fn lower<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        lower: impl FnOnce(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
        signature: &Signature,
        values: &[Value],
    ) -> Result<LoweredVariant, CompileFailure> {
        self.lowered(function, lower, signature, values)
            .map_err(CompileFailure::refused)
    }

    /// [`lower`](Self::lower), with the lowering's refusal as it is.
    pub(super) fn lowered<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        lower: impl FnOnce(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
        signature: &Signature,
        values: &[Value],
    ) -> Result<LoweredVariant, VariantError> {
        let start = Instant::now();
        let entry = function.variant_symbol(signature);
        let semantics = self.semantics_of(function);
        let lowered = pipeline::lower(
            function,
            lower,
            (signature, Some(values)),
            &entry,
            semantics,
        );
        self.profile.record(Phase::Lower, start.elapsed());
        lowered
    }

    /// Before `target`, a generalization of the call's `signature` with
    /// dynamic dims, is lowered and compiled: checks that the lowering
    /// takes the call's own signature, since the call's dims helped make
    /// those dims vary. A call it refuses (dims that do not fit together)
    /// is [`CompileFailure::call_refused`]: it counts for nothing, and the
    /// function does not widen.
    pub(super) fn vet<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        lower: impl FnOnce(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
        (target, signature): (&Signature, &Signature),
        values: &[Value],
    ) -> Result<(), CompileFailure> {
        if target == signature {
            return Ok(());
        }
        self.lowered(function, lower, signature, values)
            .map(drop)
            .map_err(CompileFailure::call_refused)
    }

    /// Fetches or compiles and loads `lowering`: for the primary device,
    /// then for the CPU when that fails on a GPU.
    pub(super) fn compile(&self, lowering: &LoweredVariant) -> Result<Variant, CompileFailure> {
        let start = Instant::now();
        let variant = self.compile_on_some_device(lowering);
        self.profile.record(Phase::Compile, start.elapsed());
        if let Ok(variant) = &variant {
            self.profile.count_source(variant.source);
        }
        variant
    }

    /// The placement that runs `module`: the primary, or the device beside
    /// it for a large contraction.
    pub(super) fn placement_for(&self, module: &str) -> &Placement {
        match &self.parallel {
            Some(parallel) => parallel.placement_for(&self.primary, module),
            None => &self.primary,
        }
    }

    /// Runs `run` on the lowerings of each placement and float semantics
    /// (a module loads on one device and compiles with one set of flags)
    /// and returns its results in the order of `lowerings`; the first
    /// error stops it.
    pub(super) fn per_placement<T, E>(
        &self,
        lowerings: Vec<LoweredVariant>,
        mut run: impl FnMut(&Placement, Vec<LoweredVariant>) -> Result<Vec<T>, E>,
    ) -> Result<Vec<T>, E> {
        let mut groups: Vec<(&Placement, Vec<usize>, Vec<LoweredVariant>)> = Vec::new();
        for (index, lowering) in lowerings.into_iter().enumerate() {
            let placement = self.placement_for(&lowering.module);
            let semantics = lowering.semantics;
            let same = |(p, _, group): &&mut (&Placement, _, Vec<LoweredVariant>)| {
                p.device().same_device(placement.device())
                    && group.first().is_some_and(|l| l.semantics == semantics)
            };
            match groups.iter_mut().find(same) {
                Some((_, indices, group)) => {
                    indices.push(index);
                    group.push(lowering);
                }
                None => groups.push((placement, vec![index], vec![lowering])),
            }
        }
        let mut results: Vec<(usize, T)> = Vec::new();
        for (placement, indices, group) in groups {
            results.extend(indices.into_iter().zip(run(placement, group)?));
        }
        results.sort_by_key(|(index, _)| *index);
        Ok(results.into_iter().map(|(_, result)| result).collect())
    }

    /// Compiles `lowerings` as one module per placement (one compiler run
    /// each, counted once); when that fails, each alone, so that each gets
    /// its own result, error and CPU fallback. Results are in the order of
    /// `lowerings`.
    pub(super) fn compile_together(
        &self,
        lowerings: Vec<LoweredVariant>,
    ) -> Vec<Result<Variant, CompileFailure>> {
        let compiled = self.per_placement(lowerings, |placement, group| {
            Ok::<_, std::convert::Infallible>(self.compile_group(group, placement))
        });
        match compiled {
            Ok(results) => results,
            Err(never) => match never {},
        }
    }

    /// Compiles `lowerings` as one module for `placement`; when that fails,
    /// each alone.
    pub(super) fn compile_group(
        &self,
        lowerings: Vec<LoweredVariant>,
        placement: &Placement,
    ) -> Vec<Result<Variant, CompileFailure>> {
        if let [lowering] = &lowerings[..] {
            return vec![self.compile(lowering)];
        }
        let start = Instant::now();
        match self.pipeline.batch(&lowerings, placement) {
            Ok(variants) => {
                self.profile.record(Phase::Compile, start.elapsed());
                if let Some(variant) = variants.first() {
                    self.profile.count_source(variant.source);
                }
                variants.into_iter().map(Ok).collect()
            }
            Err(error) => {
                let error = ErrorChain(&error);
                tracing::debug!(
                    target: crate::log_targets::COMPILE,
                    %error,
                    "a batch of {} queued signatures did not compile together ({error}); \
                     compiling each alone",
                    lowerings.len()
                );
                lowerings
                    .iter()
                    .map(|lowering| self.compile(lowering))
                    .collect()
            }
        }
    }

    pub(super) fn compile_on_some_device(
        &self,
        lowering: &LoweredVariant,
    ) -> Result<Variant, CompileFailure> {
        let placement = self.placement_for(&lowering.module);
        let error = match (self.pipeline.variant(lowering, placement), &self.cpu) {
            (Ok(variant), _) => return Ok(variant),
            (Err(error), None) => return Err(CompileFailure::new(error)),
            (Err(error), Some(_)) => error,
        };
        // A CPU that cannot be opened was logged when that failed.
        let Some(Ok(cpu)) = self.cpu.as_ref().map(CpuFallback::placement) else {
            return Err(CompileFailure::new(error));
        };
        let error = ErrorChain(&error);
        let (function, signature) = (&lowering.function, &lowering.signature);
        tracing::warn!(
            target: crate::log_targets::COMPILE,
            %function,
            %signature,
            %error,
            "{function}{signature}: cannot run on `{}` ({error}); compiling it for the CPU",
            self.primary.runtime.device().uri()
        );
        self.pipeline
            .variant(lowering, cpu)
            .map_err(CompileFailure::new)
    }

    /// The variant an artifact bundle holds for `target` of `function`, or
    /// for a generalization of the call's `signature` (then cached under
    /// that generalization too, and `target` gets an alias of it), loaded
    /// without lowering; `None` when no bundle serves the call.
    pub(super) fn served_by_bundle<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        target: &Signature,
        signature: &Signature,
    ) -> Option<Variant> {
        let served = self.pipeline.bundled(
            function,
            (target, signature),
            (&self.primary, self.semantics_of(function)),
        )?;
        self.profile.count_source(ArtifactSource::Bundle);
        let Some(general) = served.generalization else {
            return Some(served.variant);
        };
        let alias = served.variant.alias();
        self.cache
            .insert(function.id(), &general, served.variant, Duration::ZERO);
        Some(alias)
    }
}
