//! How signatures are compiled: whether a miss waits for its compile, which
//! compiler, with which options, for which target.

use std::str::FromStr;
use std::time::Duration;

use iree_safe::compiler::{CompileOptions, CompileTarget, CompilerPreference};

use crate::placement::{FloatSemantics, DEFAULT_EXTRA_FLAGS};

/// Whether a call that misses waits for its compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompileMode {
    /// The call compiles (or waits for the compile in flight) and runs
    /// compiled code: deterministic, for tests and benchmarks.
    Blocking,
    /// The call runs in the interpreter at once and queues the compile on
    /// the background pool (`CacheConfig::compile_threads` threads); later
    /// calls run compiled once it is done. Provenance says
    /// [`FallbackReason::CompileQueued`](crate::FallbackReason::CompileQueued).
    /// The default: a new signature costs its caller the interpreter's time
    /// instead of IREE's compile (the README, "Blocking or background", has
    /// the figures; `cargo bench -p sheaf-integration --bench background`).
    #[default]
    Background,
}

impl FromStr for CompileMode {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "blocking" => Ok(CompileMode::Blocking),
            "background" => Ok(CompileMode::Background),
            _ => Err("`blocking` or `background`"),
        }
    }
}

/// The default of [`CompileSettings::exit_wait`]: a few batched compiles
/// on a loaded machine.
const DEFAULT_EXIT_WAIT: Duration = Duration::from_secs(10);

/// How signatures are compiled. The threads of
/// [`CompileMode::Background`] are the cache's
/// ([`CacheConfig::compile_threads`](jit_cache::CacheConfig::compile_threads)),
/// which runs the queued compiles.
///
/// ```
/// use sheaf_integration::{compiler::CompilerPreference, settings::CompileMode, JitConfig};
///
/// let config = JitConfig::builder()
///     .compile(|compile| {
///         compile.mode = CompileMode::Blocking;
///         compile.compiler = CompilerPreference::Subprocess;
///     })
///     .build()?;
/// assert_eq!(config.compile.mode, CompileMode::Blocking);
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CompileSettings {
    /// Whether a miss waits for its compile. Default
    /// [`CompileMode::Background`].
    pub mode: CompileMode,
    /// Compiler implementation. Default [`CompilerPreference::Auto`].
    pub compiler: CompilerPreference,
    /// Compiler options (target backend, CPU, extra flags). Default:
    /// StableHLO input, and f64 kept as f64 (IREE demotes it to f32 by
    /// default, which would silently change Sheaf's numerics).
    ///
    /// How its `extra_flags` combine with the runtime's own flags: the
    /// target's flags (the device's, or [`target`](Self::target)) come
    /// first and cannot be overridden (an extra flag that contradicts one,
    /// such as `--iree-llvmcpu-target-cpu=znver4`, makes
    /// [`JitRuntime::new`](crate::JitRuntime::new) fail with an error naming
    /// both); then the runtime's own ([`CPU_FLAGS`](crate::tuning::CPU_FLAGS), the
    /// [float semantics](Self::float_semantics)' flag,
    /// [`CONTRACTION_FLAGS`](crate::tuning::CONTRACTION_FLAGS) for a large
    /// contraction); then `extra_flags`, and a later flag wins: each option
    /// reaches the compiler once, with the last value given
    /// (`iree_safe::compiler::CompileOptions`, "Precedence of flags"). So
    /// `--iree-opt-const-eval=true` here undoes `CPU_FLAGS`, and
    /// `--iree-llvmcpu-reassociate-fp-reductions=true` reassociates every
    /// function's reductions whatever its float semantics (prefer
    /// [`FloatSemantics`], which the keys name apart).
    pub options: CompileOptions,
    /// The floating-point semantics of compiled code, for functions that do
    /// not choose their own. Default [`FloatSemantics::Strict`]: the
    /// compiler's, results equal to `iree-compile`'s with default flags.
    pub float_semantics: FloatSemantics,
    /// What to compile for; `None` (the default): what the device needs
    /// (the CPU for `local-*`, the device's `sm_XY` for `cuda`, ...).
    pub target: Option<CompileTarget>,
    /// In [`CompileMode::Background`], the most queued signatures (of any
    /// functions) one compile takes together as one module; 1 compiles
    /// each alone. Default 8. A batch pays IREE's fixed cost per compile
    /// once (`cargo bench -p sheaf-integration --bench background`); each
    /// signature's result waits for its whole batch.
    pub batch_limit: usize,
    /// How long the process's exit (or the drop of the runtime's last
    /// handle) waits for the background compiles queued or running, so
    /// that what this process wanted compiled reaches the disk cache (and
    /// the remote cache) for the next one; only a runtime with such a
    /// cache waits. Default 10 s; zero never waits (the queued compiles
    /// are dropped). See [`JitRuntime`](crate::JitRuntime), "Exit".
    pub exit_wait: Duration,
    /// Whether SIGTERM and SIGINT finish the runtime as an exit does (the
    /// wait above, the profile) before they end the process, by the same
    /// signal (`iree_safe::exit_on_signals`; Linux). Taken only for a
    /// signal whose action is the default when the runtime starts: a
    /// program's own handler, or `SIG_IGN`, is left alone. Default on;
    /// `false` (`SHEAF_JIT_EXIT_ON_SIGNALS=off`) leaves both signals as
    /// they are.
    pub exit_on_signals: bool,
    /// A folder where each compile that runs the compiler writes what it
    /// was given and gave: the MLIR, the exact flags and target, a runnable
    /// `iree-compile` command, the artifact or the diagnostics (the
    /// README's "Seeing inside"; at most
    /// [`MAX_DUMPS`](crate::logging::MAX_DUMPS) per process). Default
    /// `None`: nothing is dumped.
    pub dump_dir: Option<std::path::PathBuf>,
}

/// Why a CPU target can never run here, if it cannot: a triple of another
/// architecture than this process's (its code does not load), or a CPU
/// name LLVM does not know for the architecture (every compile fails:
/// `iree_safe::compiler::known_cpus`).
fn cpu_target_problem(target: &CompileTarget) -> Option<String> {
    let CompileTarget::Cpu { cpu, triple } = target else {
        return None;
    };
    let canonical = |arch: &str| match arch {
        "amd64" => "x86_64".to_owned(),
        "arm64" => "aarch64".to_owned(),
        arch => arch.to_owned(),
    };
    let this = std::env::consts::ARCH;
    let arch = match triple {
        Some(triple) => canonical(triple.split('-').next().unwrap_or_default()),
        None => this.to_owned(),
    };
    if arch != this {
        return Some(format!(
            "a CPU target this {this} process can run: {arch} code does not load here (name \
             this process's triple, {}, or none)",
            iree_safe::compiler::process_triple()
        ));
    }
    let known = iree_safe::compiler::known_cpus(&arch)?;
    let named = ["host", "generic"].contains(&cpu.as_str()) || known.contains(&cpu.as_str());
    (!named).then(|| {
        format!(
            "a CPU LLVM knows for {arch}: `host`, `generic` or one of {} (`{cpu}` is not; \
             LLVM would compile for no CPU and fail every compile)",
            known.join(", ")
        )
    })
}

/// The in-process compiler, in words ([`crate::ConfigError::FeatureDisabled`]).
pub(super) const IN_PROCESS_COMPILER: &str = "in-process compiler";

impl Default for CompileSettings {
    fn default() -> Self {
        let mut options = CompileOptions::stablehlo();
        options.extra_flags = DEFAULT_EXTRA_FLAGS.iter().map(|f| (*f).into()).collect();
        CompileSettings {
            mode: CompileMode::default(),
            compiler: CompilerPreference::Auto,
            options,
            float_semantics: FloatSemantics::default(),
            target: None,
            batch_limit: 8,
            exit_wait: DEFAULT_EXIT_WAIT,
            exit_on_signals: true,
            dump_dir: None,
        }
    }
}

impl CompileSettings {
    /// Checks that a batch can hold a signature, and that a build without
    /// the `in-process-compiler` feature is not asked for that compiler.
    pub(super) fn validate(&self) -> Result<(), crate::ConfigError> {
        if !cfg!(feature = "in-process-compiler")
            && matches!(
                self.compiler,
                CompilerPreference::InProcess | CompilerPreference::Library(_)
            )
        {
            return Err(crate::ConfigError::FeatureDisabled {
                setting: "compile.compiler",
                part: IN_PROCESS_COMPILER,
                feature: "in-process-compiler",
            });
        }
        if let Err(error) = self.options.check_extra_flags() {
            let why = match error {
                iree_safe::compiler::CompileError::InvalidFlags { message, .. } => message,
                other => other.to_string(),
            };
            return Err(crate::ConfigError::invalid(
                "compile.options.extra_flags",
                format!("{:?}", self.options.extra_flags),
                format!("flags with which the compiler writes a module ({why})"),
            ));
        }
        if let Some(why) = self.target.as_ref().and_then(cpu_target_problem) {
            return Err(crate::ConfigError::invalid(
                "compile.target",
                self.target
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                why,
            ));
        }
        if self.batch_limit == 0 {
            return Err(crate::ConfigError::invalid(
                "compile.batch_limit",
                "0".to_owned(),
                "at least 1 (1 compiles each queued signature alone)",
            ));
        }
        Ok(())
    }
}
