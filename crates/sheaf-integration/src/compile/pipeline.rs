//! The compile pipeline of one variant: lower (on the calling thread, with
//! the caller's state), then key, fetch (artifact bundles, then the disk
//! cache, then the remote cache) or compile, and load (on whichever thread
//! compiles: only the owned `LoweredVariant` crosses to it).
//!
//! The compiler is loaded on the first artifact that must really be
//! compiled, not before: a program served entirely from its disk cache (or
//! an exported bundle) never maps the compiler library. Keys name the
//! compiler by the build string recorded at install time, found without
//! loading it (`iree_safe::compiler::compiler_identity`).

use std::cell::RefCell;
use std::sync::{Arc, OnceLock};

use iree_safe::compiler::{
    self, CompileError, CompilerChoice, CompilerPreference, CompilerVersion,
};
use iree_safe::{Function, TrustedVmfb};
use jit_cache::{ErrorChain, Signature};
#[cfg(feature = "remote-cache")]
use jit_store::RemoteStats;
use jit_store::{
    ArtifactKey, ArtifactStore, BuildError, CallTotals, Fetched, KeyParts, RunTotals, StoreStats,
    TierTotals, VerifiedArtifact,
};

use crate::bundle::Bundle;
use crate::compile::function::JitFunction;
use crate::compile::lowering::{Lowered, LoweredVariant, LoweringContext, Metadata};
use crate::compile::variant::{ArtifactSource, Variant};
use crate::declaration;
use crate::dump::{self, Dumps};
use crate::error::{LoweringError, VariantError};
use crate::placement::FloatSemantics;
use crate::placement::Placement;
use crate::value::Value;

/// Lowering, caching on disk, compiling and loading, for every variant of
/// every function of one runtime.
#[derive(Debug)]
pub(crate) struct Pipeline {
    preference: CompilerPreference,
    /// Loaded on first use; a failure is kept (and reported by every
    /// compile that needs the compiler).
    compiler: OnceLock<Result<CompilerChoice, Arc<CompileError>>>,
    /// The compiler's build, for keys; `None` when it cannot be told, which
    /// bypasses the disk cache.
    identity: OnceLock<Option<String>>,
    store: ArtifactStore,
    bundles: Vec<Bundle>,
    /// Where each compile is dumped (`SHEAF_JIT_DUMP_DIR`), if anywhere.
    dumps: Option<Dumps>,
}

/// Why a compile produced no artifact.
enum Step {
    NoCompiler(Arc<CompileError>),
    Compile(CompileError),
}

/// A variant a bundle served, and the generalization of the call's
/// signature it was compiled for, when it is not the one asked for.
pub(crate) struct Bundled {
    pub(crate) variant: Variant,
    pub(crate) generalization: Option<Signature>,
}

/// Runs `lower` for `signature` of `function`, with `entry` as the entry
/// symbol, on the calling thread; the variant compiles with `semantics`.
pub(crate) fn lower<M: Send + Sync + 'static>(
    function: &JitFunction<M>,
    lower: impl FnOnce(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
    (signature, values): (&Signature, Option<&[Value]>),
    entry: &str,
    semantics: FloatSemantics,
) -> Result<LoweredVariant, VariantError> {
    let context = LoweringContext::new(function.name(), signature, values, entry);
    let refused = |source| VariantError::Lowering {
        function: function.name().to_owned(),
        signature: signature.to_string(),
        source,
    };
    let Lowered {
        mlir,
        outputs,
        metadata,
        entry: own_entry,
    } = lower(&context).map_err(refused)?;
    let mlir = crate::compile::entry_symbol::named(mlir, own_entry.as_deref(), entry)
        .map_err(|error| refused(error.into()))?;
    let metadata = Arc::new(metadata) as Metadata;
    Ok(LoweredVariant {
        function: function.name().to_owned(),
        signature: signature.to_string(),
        entry: entry.to_owned(),
        module: function.entry_module(&mlir),
        functions: mlir,
        outputs,
        metadata_bytes: function.encode_metadata(&metadata).map(Arc::from),
        metadata,
        semantics,
        bundles_missed_for: None,
    })
}

impl Pipeline {
    pub(crate) fn new(
        preference: CompilerPreference,
        (store, bundles): (ArtifactStore, Vec<Bundle>),
        dumps: Option<Dumps>,
    ) -> Self {
        Pipeline {
            preference,
            compiler: OnceLock::new(),
            identity: OnceLock::new(),
            store,
            bundles,
            dumps,
        }
    }

    /// The compiler, loading it on first use.
    pub(crate) fn compiler(&self) -> Result<&CompilerChoice, Arc<CompileError>> {
        self.compiler
            .get_or_init(|| {
                let choice =
                    compiler::choose_compiler(self.preference.clone()).map_err(Arc::new)?;
                tracing::info!(
                    target: crate::log_targets::COMPILE,
                    compiler = %choice.kind,
                    reason = %choice.reason,
                    "loaded the {} IREE compiler ({})",
                    choice.kind,
                    choice.reason
                );
                Ok(choice)
            })
            .as_ref()
            .map_err(Arc::clone)
    }

    /// Fails when the compiler this pipeline would use is of another IREE
    /// release than the linked runtime: asked when the runtime opens, from
    /// the compiler's identity (its `--version`, run once per executable and
    /// kept in the disk cache), so that no artifact of it is ever compiled
    /// or loaded. No compiler, or one that does not say its release, is no
    /// refusal: a compile then says what is wrong.
    pub(crate) fn refuse_another_release(&self) -> Result<(), CompileError> {
        match compiler::compiler_identity(self.preference.clone()) {
            Ok(identity) => compiler::check_release(&CompilerVersion::new(&identity, None)),
            Err(_) => Ok(()),
        }
    }

    /// The compiler, if it has been loaded.
    pub(crate) fn loaded_compiler(&self) -> Option<&CompilerChoice> {
        self.compiler.get()?.as_ref().ok()
    }

    /// The compiler's build, for keys: the installed compiler's (recorded
    /// in the disk cache for later), else, with no compiler to ask, the one
    /// the disk cache recorded, else the first bundle's (so their artifacts
    /// still serve, and export again).
    pub(crate) fn identity(&self) -> Option<&str> {
        self.identity
            .get_or_init(|| match compiler::compiler_identity(self.preference.clone()) {
                Ok(identity) => {
                    self.store.record_builder(&identity);
                    Some(identity)
                }
                Err(error) => {
                    let recorded = self.store.recorded_builder().or_else(|| {
                        Some(self.bundles.first()?.compiler().to_owned())
                    });
                    let error = ErrorChain(&error);
                    match &recorded {
                        Some(identity) => tracing::info!(
                            target: crate::log_targets::COMPILE,
                            %error,
                            compiler = %identity,
                            "cannot identify the IREE compiler ({error}); serving the artifacts \
                             of `{identity}` that the disk cache or a bundle holds"
                        ),
                        None => tracing::warn!(
                            target: crate::log_targets::COMPILE,
                            %error,
                            "cannot identify the IREE compiler ({error}); compiled artifacts \
                             are not cached on disk"
                        ),
                    }
                    recorded
                }
            })
            .as_deref()
    }

    /// Whether compiled artifacts are kept past this process: in a disk
    /// cache or a remote one.
    pub(crate) fn keeps_artifacts(&self) -> bool {
        #[cfg(feature = "remote-cache")]
        if self.store.remote_stats().is_some() {
            return true;
        }
        self.store.directory().is_some()
    }

    /// The disk cache (disabled when there is none).
    pub(crate) fn store(&self) -> &ArtifactStore {
        &self.store
    }

    /// Adds a runtime's totals as it ends (its cache's `counters`, and
    /// this pipeline's disk and remote lookups) to those the disk cache
    /// keeps over every process that used it (`sheaf-jit-cache stats`);
    /// logged when they cannot be added, never an error.
    pub(crate) fn add_run_totals(&self, counters: &jit_cache::Counters) {
        let mut totals = RunTotals::default();
        totals.runs = 1;
        totals.calls = CallTotals::of(counters);
        totals.disk = TierTotals::of_disk(&self.store.stats());
        #[cfg(feature = "remote-cache")]
        if let Some(remote) = self.store.remote_stats() {
            totals.remote = TierTotals::of_remote(&remote);
        }
        if let Err(error) = self.store.add_run_totals(&totals) {
            tracing::debug!(
                target: jit_store::log_targets::CACHE,
                %error,
                "this process's statistics were not added to the disk cache's"
            );
        }
    }

    pub(crate) fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    #[cfg(feature = "remote-cache")]
    pub(crate) fn remote_stats(&self) -> Option<RemoteStats> {
        self.store.remote_stats()
    }

    /// The artifact of `key` from the disk cache or a bundle,
    /// authenticated (for export); `None` when neither has a good entry.
    pub(crate) fn read_entry(&self, key: &ArtifactKey) -> Option<Vec<u8>> {
        let bytes = |artifact: VerifiedArtifact<'_>| artifact.bytes().to_vec();
        self.store
            .fetch(key, |artifact| {
                Ok::<_, std::convert::Infallible>(bytes(artifact))
            })
            .or_else(|| {
                self.bundles
                    .iter()
                    .find_map(|bundle| bundle.fetch(key, |artifact| Ok(bytes(artifact))))
            })
    }

    /// `lowering` for `placement` from a bundle (by key) or the disk cache,
    /// loaded, without compiling or touching the network: what a
    /// background miss does on the calling thread (a disk hit costs well
    /// under a millisecond) before it queues a compile. `None` when neither
    /// has it; the lowering then records that the bundles were asked for
    /// this placement, so that [`variant`](Self::variant) does not ask them
    /// again on the compile thread (bundles do not change while a runtime
    /// serves them; the disk cache may, and is asked again).
    pub(crate) fn local(
        &self,
        lowering: &mut LoweredVariant,
        placement: &Placement,
    ) -> Option<Variant> {
        let target = &placement.code(lowering.semantics).target_identity;
        if let Some((entry, key)) = self.in_bundles(lowering, placement) {
            return Some(Variant::new(
                entry,
                lowering,
                Some(key),
                (ArtifactSource::Bundle, placement),
            ));
        }
        lowering.bundles_missed_for = Some(Arc::from(target.as_str()));
        let key = self.key(&lowering.module, self.identity()?, target);
        let entry = self.store.fetch(&key, |artifact| {
            load_entry(placement, artifact, &lowering.entry)
        })?;
        Some(Variant::new(
            entry,
            lowering,
            Some(key),
            (ArtifactSource::DiskCache, placement),
        ))
    }

    /// `lowering` for `placement` from the first bundle that has its key,
    /// loaded, and the key; `None` when none has (or when the bundles
    /// already missed it for this placement: see [`local`](Self::local)).
    fn in_bundles(
        &self,
        lowering: &LoweredVariant,
        placement: &Placement,
    ) -> Option<(Function, ArtifactKey)> {
        let target = &placement.code(lowering.semantics).target_identity;
        if lowering.bundles_missed_for.as_deref() == Some(target.as_str()) {
            return None;
        }
        self.bundles.iter().find_map(|bundle| {
            let key = self.key(&lowering.module, bundle.compiler(), target);
            let entry = bundle.fetch(&key, |artifact| {
                load_entry(placement, artifact, &lowering.entry)
            })?;
            Some((entry, key))
        })
    }

    /// Fetches (from a bundle, the disk cache or the remote cache) or
    /// compiles `lowering` for `placement`, and loads it.
    pub(crate) fn variant(
        &self,
        lowering: &LoweredVariant,
        placement: &Placement,
    ) -> Result<Variant, VariantError> {
        let (entry, source, key) = match self.in_bundles(lowering, placement) {
            Some((entry, key)) => (entry, ArtifactSource::Bundle, Some(key)),
            None => self.fetch_or_compile(
                &lowering.module,
                (placement, lowering.semantics),
                |artifact| load_entry(placement, artifact, &lowering.entry),
                (&lowering.function, &lowering.signature),
            )?,
        };
        Ok(Variant::new(entry, lowering, key, (source, placement)))
    }

    /// The variant an artifact bundle lists for `function` compiled for
    /// `target` (or a generalization of the call's `signature`) on
    /// `placement` with `semantics`, loaded without lowering; `None` when
    /// no bundle has one whose metadata can be had without the lowering.
    pub(crate) fn bundled<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        (target, signature): (&Signature, &Signature),
        (placement, semantics): (&Placement, FloatSemantics),
    ) -> Option<Bundled> {
        let id = (function.name(), function.id().definition_hash());
        let identity = &placement.code(semantics).target_identity;
        self.bundles.iter().find_map(|bundle| {
            let (found, generalization) = bundle.find(id, (target, signature), identity)?;
            let metadata = function.metadata_from(found.metadata.as_deref())?;
            let entry = bundle.fetch(&found.key, |artifact| {
                load_entry(placement, artifact, &found.entry)
            })?;
            if let Some(why) =
                declaration::mismatch(&entry, &found.signature, found.outputs.as_ref())
            {
                tracing::warn!(
                    target: crate::log_targets::RUNTIME,
                    bundle = %bundle.dir().display(),
                    function = function.name(),
                    signature = %found.signature,
                    "the bundle {} lists `{}{}` for an artifact that cannot serve it ({why}): \
                     not served from the bundle; export the bundle again",
                    bundle.dir().display(),
                    function.name(),
                    found.signature
                );
                return None;
            }
            let variant = Variant {
                bytes: entry.module().artifact_bytes(),
                entry,
                metadata,
                outputs: found.outputs.clone(),
                key: Some(found.key),
                source: ArtifactSource::Bundle,
                metadata_bytes: found.metadata.as_deref().map(Arc::from),
                target: Arc::from(identity.as_str()),
                device: Arc::from(placement.device().uri()),
            };
            Some(Bundled {
                variant,
                generalization,
            })
        })
    }

    /// Compiles several lowered signatures, of one function or several, as
    /// one module in one compiler invocation (or fetches it from the disk
    /// cache): IREE's fixed cost per compile is paid once. Each lowering's
    /// entry is unique in the batch (each signature has its own
    /// [`variant_symbol`](JitFunction::variant_symbol)); the variants share
    /// the module, which is unloaded with the last of them, and the
    /// artifact's key (exported to bundles as one entry that serves them
    /// all). A batch just compiled is also stored under each member's own
    /// key, on disk and in the remote cache: the module holds each
    /// member's function as its own compile would, so a later process that
    /// misses one signature alone loads it from either rather than
    /// compiling it (loading the whole batch's module for it).
    pub(crate) fn batch(
        &self,
        lowerings: &[LoweredVariant],
        placement: &Placement,
    ) -> Result<Vec<Variant>, VariantError> {
        let Some(semantics) = lowerings.first().map(|lowering| lowering.semantics) else {
            return Ok(Vec::new());
        };
        // The callers group lowerings by placement and float semantics
        // (`Inner::per_placement`): one set of flags per module.
        debug_assert!(lowerings.iter().all(|l| l.semantics == semantics));
        let mut functions = String::new();
        for lowering in lowerings {
            functions.push_str(&lowering.functions);
            functions.push('\n');
        }
        let module = format!("module @jit_batch {{\n{functions}}}\n");
        // The artifact, kept to store under each member's key.
        let artifact_bytes = RefCell::new(None);
        let load = |artifact: VerifiedArtifact<'_>| -> Result<Vec<Function>, iree_safe::Error> {
            if self.keeps_artifacts() && lowerings.len() > 1 {
                artifact_bytes.replace(Some(artifact.bytes().to_vec()));
            }
            load_entries(
                placement,
                artifact,
                lowerings.iter().map(|lowering| lowering.entry.as_str()),
            )
        };
        let names: Vec<&str> = lowerings.iter().map(|l| l.function.as_str()).collect();
        let what = format!("a batch of {} signatures", lowerings.len());
        let (loaded, source, key) = self.fetch_or_compile(
            &module,
            (placement, semantics),
            load,
            (&names.join(", "), &what),
        )?;
        if let (ArtifactSource::Compiler, Some(bytes), Some(compiler)) =
            (source, artifact_bytes.take(), self.identity())
        {
            let target = &placement.code(semantics).target_identity;
            for lowering in lowerings {
                let member = self.key(&lowering.module, compiler, target);
                self.store.insert(&member, &bytes);
                self.store.publish(&member, &bytes);
            }
        }
        let share = loaded
            .first()
            .map_or(0, |entry| entry.module().artifact_bytes() / loaded.len());
        Ok(loaded
            .into_iter()
            .zip(lowerings)
            .map(|(entry, lowering)| Variant {
                bytes: share,
                ..Variant::new(entry, lowering, key, (source, placement))
            })
            .collect())
    }

    /// The disk key of `module` compiled by `compiler` for `target` (a
    /// target identity: the flags, float semantics included).
    fn key(&self, module: &str, compiler: &str, target: &str) -> ArtifactKey {
        ArtifactKey::new(&KeyParts {
            program: module,
            compiler,
            runtime: iree_safe::IREE_RUNTIME_BUILD,
            target,
        })
    }

    /// Loads `module` from the disk cache or the remote cache, or compiles
    /// it for `placement` with `semantics`, stores (and publishes) and
    /// loads it; `what` names the function(s) and signature(s) in errors.
    fn fetch_or_compile<V>(
        &self,
        module: &str,
        (placement, semantics): (&Placement, FloatSemantics),
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, iree_safe::Error>,
        (function, signature): (&str, &str),
    ) -> Result<(V, ArtifactSource, Option<ArtifactKey>), VariantError> {
        let target = &placement.code(semantics).target_identity;
        let key = self
            .identity()
            .map(|compiler| self.key(module, compiler, target));
        let compile = || -> Result<Vec<u8>, Step> {
            let compiler = self.compiler().map_err(Step::NoCompiler)?;
            let options = placement.options_for(module, semantics);
            let result = compiler.compiler.compile(module, &options);
            // The time is jit-cache's to log (`log_targets::RECOMPILES`):
            // one clock per compile.
            tracing::debug!(
                target: crate::log_targets::COMPILE,
                phase = "compile",
                compiler = %compiler.kind,
                ok = result.is_ok(),
                "compiled {function}{signature}"
            );
            if let Some(dumps) = &self.dumps {
                // What the compilers pass (both call `checked_flags`).
                let flags = options.checked_flags().unwrap_or_else(|_| options.flags());
                let compile = dump::Compile {
                    function,
                    signature,
                    mlir: module,
                    flags: &flags,
                    target,
                    tuning_spec: options.tuning_spec(),
                };
                dumps.record(&compile, &result, key.as_ref());
            }
            Ok(result.map_err(Step::Compile)?.into_bytes())
        };
        // Only misses of the in-memory cache come here: the hit path has no
        // span. Disabled, a span costs a check of the callsite's interest.
        let span = tracing::debug_span!(
            target: crate::log_targets::COMPILE,
            "compile",
            function,
            signature,
            key = key.as_ref().map(ArtifactKey::hex),
            source = tracing::field::Empty,
        );
        let _entered = span.enter();
        let (loaded, fetched) = self
            .store
            .fetch_or_build(key.as_ref(), load, compile)
            .map_err(|error| match error {
                BuildError::Build(Step::NoCompiler(source)) => VariantError::NoCompiler {
                    function: function.to_owned(),
                    signature: signature.to_owned(),
                    source,
                },
                BuildError::Build(Step::Compile(source)) => VariantError::Compile {
                    function: function.to_owned(),
                    source: source.with_source_name(&format!("{function}{signature}")),
                    signature: signature.to_owned(),
                },
                BuildError::Rejected(source) => VariantError::Load {
                    function: function.to_owned(),
                    signature: signature.to_owned(),
                    source,
                },
            })?;
        let source = match fetched {
            Fetched::Disk => ArtifactSource::DiskCache,
            Fetched::Remote => ArtifactSource::RemoteCache,
            Fetched::Built => ArtifactSource::Compiler,
        };
        span.record("source", tracing::field::debug(source));
        Ok((loaded, source, key))
    }
}

/// Loads `artifact` on `placement`'s runtime and looks up its function
/// `entry`: what every tier's hit and every compile of one variant ends in.
fn load_entry(
    placement: &Placement,
    artifact: VerifiedArtifact<'_>,
    entry: &str,
) -> Result<Function, iree_safe::Error> {
    placement.runtime.load(trusted(artifact))?.function(entry)
}

/// [`load_entry`] for several entries of one module (a batch's).
fn load_entries<'e>(
    placement: &Placement,
    artifact: VerifiedArtifact<'_>,
    entries: impl IntoIterator<Item = &'e str>,
) -> Result<Vec<Function>, iree_safe::Error> {
    let module = placement.runtime.load(trusted(artifact))?;
    entries
        .into_iter()
        .map(|entry| module.function(entry))
        .collect()
}

/// The bytes of an artifact the store vouches for, as the runtime takes
/// them. A [`VerifiedArtifact`] is only made by jit-store: from what
/// the `build` closure of the same call returned (this pipeline's compiler
/// output), or from an entry whose HMAC-SHA256 verified under a folder's
/// secret (this user's disk cache, or a bundle that only this user or root
/// can write) or under the remote cache's shared secret, which the
/// configuration requires and reads only from a file no other user can
/// read or write. Whoever holds one of those secrets is trusted like the
/// compiler (the README's threat model).
fn trusted(artifact: VerifiedArtifact<'_>) -> TrustedVmfb<'_> {
    // SAFETY: the bytes are a `VerifiedArtifact` (see above and its docs in
    // jit-store `src/verified.rs`): our compiler's output, or an entry
    // authenticated under a secret only trusted parties hold.
    unsafe { TrustedVmfb::new_unchecked(artifact.bytes()) }
}
