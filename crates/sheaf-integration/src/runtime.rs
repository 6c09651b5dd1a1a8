//! The JIT runtime: one shared IREE runtime, one compiler (behind the disk
//! cache) and the bounded cache policy, for the whole process.

use std::sync::Arc;
use std::time::Instant;

use iree_safe::compiler::{self, CompileOptions, CompilerChoice};
use iree_safe::{Function, Runtime};
use jit_cache::store::{ArtifactKey, BuildError, DiskStore, KeyParts, StoreStats};
use jit_cache::{
    stable_hash, CacheStats, CapturedScalar, CompileFailure, Dispatch, FallbackReason, JitCache,
    Origin, Signature,
};

use crate::config::JitConfig;
use crate::error::{JitError, VariantError};
use crate::executable::LoadedExecutable;
use crate::function::{JitFunction, ENTRY_POINT};
use crate::profile::{Phase, Profile, ProfileReport};
use crate::tensor::{HostTensor, Value};

/// How a call's outputs were produced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Provenance {
    /// Compiled code already in the cache.
    CacheHit,
    /// Compiled code compiled (or loaded from the disk cache) by this call,
    /// or by a concurrent call this one waited for.
    CompiledNow,
    /// The interpreter: the function recompiles too often (thrash
    /// fallback); cached signatures still run compiled.
    InterpretedThrashing,
    /// The interpreter: compiling this signature failed. The failure is
    /// kept whole: [`CompileFailure::backend_error`] downcasts to the
    /// [`VariantError`] (lowering, compiler diagnostics, or load).
    InterpretedCompileFailed(Arc<CompileFailure>),
    /// The interpreter: another call is compiling this signature and the
    /// cache is configured not to wait.
    InterpretedCompileInFlight,
}

impl Provenance {
    /// True when compiled code produced the outputs.
    pub fn is_compiled(&self) -> bool {
        matches!(self, Provenance::CacheHit | Provenance::CompiledNow)
    }
}

/// Outputs of a JIT call and how they were produced.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The outputs: device tensors when compiled code ran (pass them to the
    /// next call as they are), host arrays when the interpreter ran.
    pub outputs: Vec<Value>,
    /// How they were produced.
    pub provenance: Provenance,
}

/// The JIT runtime Sheaf calls. Create one per process and clone it (clones
/// share everything); Send + Sync.
///
/// ```no_run
/// use ndarray::ArrayD;
/// use sheaf_integration::{reference, JitConfig, JitRuntime, Value};
///
/// let jit = JitRuntime::new(JitConfig::from_env()?)?;
/// let sigmoid = reference::sigmoid();
/// let x = ArrayD::<f32>::zeros(ndarray::IxDyn(&[1, 5]));
/// let result = jit.call(&sigmoid, &[Value::from(x)], &[])?;
/// println!("{:?} via {:?}", result.outputs[0].to_host()?, result.provenance);
/// # Ok::<(), sheaf_integration::JitError>(())
/// ```
#[derive(Debug, Clone)]
pub struct JitRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // Drop order: cached modules before the runtime they were loaded into
    // (they keep it alive anyway).
    cache: JitCache<LoadedExecutable>,
    compiler: CompilerChoice,
    store: DiskStore,
    options: CompileOptions,
    /// `options.target_identity()`, computed once: part of every disk key.
    target: String,
    runtime: Runtime,
    device_tag: u64,
    profile: Profile,
}

impl JitRuntime {
    /// Opens the device, loads the compiler and sets up the caches.
    pub fn new(config: JitConfig) -> Result<JitRuntime, JitError> {
        let runtime = Runtime::new(&config.driver)?;
        let compiler = compiler::choose_compiler(config.compiler)?;
        tracing::info!(
            target: "sheaf_jit",
            compiler = %compiler.kind,
            reason = %compiler.reason,
            "using the {} IREE compiler ({})",
            compiler.kind,
            compiler.reason
        );
        let store = match config.disk_cache_config() {
            Some(store) => DiskStore::new(store),
            None => DiskStore::disabled(),
        };
        let cache = JitCache::new(config.cache).map_err(crate::error::ConfigError::from)?;
        Ok(JitRuntime {
            inner: Arc::new(Inner {
                cache,
                compiler,
                store,
                target: config.compile_options.target_identity(),
                options: config.compile_options,
                device_tag: stable_hash(config.driver.as_bytes()),
                runtime,
                profile: Profile::default(),
            }),
        })
    }

    /// Calls `function` with `args` and the `captured` scalars baked into
    /// its code. Runs cached compiled code, compiles and caches it, or runs
    /// the interpreter (thrash fallback, failed compile), as the cache
    /// decides. Errors of compiled code (e.g. a shape the artifact rejects)
    /// are returned, never retried in the interpreter.
    pub fn call(
        &self,
        function: &JitFunction,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<CallResult, JitError> {
        let inner = &*self.inner;
        let start = Instant::now();
        let signature = self.signature(args, captured)?;
        let mut compile_time = None;
        let dispatch = inner
            .cache
            .get_or_compile(function.id(), &signature, |sig| {
                let compile_start = Instant::now();
                let result = self.compile(function, sig);
                compile_time = Some(compile_start.elapsed());
                result
            });
        let looked_up = Instant::now();
        match compile_time {
            Some(elapsed) => inner.profile.record(Phase::Compile, elapsed),
            None => inner.profile.record(Phase::KeyLookup, looked_up - start),
        }
        match dispatch {
            Dispatch::Compiled { exe, origin } => {
                let provenance = match origin {
                    Origin::Hit => Provenance::CacheHit,
                    _ => Provenance::CompiledNow,
                };
                let outputs = self.run_compiled(&exe, args, looked_up)?;
                Ok(CallResult {
                    outputs,
                    provenance,
                })
            }
            Dispatch::Interpret { reason } => {
                let provenance = match &reason {
                    FallbackReason::Thrashing { .. } => Provenance::InterpretedThrashing,
                    FallbackReason::CompileFailed(failure) => {
                        Provenance::InterpretedCompileFailed(Arc::clone(failure))
                    }
                    _ => Provenance::InterpretedCompileInFlight,
                };
                let outputs = self.interpret(function, args, captured)?;
                Ok(CallResult {
                    outputs: outputs.into_iter().map(Value::Host).collect(),
                    provenance,
                })
            }
        }
    }

    /// [`call`](Self::call), with every output copied to the host.
    pub fn call_host(
        &self,
        function: &JitFunction,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<(Vec<HostTensor>, Provenance), JitError> {
        let result = self.call(function, args, captured)?;
        let start = Instant::now();
        let outputs = result
            .outputs
            .iter()
            .map(Value::to_host)
            .collect::<Result<Vec<_>, _>>()?;
        if result.provenance.is_compiled() {
            self.inner
                .profile
                .record(Phase::OutputTransfer, start.elapsed());
        }
        Ok((outputs, result.provenance))
    }

    /// The cache key of a call.
    fn signature(
        &self,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<Signature, JitError> {
        let mut builder = Signature::builder();
        builder.device_tag(self.inner.device_tag);
        for arg in args {
            builder.arg_spec(arg.arg_spec()?);
        }
        for scalar in captured {
            builder.captured(scalar.clone());
        }
        Ok(builder.build())
    }

    /// Lowers, compiles (through the disk cache) and loads one signature.
    fn compile(
        &self,
        function: &JitFunction,
        signature: &Signature,
    ) -> Result<LoadedExecutable, CompileFailure> {
        let inner = &*self.inner;
        let (name, shown) = (function.name(), signature.to_string());
        let mlir = function.lower(signature).map_err(|message| {
            CompileFailure::new(VariantError::Lowering {
                function: name.to_owned(),
                signature: shown.clone(),
                message,
            })
        })?;
        // Loading is the validation: an artifact from disk that the runtime
        // refuses is deleted and compiled again.
        let load = |bytes: &[u8]| -> Result<Function, iree_safe::Error> {
            inner.runtime.load(bytes)?.function(ENTRY_POINT)
        };
        let compile = || {
            inner
                .compiler
                .compiler
                .compile(&mlir, &inner.options)
                .map(compiler::Artifact::into_bytes)
        };
        let (entry, _) = inner
            .store
            .fetch_or_build(inner.artifact_key(&mlir).as_ref(), load, compile)
            .map_err(|error| {
                let (function, signature) = (name.to_owned(), shown.clone());
                CompileFailure::new(match error {
                    BuildError::Build(source) => VariantError::Compile {
                        function,
                        signature,
                        source,
                    },
                    BuildError::Rejected(source) => VariantError::Load {
                        function,
                        signature,
                        source,
                    },
                })
            })?;
        Ok(LoadedExecutable::new(entry))
    }

    /// Runs compiled code; `start` is when the cache lookup ended.
    fn run_compiled(
        &self,
        exe: &LoadedExecutable,
        args: &[Value],
        start: Instant,
    ) -> Result<Vec<Value>, JitError> {
        let profile = &self.inner.profile;
        let inputs = args
            .iter()
            .map(|arg| arg.to_device_value(&self.inner.runtime))
            .collect::<Result<Vec<_>, _>>()?;
        let start = if args.iter().all(Value::is_device) {
            start
        } else {
            let now = Instant::now();
            profile.record(Phase::InputTransfer, now - start);
            now
        };
        let outputs = exe.function().call(&inputs)?;
        profile.record(Phase::Call, start.elapsed());
        outputs
            .into_iter()
            .map(|value| match value {
                iree_safe::Value::Tensor(tensor) => Ok(Value::Device(tensor)),
                other => Err(JitError::Unsupported(format!(
                    "compiled code returned a scalar ({})",
                    other.describe()
                ))),
            })
            .collect()
    }

    fn interpret(
        &self,
        function: &JitFunction,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<Vec<HostTensor>, JitError> {
        let start = Instant::now();
        let host_args = args
            .iter()
            .map(Value::to_host)
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = function
            .interpret(&host_args, captured)
            .map_err(|message| JitError::Interpreter {
                function: function.name().to_owned(),
                message,
            })?;
        self.inner.profile.record(Phase::Interpret, start.elapsed());
        Ok(outputs)
    }

    /// Drops every compiled signature of `function` (e.g. when Sheaf deletes
    /// it) and forgets the function's thrash state and remembered compile
    /// failures, as if it had never been called; returns how many modules
    /// were unloaded.
    pub fn forget(&self, function: &JitFunction) -> usize {
        self.inner.cache.evict_function(function.id())
    }

    /// Cache statistics, per function and in total.
    pub fn stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// Disk cache statistics.
    pub fn disk_cache_stats(&self) -> StoreStats {
        self.inner.store.stats()
    }

    /// Which compiler this runtime uses (in-process or subprocess) and why.
    pub fn compiler(&self) -> &CompilerChoice {
        &self.inner.compiler
    }

    /// The `--jit-profile` report: time per phase plus the cache counters.
    pub fn profile(&self) -> ProfileReport {
        self.inner.profile.snapshot(self.stats())
    }

    /// The shared IREE runtime (to build device tensors for arguments).
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }
}

impl Inner {
    /// The disk-cache key of `mlir`, compiled by this runtime's compiler for
    /// its target and loaded into its runtime build; `None` when the
    /// compiler does not identify its build (a development build), whose
    /// artifacts could not be told apart from another build's.
    fn artifact_key(&self, mlir: &str) -> Option<ArtifactKey> {
        let version = self.compiler.compiler.version();
        version.is_identified().then(|| {
            ArtifactKey::new(&KeyParts {
                program: mlir,
                compiler: version.build(),
                runtime: iree_safe::IREE_RUNTIME_BUILD,
                target: &self.target,
            })
        })
    }
}
