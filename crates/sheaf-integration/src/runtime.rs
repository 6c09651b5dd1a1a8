//! The JIT runtime: one shared IREE runtime, one compiler (behind the disk
//! cache) and the bounded cache policy, for the whole process.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use iree_safe::compiler::{
    self, CompileOptions, Compiler, DiskCache, DiskCacheConfig, InProcessCompiler,
    SubprocessCompiler,
};
use iree_safe::Runtime;
use jit_cache::{
    CacheStats, CapturedScalar, Dispatch, FallbackReason, JitCache, Origin, Signature,
};

use crate::config::{CompilerPreference, DiskCacheSetting, JitConfig};
use crate::error::JitError;
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
    /// The interpreter: compiling this signature failed (the compiler's
    /// message is kept).
    InterpretedCompileFailed(String),
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
    compiler: DiskCache,
    options: CompileOptions,
    runtime: Runtime,
    device_tag: u64,
    profile: Profile,
}

impl JitRuntime {
    /// Opens the device, loads the compiler and sets up the caches.
    pub fn new(config: JitConfig) -> Result<JitRuntime, JitError> {
        let runtime = Runtime::new(&config.driver)?;
        let compiler: Arc<dyn Compiler> = match config.compiler {
            CompilerPreference::Auto => compiler::choose_compiler()?.compiler,
            CompilerPreference::InProcess => Arc::new(InProcessCompiler::load()?),
            CompilerPreference::Subprocess => Arc::new(SubprocessCompiler::locate()?),
        };
        let compiler = match &config.disk_cache {
            DiskCacheSetting::Default => DiskCache::new(compiler, DiskCacheConfig::from_env()),
            DiskCacheSetting::Dir(dir) => DiskCache::new(compiler, DiskCacheConfig::at(dir)),
            DiskCacheSetting::Disabled => DiskCache::new(compiler, DiskCacheConfig::disabled()),
        };
        let cache = JitCache::new(config.cache).map_err(|e| JitError::Config(e.to_string()))?;
        Ok(JitRuntime {
            inner: Arc::new(Inner {
                cache,
                compiler,
                options: config.compile_options,
                device_tag: crate::function::definition_hash(&config.driver),
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
                    FallbackReason::CompileFailed(error) => {
                        Provenance::InterpretedCompileFailed(error.to_string())
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
    ) -> Result<LoadedExecutable, jit_cache::CompileError> {
        let inner = &*self.inner;
        let failed = |what: &str, e: &dyn std::fmt::Display| {
            jit_cache::CompileError::new(format!(
                "{what} `{}` for {signature}: {e}",
                function.name()
            ))
        };
        let mlir = function
            .lower(signature)
            .map_err(|e| failed("lowering", &e))?;
        // Loading is the validation: an artifact from disk that the runtime
        // refuses is deleted and compiled again; the module that loaded is kept.
        let loaded = Mutex::new(None);
        let validate = |bytes: &[u8]| -> Result<(), String> {
            let module = inner.runtime.load(bytes).map_err(|e| e.to_string())?;
            let entry = module.function(ENTRY_POINT).map_err(|e| e.to_string())?;
            *loaded.lock().unwrap_or_else(|p| p.into_inner()) = Some(entry);
            Ok(())
        };
        // The bytes now live in the loaded module (and on disk).
        inner
            .compiler
            .compile_validated(&mlir, &inner.options, &validate)
            .map_err(|e| failed("compiling", &e))?;
        let entry = loaded
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .ok_or_else(|| {
                failed(
                    "loading",
                    &"the compiler returned an artifact it did not validate",
                )
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
    /// it); returns how many modules were unloaded.
    pub fn forget(&self, function: &JitFunction) -> usize {
        self.inner.cache.evict_function(function.id())
    }

    /// Cache statistics, per function and in total.
    pub fn stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// Disk cache statistics.
    pub fn disk_cache_stats(&self) -> compiler::DiskCacheStats {
        self.inner.compiler.stats()
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
