//! The compile pipeline of one variant: lower, key, fetch (artifact
//! bundles, then the disk cache, then the remote cache) or compile, load.
//!
//! The compiler is loaded on the first artifact that must really be
//! compiled, not before: a program served entirely from its disk cache (or
//! an exported bundle) never maps the compiler library. Keys name the
//! compiler by the build string recorded at install time, found without
//! loading it (`iree_safe::compiler::compiler_identity`).

use std::sync::{Arc, OnceLock};

use iree_safe::compiler::{self, CompileError, CompilerChoice, CompilerPreference};
use iree_safe::{Function, TrustedVmfb};
use jit_cache::store::{
    ArtifactKey, ArtifactStore, BuildError, KeyParts, RemoteStats, StoreStats, VerifiedArtifact,
};
use jit_cache::{ErrorChain, Signature};

use crate::bundle::Bundle;
use crate::error::VariantError;
use crate::function::{JitFunction, Metadata};
use crate::lowering::{Lowered, LoweringContext};
use crate::target::Placement;
use crate::value::Value;
use crate::variant::Variant;

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
}

/// Why a compile produced no artifact.
enum Step {
    NoCompiler(Arc<CompileError>),
    Compile(CompileError),
}

/// What the pipeline works on: one signature of one function, compiled for
/// one placement.
pub(crate) struct Job<'a, M> {
    pub(crate) function: &'a JitFunction<M>,
    pub(crate) signature: &'a Signature,
    /// The call's argument values, when there is a call.
    pub(crate) values: Option<&'a [Value]>,
    pub(crate) placement: &'a Placement,
}

impl Pipeline {
    pub(crate) fn new(
        preference: CompilerPreference,
        store: ArtifactStore,
        bundles: Vec<Bundle>,
    ) -> Self {
        Pipeline {
            preference,
            compiler: OnceLock::new(),
            identity: OnceLock::new(),
            store,
            bundles,
        }
    }

    /// The compiler, loading it on first use.
    pub(crate) fn compiler(&self) -> Result<&CompilerChoice, Arc<CompileError>> {
        self.compiler
            .get_or_init(|| {
                let choice =
                    compiler::choose_compiler(self.preference.clone()).map_err(Arc::new)?;
                tracing::info!(
                    target: "sheaf_jit",
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

    /// The compiler, if it has been loaded.
    pub(crate) fn loaded_compiler(&self) -> Option<&CompilerChoice> {
        self.compiler.get()?.as_ref().ok()
    }

    /// The compiler's build, for keys.
    pub(crate) fn identity(&self) -> Option<&str> {
        self.identity
            .get_or_init(|| match compiler::compiler_identity(self.preference.clone()) {
                Ok(identity) => Some(identity),
                Err(error) => {
                    tracing::warn!(
                        target: "sheaf_jit",
                        error = %ErrorChain(&error),
                        "cannot identify the IREE compiler; compiled artifacts are not cached on disk"
                    );
                    None
                }
            })
            .as_deref()
    }

    pub(crate) fn store_stats(&self) -> StoreStats {
        self.store.stats()
    }

    pub(crate) fn remote_stats(&self) -> Option<RemoteStats> {
        self.store.remote_stats()
    }

    /// The artifact of `key` from the disk cache, authenticated (for
    /// export); `None` when the store is disabled or has no good entry.
    pub(crate) fn read_entry(&self, key: &ArtifactKey) -> Option<Vec<u8>> {
        self.store.fetch(key, |artifact| {
            Ok::<_, std::convert::Infallible>(artifact.bytes().to_vec())
        })
    }

    /// Lowers, fetches or compiles, and loads one variant.
    pub(crate) fn variant<M: Send + Sync + 'static>(
        &self,
        job: &Job<'_, M>,
    ) -> Result<Variant, VariantError> {
        let function = job.function;
        let (name, signature) = (function.name(), job.signature.to_string());
        let entry_name = function.entry_symbol();
        let lowered = lower(job, entry_name)?;
        let module = function.entry_module(&lowered.mlir);
        let runtime = &job.placement.runtime;
        let load = |artifact: VerifiedArtifact<'_>| -> Result<Function, iree_safe::Error> {
            runtime.load(trusted(artifact))?.function(entry_name)
        };
        let found = self.bundles.iter().find_map(|bundle| {
            bundle
                .fetch(&self.key(&module, bundle.compiler(), job.placement), load)
                .map(|entry| (entry, None))
        });
        let (entry, key) = match found {
            Some(found) => found,
            None => self.fetch_or_compile(&module, job.placement, load, (name, &signature))?,
        };
        Ok(Variant {
            bytes: entry.module().artifact_bytes(),
            entry,
            metadata: lowered.metadata,
            outputs: lowered.outputs,
            key,
        })
    }

    /// Lowers several signatures, of one function or several, into one
    /// module and compiles it in one compiler invocation (or fetches it from
    /// the disk cache): IREE's fixed cost per compile is paid once. Each
    /// variant's entry is `<entry_symbol>__b<i>`; the variants share the
    /// module, which is unloaded with the last of them. Batched artifacts
    /// are not exported to bundles (their key covers the whole batch).
    pub(crate) fn batch<M: Send + Sync + 'static>(
        &self,
        jobs: &[Job<'_, M>],
    ) -> Result<Vec<Variant>, VariantError> {
        let Some(placement) = jobs.first().map(|job| job.placement) else {
            return Ok(Vec::new());
        };
        let mut functions = String::new();
        let mut entries = Vec::with_capacity(jobs.len());
        let mut lowered = Vec::with_capacity(jobs.len());
        for (i, job) in jobs.iter().enumerate() {
            let entry = format!("{}__b{i}", job.function.entry_symbol());
            let variant = lower(job, &entry)?;
            functions.push_str(&variant.mlir);
            functions.push('\n');
            entries.push(entry);
            lowered.push(variant);
        }
        let module = format!("module @jit_batch {{\n{functions}}}\n");
        let load = |artifact: VerifiedArtifact<'_>| -> Result<Vec<Function>, iree_safe::Error> {
            let module = placement.runtime.load(trusted(artifact))?;
            entries.iter().map(|entry| module.function(entry)).collect()
        };
        let names: Vec<&str> = jobs.iter().map(|job| job.function.name()).collect();
        let what = format!("a batch of {} signatures", jobs.len());
        let (loaded, _key) =
            self.fetch_or_compile(&module, placement, load, (&names.join(", "), &what))?;
        let share = loaded
            .first()
            .map_or(0, |entry| entry.module().artifact_bytes() / loaded.len());
        Ok(loaded
            .into_iter()
            .zip(lowered)
            .map(|(entry, lowered)| Variant {
                entry,
                metadata: lowered.metadata,
                outputs: lowered.outputs,
                key: None,
                bytes: share,
            })
            .collect())
    }

    /// The disk key of `module` compiled by `compiler` for `placement`.
    fn key(&self, module: &str, compiler: &str, placement: &Placement) -> ArtifactKey {
        ArtifactKey::new(&KeyParts {
            program: module,
            compiler,
            runtime: iree_safe::IREE_RUNTIME_BUILD,
            target: &placement.target_identity,
        })
    }

    /// Loads `module` from the disk cache or the remote cache, or compiles,
    /// stores (and publishes) and loads it; `what` names the function(s)
    /// and signature(s) in errors.
    fn fetch_or_compile<V>(
        &self,
        module: &str,
        placement: &Placement,
        load: impl Fn(VerifiedArtifact<'_>) -> Result<V, iree_safe::Error>,
        (function, signature): (&str, &str),
    ) -> Result<(V, Option<ArtifactKey>), VariantError> {
        let key = self
            .identity()
            .map(|compiler| self.key(module, compiler, placement));
        let compile = || -> Result<Vec<u8>, Step> {
            let compiler = self.compiler().map_err(Step::NoCompiler)?;
            let artifact = compiler
                .compiler
                .compile(module, &placement.options)
                .map_err(Step::Compile)?;
            Ok(artifact.into_bytes())
        };
        let (loaded, _) = self
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
        Ok((loaded, key))
    }
}

/// The bytes of an artifact the store vouches for, as the runtime takes
/// them. A [`VerifiedArtifact`] is only made by jit-cache's store: from what
/// the `build` closure of the same call returned (this pipeline's compiler
/// output), or from an entry whose HMAC-SHA256 verified under a folder's
/// secret (this user's disk cache, or a bundle that only this user or root
/// can write) or under the remote cache's shared secret, which the
/// configuration requires and reads only from a file no other user can
/// read or write. Whoever holds one of those secrets is trusted like the
/// compiler (the README's threat model).
fn trusted(artifact: VerifiedArtifact<'_>) -> TrustedVmfb<'_> {
    // SAFETY: the bytes are a `VerifiedArtifact` (see above and its docs in
    // jit-cache `store/verified.rs`): our compiler's output, or an entry
    // authenticated under a secret only trusted parties hold.
    unsafe { TrustedVmfb::new_unchecked(artifact.bytes()) }
}

/// Runs `job`'s lowering with `entry` as the entry symbol.
fn lower<M: Send + Sync + 'static>(
    job: &Job<'_, M>,
    entry: &str,
) -> Result<Lowered<Metadata>, VariantError> {
    let function = job.function;
    let context = LoweringContext::new(function.name(), job.signature, job.values, entry);
    function
        .lower(&context)
        .map_err(|source| VariantError::Lowering {
            function: function.name().to_owned(),
            signature: job.signature.to_string(),
            source,
        })
}
