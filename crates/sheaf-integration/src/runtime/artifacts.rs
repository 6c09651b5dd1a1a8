//! Artifacts in and out of a runtime: exporting a bundle of the compiled
//! variants, serving a module the application provides.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jit_store::ArtifactKey;

use crate::bundle::{self, BundleError, Export, ExportSummary};
use crate::compile::variant::{ArtifactSource, Variant};
use crate::error::JitError;

use super::JitRuntime;

impl JitRuntime {
    /// Writes every compiled variant in the cache to a bundle in `dir`
    /// (artifacts and a manifest), to serve a later process ahead of time
    /// (`JitConfigBuilder::artifact_bundle`), with or without a compiler.
    /// Artifacts are copied from the disk cache, which must be enabled.
    /// With a signing key
    /// ([`TrustSettings::signing_key`](crate::settings::TrustSettings::signing_key))
    /// the bundle is signed by it, for readers that trust its public key
    /// ([`ExportSummary::signer`]); without one, its entries are tagged with
    /// a secret of its own.
    ///
    /// # Errors
    ///
    /// [`JitError::Export`] when the compiler cannot be identified (its
    /// artifacts have no keys), `dir` is not safe to write or cannot be
    /// created, or the manifest cannot be written.
    pub fn export_artifacts(&self, dir: impl AsRef<Path>) -> Result<ExportSummary, JitError> {
        let dir = dir.as_ref();
        let failed = |source| JitError::Export {
            path: dir.to_path_buf(),
            source,
        };
        let compiler = self
            .inner
            .pipeline
            .identity()
            .ok_or_else(|| failed(BundleError::UnidentifiedCompiler))?;
        let entries = self.inner.cache.entries();
        let mut artifacts: HashMap<ArtifactKey, Option<Arc<Vec<u8>>>> = HashMap::new();
        let mut skipped = 0;
        let mut exports = Vec::new();
        for (function, signature, variant) in &entries {
            let artifact = variant.key.and_then(|key| {
                let artifact = artifacts
                    .entry(key)
                    .or_insert_with(|| self.inner.pipeline.read_entry(&key).map(Arc::new));
                Some((key, Arc::clone(artifact.as_ref()?)))
            });
            match artifact {
                Some((key, artifact)) => exports.push(Export {
                    function,
                    signature,
                    entry: variant.entry.name(),
                    key,
                    outputs: variant.outputs.as_ref(),
                    metadata: variant.metadata_bytes.as_deref(),
                    target: &variant.target,
                    artifact,
                }),
                None => skipped += 1,
            }
        }
        let signer = self
            .inner
            .signatures
            .as_ref()
            .and_then(|s| s.signer.as_ref());
        bundle::write(dir, compiler, exports, skipped, signer).map_err(failed)
    }

    /// Serves calls with a module compiled outside this runtime (by the
    /// application's own `iree-compile`, ahead of time, with flags of its
    /// choosing): each of `functions` names a function the module exports,
    /// the [`JitFunction`](crate::JitFunction) and signature it serves, and its result
    /// structure and metadata. Each is cached like a variant the runtime
    /// compiled: a call of that function with that signature (or, for a
    /// signature with dynamic dims, any signature it covers) hits it,
    /// without lowering or compiling ([`ArtifactSource::Provided`]); it
    /// counts against the function's capacity and the budgets (the cache's
    /// statistics count it as a compile of no time, as a `precompile`d
    /// one; the profile, as provided), and may be evicted like any variant
    /// (a later call then lowers and compiles as usual). It is not written
    /// to the disk cache nor exported to bundles.
    ///
    /// `vmfb` is native code this process will run, so it must be a
    /// [`TrustedVmfb`](crate::artifacts::TrustedVmfb): the compiler's output
    /// ([`Artifact::vmfb`](crate::compiler::Artifact::vmfb)), or bytes vouched for
    /// with the `unsafe` `TrustedVmfb::new_unchecked` or
    /// [`Artifact::from_trusted_bytes`](crate::compiler::Artifact::from_trusted_bytes)
    /// (code the application built and ships as part of itself); safe code
    /// cannot load arbitrary bytes. `target` is what it was compiled for, which must
    /// be what this runtime's device runs ([`compile_options`](Self::compile_options)'s
    /// target). Each function's declaration (IREE's
    /// `iree.abi.declaration`) must take the signature's tensors and
    /// return as many results as `outputs` has leaves, as for a bundle's
    /// entries; all are checked before any is cached.
    ///
    /// ```no_run
    /// use sheaf_integration::artifacts::ProvidedFunction;
    /// use sheaf_integration::compiler::{Artifact, CompileTarget};
    /// use sheaf_integration::lowering::Signature;
    /// use sheaf_integration::{reference, DType, JitConfig, JitRuntime};
    ///
    /// let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// let bytes = std::fs::read("/opt/app/sigmoid.vmfb")?;
    /// // SAFETY: the application built this module with its own compiler
    /// // and installs it with its code; nobody else can write it.
    /// let artifact = unsafe { Artifact::from_trusted_bytes(bytes) };
    /// let sigmoid = reference::sigmoid();
    /// let signature = Signature::builder().arg(DType::F32, &[1, 5]).build();
    /// jit.provide_artifact(
    ///     artifact.vmfb(),
    ///     &CompileTarget::host_cpu(),
    ///     vec![ProvidedFunction::new(&sigmoid, "sigmoid", signature)],
    /// )?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Provide`]: the target is not this device's
    /// ([`ProvideError::Target`](crate::artifacts::ProvideError::Target)), the runtime
    /// refuses the module ([`Load`](crate::artifacts::ProvideError::Load)), an entry is
    /// not exported ([`NoEntry`](crate::artifacts::ProvideError::NoEntry)) or does not
    /// declare what it is said to serve
    /// ([`Declaration`](crate::artifacts::ProvideError::Declaration)); nothing is
    /// cached then.
    pub fn provide_artifact<M: Send + Sync + 'static>(
        &self,
        vmfb: crate::artifacts::TrustedVmfb<'_>,
        target: &iree_safe::compiler::CompileTarget,
        functions: Vec<crate::artifacts::ProvidedFunction<'_, M>>,
    ) -> Result<crate::artifacts::ProvidedSummary, JitError> {
        use crate::error::ProvideError;
        let refused = |error: ProvideError| JitError::Provide(Box::new(error));
        let inner = &*self.inner;
        let code = inner.primary.code(inner.float_semantics);
        if *target != code.options.target {
            return Err(refused(ProvideError::Target {
                artifact: target.clone(),
                runtime: code.options.target.clone(),
                device: inner.primary.device().uri().to_owned(),
            }));
        }
        let module = inner
            .primary
            .runtime
            .load(vmfb)
            .map_err(|error| refused(ProvideError::Load(error)))?;
        let share = module.artifact_bytes() / functions.len().max(1);
        let mut variants = Vec::with_capacity(functions.len());
        for provided in functions {
            let entry = module.function(&provided.entry).map_err(|_| {
                refused(ProvideError::NoEntry {
                    entry: provided.entry.clone(),
                    exports: module.function_names(),
                })
            })?;
            let outputs = provided.outputs.as_ref();
            if let Some(why) = crate::declaration::mismatch(&entry, &provided.signature, outputs) {
                return Err(refused(ProvideError::Declaration {
                    entry: provided.entry,
                    function: provided.function.name().to_owned(),
                    signature: provided.signature.to_string(),
                    why,
                }));
            }
            let metadata = Arc::new(provided.metadata) as crate::compile::lowering::Metadata;
            let variant = Variant {
                bytes: share,
                entry,
                metadata_bytes: provided.function.encode_metadata(&metadata).map(Arc::from),
                metadata,
                outputs: provided.outputs,
                key: None,
                source: ArtifactSource::Provided,
                target: Arc::from(code.target_identity.as_str()),
                device: Arc::from(inner.primary.device().uri()),
            };
            variants.push((provided.function, provided.signature, variant));
        }
        let provided = variants.len();
        let mut cached = 0;
        for (function, signature, variant) in variants {
            inner.profile.count_source(ArtifactSource::Provided);
            cached += usize::from(inner.cache.insert(
                function.id(),
                &signature,
                variant,
                Duration::ZERO,
            ));
        }
        Ok(crate::artifacts::ProvidedSummary { provided, cached })
    }

    /// Renamed [`provide_artifact`](Self::provide_artifact) in 0.3
    /// ("import" is host memory handed to a device without a copy).
    ///
    /// # Errors
    ///
    /// As [`provide_artifact`](Self::provide_artifact).
    #[deprecated(since = "0.3.0", note = "renamed `provide_artifact`")]
    pub fn import_artifact<M: Send + Sync + 'static>(
        &self,
        vmfb: crate::artifacts::TrustedVmfb<'_>,
        target: &iree_safe::compiler::CompileTarget,
        functions: Vec<crate::artifacts::ProvidedFunction<'_, M>>,
    ) -> Result<crate::artifacts::ProvidedSummary, JitError> {
        self.provide_artifact(vmfb, target, functions)
    }
}
