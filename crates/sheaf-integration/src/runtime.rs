//! The JIT runtime: the shared IREE runtime (and a CPU one to fall back
//! on), the compile pipeline, the upload cache and the bounded cache policy,
//! for the whole process.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use iree_safe::compiler::CompilerChoice;
use iree_safe::MemoryStatistics;
use jit_cache::store::{
    ArtifactKey, ArtifactStore, RedisStore, RemoteStats, RemoteTier, Secret, StoreStats,
};
use jit_cache::{
    CacheStats, CapturedScalar, CompileFailure, Dispatch, ErrorChain, FallbackReason, JitCache,
    Prepared, Provenance, Signature,
};
use smallvec::SmallVec;

use crate::batch_queue::BatchQueue;
use crate::bundle::{self, Bundle, BundleError, Export, ExportSummary};
use crate::config::{CompileMode, JitConfig, RemoteSecret, UploadSettings};
use crate::dispatch::{CallError, CallResult, Compiled, Dispatched};
use crate::error::{ConfigError, JitError, LoweringError, VariantError};
use crate::exit;
use crate::function::JitFunction;
use crate::learned_policy::DiskPolicy;
use crate::lowering::LoweredVariant;
use crate::lowering::{Lowered, LoweringContext};
use crate::pipeline::{self, Pipeline};
use crate::placement::{CpuFallback, FloatSemantics, ParallelCpu, Placement};
use crate::profile::{Phase, Profile, ProfileReport};
use crate::tensor::{scalar_to_device, DeviceTensor, HostTensor, Tensor};
use crate::upload::{UploadCache, UploadStats};
use crate::value::{self, FlatArg, Value};
use crate::variant::{ArtifactSource, Variant};

/// The JIT runtime Sheaf calls. Create one per process and clone it (clones
/// share everything); Send + Sync.
///
/// [`dispatch`](Self::dispatch) is the primitive: it runs compiled code, or
/// says why the caller must run its own interpreter. [`call`](Self::call)
/// wraps it with an interpreter closure.
///
/// ```no_run
/// use ndarray::ArrayD;
/// use sheaf_integration::{reference, JitConfig, JitRuntime, Value};
///
/// let jit = JitRuntime::new(JitConfig::from_env()?)?;
/// let sigmoid = reference::sigmoid();
/// let x = Value::host(ArrayD::<f32>::zeros(ndarray::IxDyn(&[1, 5])));
/// let result = jit.call(&sigmoid, &[x], &[], |args, _captured, _why| reference::interpret_sigmoid(args))?;
/// println!("{:?} via {:?}", result.outputs[0].to_host()?, result.provenance);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Exit
///
/// A runtime may live until the process ends (in a `static`, as Sheaf
/// keeps it). When the process exits (`main` returns, or `exit`), each
/// runtime still alive finishes on the exiting thread, before the process
/// ends: with a disk or remote cache, it waits up to
/// [`CompileSettings::exit_wait`](crate::CompileSettings::exit_wait)
/// (10 s by default, `SHEAF_JIT_EXIT_WAIT`) for the background compiles
/// queued or running, which then reach the cache, so the next process runs
/// them compiled from its first call; then it prints its profile when
/// asked to (`SHEAF_JIT_PROFILE`). Dropping a runtime's last handle
/// instead withdraws its queued compiles (call
/// [`wait_for_compiles`](Self::wait_for_compiles) first to keep them) and
/// prints the profile then. The default compiler runs in a child process,
/// so a process that exits while it compiles ends with its own status;
/// the in-process compiler (`CompilerPreference::InProcess`) can crash a
/// process that exits during its first compiles (see
/// `iree_safe::compiler::InProcessCompiler`).
#[derive(Debug, Clone)]
pub struct JitRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // Drop order: cached variants before the runtimes they were loaded into
    // (they keep them alive anyway).
    cache: JitCache<Variant>,
    compile_mode: CompileMode,
    /// The float semantics of functions that do not choose their own.
    float_semantics: FloatSemantics,
    /// Shared with the cache's policy memory (the disk cache's policy
    /// files), when there is a disk cache.
    pipeline: Arc<Pipeline>,
    /// The lowerings of background compiles not yet started.
    queued: Arc<BatchQueue>,
    primary: Placement,
    primary_uploads: UploadCache,
    /// The `local-task` device beside a `local-sync` primary that runs
    /// large contractions (`None` when off or the primary is another
    /// device); it shares the primary's tensors and upload cache.
    parallel: Option<ParallelCpu>,
    /// The CPU runtime to fall back on when a GPU compile fails, opened on
    /// first use (`None` when the primary is a CPU or fallback is off).
    cpu: Option<CpuFallback>,
    /// The CPU fallback's upload cache, made when a variant first runs
    /// there.
    cpu_uploads: OnceLock<UploadCache>,
    /// The upload caches' bounds.
    upload_settings: UploadSettings,
    profile: Profile,
    profile_at_exit: bool,
    /// How long the process's exit waits for queued background compiles.
    exit_wait: Duration,
    /// Set by the first of the process's exit and the drop of the last
    /// handle: the profile is printed once.
    finished: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.finished.swap(true, Ordering::AcqRel) {
            self.print_profile();
        }
    }
}

impl exit::Finish for Inner {
    /// At exit: waits for the queued background compiles, so that they
    /// reach the disk (and remote) cache, then prints the profile.
    fn finish(&self) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.pipeline.keeps_artifacts() && !self.exit_wait.is_zero() {
            let start = Instant::now();
            let finished = self.cache.wait_for_compiles(self.exit_wait);
            tracing::debug!(
                target: "sheaf_jit",
                finished,
                waited = ?start.elapsed(),
                "the process exits: waited for the background compiles"
            );
            if !finished {
                tracing::warn!(
                    target: "sheaf_jit",
                    "the process exits with background compiles still queued after waiting {:?} \
                     (SHEAF_JIT_EXIT_WAIT): they are dropped, and the next process compiles them",
                    self.exit_wait
                );
            }
        }
        self.print_profile();
    }
}

impl Inner {
    /// Prints the profile to stderr, when asked to.
    fn print_profile(&self) {
        if self.profile_at_exit {
            let remote = self.pipeline.remote_stats();
            eprintln!("{}", self.profile.snapshot(self.cache.stats(), remote));
        }
    }

    /// The float semantics `function` compiles with: its own, else the
    /// runtime's.
    fn semantics_of<M>(&self, function: &JitFunction<M>) -> FloatSemantics {
        function.float_semantics().unwrap_or(self.float_semantics)
    }

    /// Lowers `signature` of `function` with `lower` on the calling thread
    /// (a refusal is the signature's failure, not a compile).
    fn lower<M: Send + Sync + 'static>(
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
    fn lowered<M: Send + Sync + 'static>(
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
    fn vet<M: Send + Sync + 'static>(
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
    fn compile(&self, lowering: &LoweredVariant) -> Result<Variant, CompileFailure> {
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
    fn placement_for(&self, module: &str) -> &Placement {
        match &self.parallel {
            Some(parallel) => parallel.placement_for(&self.primary, module),
            None => &self.primary,
        }
    }

    /// Runs `run` on the lowerings of each placement and float semantics
    /// (a module loads on one device and compiles with one set of flags)
    /// and returns its results in the order of `lowerings`; the first
    /// error stops it.
    fn per_placement<T, E>(
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
    fn compile_together(
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
    fn compile_group(
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
                    target: "sheaf_jit",
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

    fn compile_on_some_device(&self, lowering: &LoweredVariant) -> Result<Variant, CompileFailure> {
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
            target: "sheaf_jit",
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
    fn served_by_bundle<M: Send + Sync + 'static>(
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

/// The remote artifact cache of `config`, if it has one. Nothing is
/// contacted yet: a server that is down costs the first fetch its connect
/// timeout, then the circuit breaker keeps later calls off it.
fn remote_tier(config: &JitConfig) -> Result<Option<RemoteTier>, JitError> {
    let remote = &config.remote;
    let Some(url) = &remote.url else {
        return Ok(None);
    };
    let secret = match &remote.secret {
        Some(RemoteSecret::Key(secret)) => secret.clone(),
        Some(RemoteSecret::File(path)) => {
            Secret::from_file(path).map_err(JitError::RemoteSecret)?
        }
        None => return Err(ConfigError::RemoteSecretMissing.into()),
    };
    let backend = RedisStore::new(url.as_str(), remote.timeouts)?;
    tracing::info!(
        target: "sheaf_jit",
        store = ?backend,
        "sharing compiled artifacts through a remote cache"
    );
    RemoteTier::new(Box::new(backend), secret, remote.options.clone())
        .map(Some)
        .map_err(|error| {
            JitError::Internal(format!(
                "cannot start the remote cache's publisher thread: {error}"
            ))
        })
}

/// The disk cache's folder of `iree-compile --version` answers
/// (`iree_safe::compiler::remember_versions_in`).
const COMPILER_VERSIONS: &str = "compiler-versions";

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

/// A lowering the caller passes with a call (it may borrow the caller's
/// state, `Send` or not).
pub type CallerLowering<'a, M> =
    dyn Fn(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError> + 'a;

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
    /// Opens the device (falling back to the CPU driver when it cannot be
    /// opened, if the configuration allows) and sets up the caches. The
    /// compiler is loaded later, on the first artifact that must really be
    /// compiled.
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when the device (and the CPU fallback) cannot be
    /// opened, [`JitError::Unsupported`] when no target is configured for a
    /// driver whose code this crate cannot tell, [`JitError::DiskCache`]
    /// when the disk cache's folder is not safe or cannot be created,
    /// [`JitError::RemoteCache`], [`JitError::RemoteSecret`] or
    /// [`JitError::Config`] for a remote cache that cannot be set up,
    /// [`JitError::Bundle`] for an artifact bundle that cannot serve this
    /// program, and [`JitError::Config`] for any setting that cannot work:
    /// `new` checks the whole configuration again as
    /// [`JitConfigBuilder::build`](crate::JitConfigBuilder::build) does,
    /// since its fields are public and may have changed since.
    pub fn new(config: JitConfig) -> Result<JitRuntime, JitError> {
        // The configuration's fields are public: what `build` checked may
        // have been changed since.
        config.validate()?;
        let devices = config.device.specs()?;
        let options = &config.compile.options;
        let target = config.compile.target.as_ref();
        let compiler = &config.compile.compiler;
        let workers = config.device.cpu_workers;
        let primary = Placement::primary(&devices, workers, target, options, compiler)?;
        primary.check_flags(options)?;
        let cpu = CpuFallback::for_primary(
            &primary,
            devices.cpu_fallback.as_ref(),
            workers,
            options,
            compiler,
        );
        let (store, folder) = match config.disk.store_config() {
            Some(store) => {
                let folder = store.directory.clone();
                (ArtifactStore::open(store)?, Some(folder))
            }
            None => (ArtifactStore::disabled(), None),
        };
        if let Some(folder) = folder {
            // The compiler's `--version`, kept beside the artifacts (a
            // folder the store checked is this user's alone): a later
            // process does not run the compiler to learn it.
            let memos = folder.join(COMPILER_VERSIONS);
            if let Err(error) = iree_safe::compiler::remember_versions_in(&memos) {
                let error = ErrorChain(&error);
                tracing::warn!(
                    target: "sheaf_jit",
                    %error,
                    "cannot keep the compiler's version in the disk cache ({error}); each \
                     process asks the compiler"
                );
            }
        }
        let store = match remote_tier(&config)? {
            Some(remote) => store.with_remote(remote),
            None => store,
        };
        let bundles = config
            .bundles
            .iter()
            .map(|dir| {
                let bundle = Bundle::open(dir).map_err(|source| JitError::Bundle {
                    path: dir.clone(),
                    source,
                })?;
                tracing::info!(
                    target: "sheaf_jit",
                    bundle = %bundle.dir().display(),
                    artifacts = bundle.len(),
                    "serving compiled artifacts from a bundle"
                );
                Ok(bundle)
            })
            .collect::<Result<Vec<_>, JitError>>()?;
        let with_disk = store.directory().is_some();
        let pipeline = Arc::new(Pipeline::new(config.compile.compiler, store, bundles));
        // With a disk cache, what the policy learns is kept in it, and a
        // function starts from what earlier processes learned.
        let float_semantics = config.compile.float_semantics;
        let cache = if with_disk {
            let target = primary.code(float_semantics).target_identity.clone();
            let memory = DiskPolicy::new(Arc::clone(&pipeline), target);
            JitCache::remembering(config.cache.clone(), Arc::new(memory))
        } else {
            JitCache::new(config.cache.clone())
        }
        .map_err(ConfigError::from)?;
        let inner = Arc::new(Inner {
            cache,
            compile_mode: config.compile.mode,
            float_semantics,
            pipeline,
            queued: BatchQueue::new(config.compile.batch_limit, config.cache.compile_threads),
            primary_uploads: UploadCache::new(primary.device().clone(), config.uploads),
            parallel: ParallelCpu::for_primary(&primary, config.device.parallel_workers),
            primary,
            cpu,
            cpu_uploads: OnceLock::new(),
            upload_settings: config.uploads,
            profile: Profile::default(),
            profile_at_exit: config.profile_at_exit,
            exit_wait: config.compile.exit_wait,
            finished: AtomicBool::new(false),
        });
        exit::finish_at_exit(Arc::downgrade(&inner) as Weak<dyn exit::Finish>);
        Ok(JitRuntime { inner })
    }

    /// Runs `function` on `args` compiled, or says why the caller must run
    /// it in its own interpreter; the function's own lowering lowers a new
    /// signature (see [`dispatch_with`](Self::dispatch_with), which this
    /// is with that lowering).
    ///
    /// # Errors
    ///
    /// Those of [`dispatch_with`](Self::dispatch_with), and
    /// [`JitError::Unsupported`] for a function
    /// [lowered per call](JitFunction::lowered_per_call).
    pub fn dispatch<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<Dispatched<M>, JitError> {
        let lower = function.lowering().ok_or_else(|| {
            JitError::Unsupported(format!(
                "`{}` is lowered per call: call it with `dispatch_with` and its lowering",
                function.name()
            ))
        })?;
        self.dispatch_with(function, args, captured, lower)
    }

    /// Runs `function` on `args` compiled, or says why the caller must run
    /// it in its own interpreter; `lower` lowers the signature to compile
    /// when the call misses.
    ///
    /// The call's signature (dtypes and dims, static scalars and structure
    /// of `args`, and the `captured` scalars baked into the code) finds
    /// compiled code in the cache. A miss the cache decides to compile
    /// (not at capacity, no remembered failure) first looks in the artifact
    /// bundles by the function's name, definition hash and signature (no
    /// lowering), then runs `lower` **on this thread** — it may borrow the
    /// caller's state, `Send` or not: only the MLIR text and the metadata
    /// cross to a compile thread — then loads the artifact from the disk
    /// cache (on this thread, so the call runs it, in either mode), or
    /// fetches it from the remote cache or compiles it: at once in
    /// [`CompileMode::Blocking`], on a compile thread in
    /// [`CompileMode::Background`] (the function's
    /// [mode](JitFunction::with_compile_mode), else the runtime's) while
    /// this call is interpreted, unless interpreting the function is
    /// expected to take longer than the compile (see
    /// [`report_interpreted`](Self::report_interpreted)). A hit runs `lower`
    /// not at all and copies nothing.
    ///
    /// A lowering's refusal is the signature's failure (remembered like a
    /// failed compile, counted in [`CacheStats`]' `refusals`): the call is
    /// interpreted ([`FallbackReason::CompileFailed`]). Errors of compiled
    /// code (a shape the artifact rejects) are errors, never a silent
    /// fallback.
    ///
    /// `lower` runs at most twice per miss: when the call's dims make a dim
    /// of a function [with dynamic dims](JitFunction::with_dynamic_dims)
    /// vary, it lowers the call's own signature first (a call whose dims do
    /// not fit together is refused as itself, and never widens the
    /// function), then the signature with that dim dynamic.
    ///
    /// ```no_run
    /// use std::rc::Rc;
    /// use sheaf_integration::{mlir, Dispatched, JitConfig, JitFunction, JitRuntime, Lowered, Value};
    ///
    /// // The caller's IR: not `Send` (an `Rc`), never handed to the runtime.
    /// let op: Rc<str> = Rc::from("add");
    /// let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// let double: JitFunction = JitFunction::lowered_per_call("double", 1);
    /// let x = Value::host(ndarray::ArrayD::<f32>::ones(ndarray::IxDyn(&[4])));
    /// let outcome = jit.dispatch_with(&double, &[x], &[], |ctx| {
    ///     let ty = mlir::arg_type(&ctx.args()[0])?;
    ///     Ok(Lowered::new(format!(
    ///         "func.func @{}(%x: {ty}) -> {ty} {{ %y = stablehlo.{op} %x, %x : {ty} return %y : {ty} }}",
    ///         ctx.entry_name()
    ///     )))
    /// })?;
    /// if let Dispatched::Compiled(compiled) = outcome {
    ///     println!("{:?}", compiled.outputs[0].to_host()?);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for arguments the cache key cannot describe
    /// (see [`Value::call_signature`]) and for results of compiled code that
    /// are not tensors, and [`JitError::Runtime`] when the compiled code or the
    /// copy of an argument to the device fails. A failed compile is not an
    /// error: the call is interpreted ([`FallbackReason::CompileFailed`]).
    pub fn dispatch_with<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
        mut lower: impl FnMut(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
    ) -> Result<Dispatched<M>, JitError> {
        let inner = &*self.inner;
        let start = Instant::now();
        let (signature, flat) = value::flatten_call(args, captured)?;
        // When this call prepared a compile: its lowering and compile are
        // recorded as such, the lookup up to then as the lookup.
        let mut missed_at = None;
        let dispatch = match function.compile_mode().unwrap_or(inner.compile_mode) {
            CompileMode::Blocking => {
                inner
                    .cache
                    .get_or_compile(function.id(), &signature, |target| {
                        missed_at = Some(Instant::now());
                        if let Some(variant) = inner.served_by_bundle(function, target, &signature)
                        {
                            return Ok(variant);
                        }
                        inner.vet(function, &mut lower, (target, &signature), args)?;
                        inner.compile(&inner.lower(function, &mut lower, target, args)?)
                    })
            }
            CompileMode::Background => {
                inner
                    .cache
                    .get_or_queue(function.id(), &signature, |target| {
                        missed_at = Some(Instant::now());
                        if let Some(variant) = inner.served_by_bundle(function, target, &signature)
                        {
                            return Ok(Prepared::Ready(variant));
                        }
                        inner.vet(function, &mut lower, (target, &signature), args)?;
                        let lowering = inner.lower(function, &mut lower, target, args)?;
                        // An artifact on disk is loaded here: the call runs
                        // it rather than the interpreter.
                        let placement = inner.placement_for(&lowering.module);
                        if let Some(variant) = inner.pipeline.local(&lowering, placement) {
                            inner.profile.count_source(variant.source);
                            return Ok(Prepared::Ready(variant));
                        }
                        // The pool holds the runtime weakly: dropping the
                        // last handle withdraws the queued compiles.
                        let runtime = Arc::downgrade(&self.inner);
                        let ticket = inner.queued.push(lowering);
                        Ok(Prepared::Queue(move || {
                            let inner = runtime.upgrade().ok_or(CompileFailure::Abandoned)?;
                            ticket.compile(|lowerings| inner.compile_together(lowerings))
                        }))
                    })
            }
        };
        let looked_up = Instant::now();
        let lookup_end = missed_at.unwrap_or(looked_up);
        inner.profile.record(Phase::KeyLookup, lookup_end - start);
        match dispatch {
            Dispatch::Compiled { exe, origin } => {
                let outputs = self.run(&exe, &flat, looked_up)?;
                Ok(Dispatched::Compiled(Compiled::new(
                    outputs,
                    Provenance::Compiled(origin),
                    exe,
                )?))
            }
            Dispatch::Interpret { reason } => Ok(Dispatched::Interpret(reason)),
        }
    }

    /// Tells the runtime how long interpreting a call of `function` took,
    /// after [`dispatch`](Self::dispatch) said to interpret it
    /// ([`call`](Self::call) does it itself). In
    /// [`CompileMode::Background`], a later miss of the function whose
    /// compile is expected to finish sooner than an interpreted call would
    /// waits for the compile instead of interpreting (see
    /// [`jit_cache::JitCache::get_or_queue`] for the estimate).
    pub fn report_interpreted<M>(&self, function: &JitFunction<M>, took: Duration) {
        self.inner.profile.record(Phase::Interpret, took);
        self.inner.cache.report_interpreted(function.id(), took);
    }

    /// [`dispatch`](Self::dispatch), running `interpret` when the call must
    /// be interpreted: it receives the arguments with every device tensor
    /// copied to the host, the captured scalars, and the reason. `interpret`
    /// may borrow the caller's interpreter state mutably; its time is
    /// reported ([`report_interpreted`](Self::report_interpreted)).
    ///
    /// # Errors
    ///
    /// [`CallError::Jit`] with the errors of [`dispatch`](Self::dispatch) (or
    /// of copying an argument to the host), and [`CallError::Interpreter`]
    /// with `interpret`'s error.
    pub fn call<M: Send + Sync + 'static, E>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
        interpret: impl FnOnce(&[Value], &[CapturedScalar], &FallbackReason) -> Result<Vec<Value>, E>,
    ) -> Result<CallResult<M>, CallError<E>> {
        match self.dispatch(function, args, captured)? {
            Dispatched::Compiled(compiled) => Ok(CallResult::compiled(compiled)),
            Dispatched::Interpret(fallback) => {
                let start = Instant::now();
                let host_args = args
                    .iter()
                    .cloned()
                    .map(Value::into_host)
                    .collect::<Result<Vec<_>, _>>()?;
                let outputs = interpret(&host_args, captured, &fallback).map_err(|source| {
                    CallError::Interpreter {
                        function: function.name().to_owned(),
                        fallback: fallback.clone(),
                        source,
                    }
                })?;
                self.report_interpreted(function, start.elapsed());
                Ok(CallResult::interpreted(outputs, fallback))
            }
        }
    }

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
    /// # use sheaf_integration::{reference, JitConfig, JitRuntime, Precompile, Value};
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

    /// Copies `host` to the device compiled code runs on, through the upload
    /// cache (a host array passed again later is not copied again).
    ///
    /// # Errors
    ///
    /// As [`HostTensor::to_device`].
    pub fn upload(&self, host: &HostTensor) -> Result<DeviceTensor, JitError> {
        self.inner.primary_uploads.upload(host)
    }

    /// Runs compiled code; `start` is when the cache lookup ended.
    fn run(
        &self,
        variant: &Variant,
        flat: &[FlatArg<'_>],
        start: Instant,
    ) -> Result<Vec<Value>, JitError> {
        let profile = &self.inner.profile;
        let device = variant.entry.module().runtime().device();
        let uploads = self.uploads_for(device)?;
        let inputs = flat
            .iter()
            .map(|arg| -> Result<iree_safe::VmValue, JitError> {
                Ok(match arg {
                    FlatArg::Tensor(Tensor::Device(tensor))
                        if tensor.device().shares_memory_with(device) =>
                    {
                        tensor.clone().into()
                    }
                    // Another device's tensor (the CPU fallback's, say) goes
                    // through the host.
                    FlatArg::Tensor(Tensor::Device(tensor)) => {
                        HostTensor::from_device(tensor)?.to_device(device)?.into()
                    }
                    FlatArg::Tensor(Tensor::Host(host)) => uploads.upload(host)?.into(),
                    FlatArg::Scalar(scalar) => scalar_to_device(device, *scalar)?.into(),
                })
            })
            .collect::<Result<SmallVec<[_; 4]>, _>>()?;
        let start = if flat
            .iter()
            .any(|arg| !matches!(arg, FlatArg::Tensor(Tensor::Device(_))))
        {
            let now = Instant::now();
            profile.record(Phase::InputTransfer, now - start);
            now
        } else {
            start
        };
        let results = variant.entry.call(&inputs)?;
        profile.record(Phase::Call, start.elapsed());
        let tensors = results
            .into_iter()
            .map(|result| match result {
                iree_safe::VmValue::Tensor(tensor) => Ok(Tensor::Device(tensor)),
                other => Err(JitError::Unsupported(format!(
                    "compiled code returned a {} where results are tensors (return 0-d tensors)",
                    other.describe()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        value::restore(tensors, variant.outputs.as_ref())
    }

    /// The upload cache of `device`: the primary one (also for the device
    /// beside it, which takes the primary's tensors), or the CPU
    /// fallback's.
    fn uploads_for(&self, device: &iree_safe::Device) -> Result<&UploadCache, JitError> {
        let inner = &*self.inner;
        if device.shares_memory_with(inner.primary.device()) {
            return Ok(&inner.primary_uploads);
        }
        match inner.cpu.as_ref().and_then(CpuFallback::opened) {
            Some(cpu) => Ok(inner
                .cpu_uploads
                .get_or_init(|| UploadCache::new(cpu.device().clone(), inner.upload_settings))),
            None => Err(JitError::Internal(format!(
                "a variant runs on `{}`, which this runtime did not open",
                device.uri()
            ))),
        }
    }

    /// Drops every compiled signature of `function` (e.g. when Sheaf deletes
    /// or redefines it) and forgets the function's admission and thrash
    /// state and remembered compile failures, as if it had never been
    /// called; returns how many variants were unloaded. Its compiles waiting
    /// in the background queue are withdrawn, and one running is not cached.
    /// A redefinition needs no `forget` to be correct (its definition hash
    /// is new), only to free memory sooner. What the policy learned about
    /// the function stays in the disk cache's policy file: its next call
    /// starts from it.
    pub fn forget<M>(&self, function: &JitFunction<M>) -> usize {
        self.inner.cache.evict_function(function.id())
    }

    /// The compile mode of functions that do not
    /// [choose their own](JitFunction::with_compile_mode).
    pub fn compile_mode(&self) -> CompileMode {
        self.inner.compile_mode
    }

    /// Waits until no compile is queued or running (background compiles,
    /// and blocking ones of other threads): `true`, or `false` when
    /// `timeout` passed first.
    pub fn wait_for_compiles(&self, timeout: Duration) -> bool {
        self.inner.cache.wait_for_compiles(timeout)
    }

    /// Device memory per device this runtime opened (the primary device's
    /// first, then the one beside it for large contractions and the CPU
    /// fallback's once they were opened), keyed by the
    /// device's URI: the device allocator's bytes in use and peak, compiled
    /// code's buffers, uploads and results included (IREE's allocator
    /// statistics; Sheaf's `--mem-profile`).
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when IREE cannot report a device's statistics.
    pub fn memory_statistics(&self) -> Result<Vec<(String, MemoryStatistics)>, JitError> {
        let primary = self.inner.primary.device();
        let mut devices = vec![primary];
        if let Some(parallel) = self.inner.parallel.as_ref().and_then(ParallelCpu::get) {
            devices.push(parallel.device());
        }
        if let Some(cpu) = self.inner.cpu.as_ref().and_then(CpuFallback::opened) {
            devices.push(cpu.device());
        }
        devices
            .into_iter()
            .map(|device| Ok((device.uri().to_owned(), device.memory_statistics()?)))
            .collect()
    }

    /// Cache statistics, per function and in total.
    pub fn stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// Disk cache statistics.
    pub fn disk_cache_stats(&self) -> StoreStats {
        self.inner.pipeline.store_stats()
    }

    /// Remote artifact cache statistics; `None` without a remote cache.
    pub fn remote_cache_stats(&self) -> Option<RemoteStats> {
        self.inner.pipeline.remote_stats()
    }

    /// Upload cache statistics: the primary device's cache (which the
    /// device beside `local-sync` shares), plus the CPU fallback's once a
    /// variant ran there.
    pub fn upload_stats(&self) -> UploadStats {
        let mut stats = self.inner.primary_uploads.stats();
        if let Some(cpu) = self.inner.cpu_uploads.get() {
            stats += cpu.stats();
        }
        stats
    }

    /// The compiler, if one was loaded (it is loaded on the first artifact
    /// that must really be compiled): which implementation and why.
    pub fn compiler(&self) -> Option<&CompilerChoice> {
        self.inner.pipeline.loaded_compiler()
    }

    /// The `--jit-profile` report: time per phase plus the cache counters.
    pub fn profile(&self) -> ProfileReport {
        self.inner
            .profile
            .snapshot(self.stats(), self.remote_cache_stats())
    }

    /// The runtime compiled code runs on (the primary device's).
    pub fn runtime(&self) -> &iree_safe::Runtime {
        &self.inner.primary.runtime
    }

    /// What the primary device's code is compiled for, with the runtime's
    /// float semantics ([`float_semantics`](Self::float_semantics); a
    /// function that chooses other semantics compiles with those flags
    /// instead). A large contraction adds [`CONTRACTION_FLAGS`](crate::CONTRACTION_FLAGS).
    pub fn compile_options(&self) -> &iree_safe::compiler::CompileOptions {
        &self.inner.primary.code(self.inner.float_semantics).options
    }

    /// The float semantics of functions that do not
    /// [choose their own](JitFunction::with_float_semantics).
    pub fn float_semantics(&self) -> FloatSemantics {
        self.inner.float_semantics
    }

    /// Writes every compiled variant in the cache to a bundle in `dir`
    /// (artifacts and a manifest), to serve a later process ahead of time
    /// (`JitConfigBuilder::artifact_bundle`), with or without a compiler.
    /// Artifacts are copied from the disk cache, which must be enabled.
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
        bundle::write(dir, compiler, exports, skipped).map_err(failed)
    }
}

impl JitRuntime {
    /// Serves calls with a module compiled outside this runtime (by the
    /// application's own `iree-compile`, ahead of time, with flags of its
    /// choosing): each of `imports` names a function the module exports,
    /// the [`JitFunction`] and signature it serves, and its result
    /// structure and metadata. Each is cached like a variant the runtime
    /// compiled: a call of that function with that signature (or, for a
    /// signature with dynamic dims, any signature it covers) hits it,
    /// without lowering or compiling ([`ArtifactSource::Imported`]); it
    /// counts against the function's capacity and the budgets (the cache's
    /// statistics count it as a compile of no time, as a `precompile`d
    /// one; the profile, as imported), and may be evicted like any variant
    /// (a later call then lowers and compiles as usual). It is not written
    /// to the disk cache nor exported to bundles.
    ///
    /// `vmfb` is native code this process will run, so it must be a
    /// [`TrustedVmfb`](crate::TrustedVmfb): the compiler's output
    /// ([`Artifact::vmfb`](crate::Artifact::vmfb)), or bytes vouched for
    /// with the `unsafe` `TrustedVmfb::new_unchecked` or
    /// [`Artifact::from_trusted_bytes`](crate::Artifact::from_trusted_bytes)
    /// (code the application built and ships as part of itself); safe code
    /// cannot load arbitrary bytes. `target` is what it was compiled for, which must
    /// be what this runtime's device runs ([`compile_options`](Self::compile_options)'s
    /// target). Each function's declaration (IREE's
    /// `iree.abi.declaration`) must take the signature's tensors and
    /// return as many results as `outputs` has leaves, as for a bundle's
    /// entries; all are checked before any is cached.
    ///
    /// ```no_run
    /// use sheaf_integration::{
    ///     reference, Artifact, CompileTarget, DType, Import, JitConfig, JitRuntime, Signature,
    /// };
    ///
    /// let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// let bytes = std::fs::read("/opt/app/sigmoid.vmfb")?;
    /// // SAFETY: the application built this module with its own compiler
    /// // and installs it with its code; nobody else can write it.
    /// let artifact = unsafe { Artifact::from_trusted_bytes(bytes) };
    /// let sigmoid = reference::sigmoid();
    /// let signature = Signature::builder().arg(DType::F32, &[1, 5]).build();
    /// jit.import_artifact(
    ///     artifact.vmfb(),
    ///     &CompileTarget::host_cpu(),
    ///     vec![Import::new(&sigmoid, "sigmoid", signature)],
    /// )?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Import`]: the target is not this device's
    /// ([`ImportError::Target`](crate::ImportError::Target)), the runtime
    /// refuses the module ([`Load`](crate::ImportError::Load)), an entry is
    /// not exported ([`NoEntry`](crate::ImportError::NoEntry)) or does not
    /// declare what it is said to serve
    /// ([`Declaration`](crate::ImportError::Declaration)); nothing is
    /// cached then.
    pub fn import_artifact<M: Send + Sync + 'static>(
        &self,
        vmfb: crate::TrustedVmfb<'_>,
        target: &iree_safe::compiler::CompileTarget,
        imports: Vec<crate::Import<'_, M>>,
    ) -> Result<crate::ImportSummary, JitError> {
        use crate::error::ImportError;
        let refused = |error: ImportError| JitError::Import(Box::new(error));
        let inner = &*self.inner;
        let code = inner.primary.code(inner.float_semantics);
        if *target != code.options.target {
            return Err(refused(ImportError::Target {
                artifact: target.clone(),
                runtime: code.options.target.clone(),
                device: inner.primary.device().uri().to_owned(),
            }));
        }
        let module = inner
            .primary
            .runtime
            .load(vmfb)
            .map_err(|error| refused(ImportError::Load(error)))?;
        let share = module.artifact_bytes() / imports.len().max(1);
        let mut variants = Vec::with_capacity(imports.len());
        for import in imports {
            let entry = module.function(&import.entry).map_err(|_| {
                refused(ImportError::NoEntry {
                    entry: import.entry.clone(),
                    exports: module.function_names(),
                })
            })?;
            let outputs = import.outputs.as_ref();
            if let Some(why) = crate::declaration::mismatch(&entry, &import.signature, outputs) {
                return Err(refused(ImportError::Declaration {
                    entry: import.entry,
                    function: import.function.name().to_owned(),
                    signature: import.signature.to_string(),
                    why,
                }));
            }
            let metadata = Arc::new(import.metadata) as crate::lowering::Metadata;
            let variant = Variant {
                bytes: share,
                entry,
                metadata_bytes: import.function.encode_metadata(&metadata).map(Arc::from),
                metadata,
                outputs: import.outputs,
                key: None,
                source: ArtifactSource::Imported,
                target: Arc::from(code.target_identity.as_str()),
                device: Arc::from(inner.primary.device().uri()),
            };
            variants.push((import.function, import.signature, variant));
        }
        let imported = variants.len();
        let mut cached = 0;
        for (function, signature, variant) in variants {
            inner.profile.count_source(ArtifactSource::Imported);
            cached += usize::from(inner.cache.insert(
                function.id(),
                &signature,
                variant,
                Duration::ZERO,
            ));
        }
        Ok(crate::ImportSummary { imported, cached })
    }
}
