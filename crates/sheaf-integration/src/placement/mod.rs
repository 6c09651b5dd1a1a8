//! Where compiled code runs, and what code it gets: the device the
//! configuration names, parsed once ([`DeviceSpec`], `device.rs`; its
//! settings, `settings.rs`), or for `auto` the first GPU the probe finds
//! (`probe.rs`); the target of the device that was opened (`target.rs`)
//! and the flags of its code (`code.rs`, with the float semantics); the
//! `local-task` device beside `local-sync` for large contractions
//! (`parallel.rs`, sized by `contraction.rs`); and the CPU runtime a
//! signature falls back on when the GPU cannot take it (`fallback.rs`).
//!
//! The target follows the device that was opened: `local-sync` and
//! `local-task` get CPU code (`llvm-cpu` for this process's CPU, plus
//! [`CPU_FLAGS`]); `cuda` and `vulkan` get code for what the device
//! reports; other drivers need their target named in the configuration.
//! When the device cannot be opened, or a GPU compile fails, the CPU is
//! used instead (see `DeviceSettings::cpu_fallback`).

mod code;
mod contraction;
mod device;
mod fallback;
mod parallel;
mod probe;
mod settings;
mod target;

use std::borrow::Cow;
use std::io::Write;
use std::num::NonZeroUsize;
use std::ops::Deref;

use iree_safe::compiler::{CompileOptions, CompileTarget, CompilerPreference};
use iree_safe::{Device, Runtime};
use jit_cache::ErrorChain;

use crate::error::{ConfigError, JitError};

use code::{callers_own, prepend, spec_reach_for, Code};
pub(crate) use code::{DEFAULT_EXTRA_FLAGS, TUNING_SPEC_FLAG};
use contraction::Work;
use device::CpuDriver;
use probe::Probed;

pub use code::{
    matmul_spec_reach, parallel_contraction, FloatSemantics, MatmulSpecReach,
    AMD_MATMUL_SPEC_REACH, AVX512_MATMUL_SPEC, CONTRACTION_FLAGS, CPU_FLAGS,
    INTEL_MATMUL_SPEC_REACH, LARGE_CONTRACTION, PARALLEL_CONTRACTION, PARALLEL_CONTRACTION_AVX2,
};
pub(crate) use device::DeviceSpec;
pub(crate) use fallback::CpuFallback;
pub(crate) use parallel::ParallelCpu;
pub use settings::DeviceSettings;
pub(crate) use settings::DeviceSpecs;

/// A runtime and the options that compile for it, one set per float
/// semantics.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) runtime: Runtime,
    strict: Code,
    reassociate: Code,
    /// Which f32 matrix products get [`AVX512_MATMUL_SPEC`]: none off
    /// this host's AVX-512 CPU or under the caller's own flags.
    spec_reach: Option<MatmulSpecReach>,
}

impl Placement {
    /// Opens the device `devices` name (probing for `auto`), falling back
    /// to the CPU driver, with a warning, when it cannot be opened and the
    /// settings allow; a `local-task` device gets at most `workers`
    /// workers; its code is for the compiler of `compiler`.
    pub(crate) fn primary(
        devices: &DeviceSpecs,
        workers: Option<NonZeroUsize>,
        explicit: Option<&CompileTarget>,
        base: &CompileOptions,
        compiler: &CompilerPreference,
    ) -> Result<Placement, JitError> {
        let cpu = devices.cpu_fallback.as_ref();
        let probed;
        let device = match &devices.primary {
            DeviceSpec::Auto => match probe::probed() {
                Probed::Gpu(uri) => {
                    probed = DeviceSpec::named(uri);
                    &probed
                }
                Probed::Cpu { reasons } => {
                    let local_sync = DeviceSpec::local_sync();
                    let cpu = cpu.unwrap_or(&local_sync);
                    let warning = probe::cpu_warning(reasons, cpu.uri());
                    tracing::warn!(target: crate::log_targets::RUNTIME, fallback = %cpu.uri(), "{warning}");
                    return Placement::open(cpu, workers, explicit, base, compiler);
                }
            },
            device => device,
        };
        let error = match Placement::open(device, workers, explicit, base, compiler) {
            Ok(placement) => return Ok(placement),
            Err(error) => error,
        };
        match cpu {
            Some(cpu) if cpu != device => {
                let error = ErrorChain(&error);
                let (driver, fallback) = (device.uri(), cpu.uri());
                tracing::warn!(
                    target: crate::log_targets::RUNTIME,
                    %driver,
                    %fallback,
                    %error,
                    "cannot use the `{driver}` device ({error}); running on the CPU (`{fallback}`) instead",
                );
                Placement::open(cpu, workers, None, base, compiler)
            }
            _ => Err(error),
        }
    }

    /// Opens `device` (a `local-task` device with `workers` workers when
    /// given) and works out what to compile for it (`explicit` when given;
    /// `base` holds the input type and extra flags) with the compiler of
    /// `compiler`.
    pub(crate) fn open(
        device: &DeviceSpec,
        workers: Option<NonZeroUsize>,
        explicit: Option<&CompileTarget>,
        base: &CompileOptions,
        compiler: &CompilerPreference,
    ) -> Result<Placement, JitError> {
        match device {
            DeviceSpec::Auto => {
                return Err(JitError::Internal(
                    "`auto` is resolved by the probe before a device is opened".to_owned(),
                ))
            }
            DeviceSpec::Other { driver, .. } if driver == "metal" && !cfg!(target_os = "macos") => {
                return Err(JitError::Unsupported(
                    "the `metal` device exists only on macOS (Apple GPUs); on Linux run on \
                     `cuda`, `vulkan` or `auto`. Code for Metal still compiles here: \
                     CompileTarget::Metal"
                        .to_owned(),
                ));
            }
            _ => {}
        }
        let runtime = match workers {
            // `local-task` or `local-task://`: its one device.
            Some(workers) if device.is_whole_local_task() => {
                Runtime::with_device(Device::open_local_task(workers)?)?
            }
            _ => Runtime::new(device.uri())?,
        };
        let target = match explicit {
            Some(target) => target.clone(),
            None => target::target_for(device, runtime.device(), compiler)?,
        };
        Ok(Placement::new(runtime, target, base))
    }

    fn new(runtime: Runtime, target: CompileTarget, base: &CompileOptions) -> Placement {
        let code = |semantics: FloatSemantics| {
            let mut options = base.clone();
            options.target = target.clone();
            if is_cpu(&options.target) {
                prepend(&mut options, &[CPU_FLAGS, semantics.cpu_flags()].concat());
            }
            Code {
                target_identity: options.target_identity(),
                options,
            }
        };
        Placement {
            runtime,
            strict: code(FloatSemantics::Strict),
            reassociate: code(FloatSemantics::Reassociate),
            // Flags of the caller's own may contradict the spec (another
            // vector width, data tiling on: compiles that fail): they keep
            // the data tiling they had.
            spec_reach: spec_reach_for(&target).filter(|_| !callers_own(&base.extra_flags)),
        }
    }

    /// Checks that the caller's options (`base`) do not contradict this
    /// device's target: an extra flag that sets a target option to another
    /// value is refused at start, rather than by every compile.
    pub(crate) fn check_flags(&self, base: &CompileOptions) -> Result<(), ConfigError> {
        for semantics in [FloatSemantics::Strict, FloatSemantics::Reassociate] {
            if let Err(error) = self.code(semantics).options.checked_flags() {
                let why = match error {
                    iree_safe::compiler::CompileError::InvalidFlags { message, .. } => message,
                    other => other.to_string(),
                };
                return Err(ConfigError::invalid(
                    "compile.options.extra_flags",
                    format!("{:?}", base.extra_flags),
                    format!(
                        "flags that keep the device's target and the input type; name another \
                         target with CompileSettings::target ({why})"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The options (and their identity) that compile code here with
    /// `semantics`.
    pub(crate) fn code(&self, semantics: FloatSemantics) -> &Code {
        match semantics {
            FloatSemantics::Strict => &self.strict,
            FloatSemantics::Reassociate => &self.reassociate,
        }
    }

    /// A `local-task` device with at most `workers` workers beside this
    /// `local-sync` one, whose code is the same: the two pass tensors to
    /// each other as they are (`iree_safe::Device::open_beside`).
    pub(crate) fn beside(&self, workers: NonZeroUsize) -> Result<Placement, JitError> {
        let runtime = Runtime::with_device(self.device().open_beside(workers)?)?;
        Ok(Placement {
            runtime,
            ..self.clone()
        })
    }

    /// True when this is a `local-sync` device, which runs each call on
    /// the calling thread.
    pub(crate) fn is_local_sync(&self) -> bool {
        self.is_cpu()
            && matches!(
                DeviceSpec::named(self.device().uri()),
                DeviceSpec::Cpu {
                    driver: CpuDriver::LocalSync,
                    ..
                }
            )
    }

    /// The options that compile `module` here with `semantics`. On the
    /// CPU, a module of at least [`LARGE_CONTRACTION`] multiply-adds whose
    /// every contraction is an f32 matrix product within this host's
    /// [`MatmulSpecReach`] (when the caller adds no flags of their own)
    /// gets [`AVX512_MATMUL_SPEC`] without data tiling, from a private file
    /// that lives as long as the options (data tiling instead when that
    /// file cannot be written); otherwise, one whose largest matrix product
    /// reaches [`LARGE_CONTRACTION`] (or cannot be told) gets
    /// [`CONTRACTION_FLAGS`]. The choice follows from the module's text,
    /// which its disk key covers, and the host's CPU, which its target
    /// identity names, so the key needs no more.
    pub(crate) fn options_for(&self, module: &str, semantics: FloatSemantics) -> CodeOptions<'_> {
        let options = &self.code(semantics).options;
        let borrowed = CodeOptions {
            options: Cow::Borrowed(options),
            spec: None,
        };
        if !self.is_cpu() {
            return borrowed;
        }
        let contraction = match contraction::largest(module) {
            Work::None => return borrowed,
            Work::Known(contraction) => Some(contraction),
            Work::Unknown => None,
        };
        let spec = contraction.is_some_and(|contraction| {
            contraction.multiply_adds >= LARGE_CONTRACTION
                && contraction
                    .f32_products
                    .zip(self.spec_reach)
                    .is_some_and(|(products, reach)| reach.covers(products))
        });
        if !spec && contraction.is_some_and(|c| c.per_product < LARGE_CONTRACTION) {
            return borrowed;
        }
        let mut options = options.clone();
        if spec {
            match spec_file() {
                Ok((spec, flag)) => {
                    prepend(&mut options, &["--iree-opt-data-tiling=false", &flag]);
                    return CodeOptions {
                        options: Cow::Owned(options),
                        spec: Some(spec),
                    };
                }
                Err(error) => tracing::debug!(
                    target: crate::log_targets::COMPILE,
                    error = %ErrorChain(&error),
                    "cannot write the matmul tuning spec; compiling with data tiling"
                ),
            }
        }
        prepend(&mut options, CONTRACTION_FLAGS);
        CodeOptions {
            options: Cow::Owned(options),
            spec: None,
        }
    }

    /// True when the code runs on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        is_cpu(&self.strict.options.target)
    }

    pub(crate) fn device(&self) -> &Device {
        self.runtime.device()
    }
}

/// The options of one compile ([`Placement::options_for`]), and the file
/// of the tuning spec they name, removed when they are dropped.
#[derive(Debug)]
pub(crate) struct CodeOptions<'a> {
    options: Cow<'a, CompileOptions>,
    /// The tuning spec's file, removed when it drops.
    spec: Option<tempfile::TempPath>,
}

impl CodeOptions<'_> {
    /// The tuning spec of the runtime's own that the options name
    /// ([`AVX512_MATMUL_SPEC`]), if any.
    pub(crate) fn tuning_spec(&self) -> Option<&'static str> {
        self.spec.as_ref().map(|_| AVX512_MATMUL_SPEC)
    }
}

impl Deref for CodeOptions<'_> {
    type Target = CompileOptions;

    fn deref(&self) -> &CompileOptions {
        &self.options
    }
}

/// [`AVX512_MATMUL_SPEC`] in a new file of this user's (mode 0600, in the
/// temporary folder), and the flag that names it.
fn spec_file() -> std::io::Result<(tempfile::TempPath, String)> {
    let mut file = tempfile::Builder::new()
        .prefix("sheaf-jit-matmul-spec-")
        .suffix(".mlir")
        .tempfile()?;
    file.write_all(AVX512_MATMUL_SPEC.as_bytes())?;
    let path = file.into_temp_path();
    let flag = match path.to_str() {
        Some(path) => format!("{TUNING_SPEC_FLAG}{path}"),
        None => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the temporary folder's path is not UTF-8",
            ))
        }
    };
    Ok((path, flag))
}

fn is_cpu(target: &CompileTarget) -> bool {
    matches!(target, CompileTarget::Cpu { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc
    fn cpu_code_gets_the_measured_flags_before_the_callers() {
        let runtime = Runtime::new("local-sync").unwrap();
        let mut base = CompileOptions::stablehlo();
        base.extra_flags = vec!["--iree-opt-level=O3".into()];
        let placement = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &base);
        let flags = placement.code(FloatSemantics::Strict).options.flags();
        let position = |flag: &str| flags.iter().position(|f| f == flag).unwrap();
        assert!(position(CPU_FLAGS[0]) < position("--iree-opt-level=O3"));
        assert!(placement.is_cpu());
        let cuda = Placement::new(
            runtime,
            CompileTarget::Cuda {
                arch: "sm_80".into(),
            },
            &base,
        );
        assert!(!cuda
            .code(FloatSemantics::Reassociate)
            .options
            .flags()
            .iter()
            .any(|f| CPU_FLAGS.contains(&f.as_str()) || f.contains("reassociate")));
        assert!(!cuda.is_cpu());
    }

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc
    fn float_semantics_are_flags_of_cpu_code_and_part_of_its_identity() {
        let runtime = Runtime::new("local-sync").unwrap();
        let mut base = CompileOptions::stablehlo();
        base.extra_flags = vec!["--iree-opt-level=O3".into()];
        let cpu = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &base);
        let (strict, fast) = (
            cpu.code(FloatSemantics::Strict),
            cpu.code(FloatSemantics::Reassociate),
        );
        for (code, semantics) in [
            (strict, FloatSemantics::Strict),
            (fast, FloatSemantics::Reassociate),
        ] {
            let flags = code.options.flags();
            let flag = semantics.cpu_flags()[0];
            let at = flags.iter().position(|f| f == flag).expect(flag);
            assert!(
                at < flags
                    .iter()
                    .position(|f| f == "--iree-opt-level=O3")
                    .unwrap(),
                "the caller's flags come after (and win): {flags:?}"
            );
            assert_eq!(code.target_identity, code.options.target_identity());
        }
        assert_eq!(
            FloatSemantics::Strict.cpu_flags(),
            ["--iree-llvmcpu-reassociate-fp-reductions=false"]
        );
        assert_ne!(strict.target_identity, fast.target_identity);
        // GPU code has no such flag: one code for both.
        let cuda = Placement::new(
            runtime,
            CompileTarget::Cuda {
                arch: "sm_80".into(),
            },
            &base,
        );
        assert_eq!(
            cuda.code(FloatSemantics::Strict).target_identity,
            cuda.code(FloatSemantics::Reassociate).target_identity
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc, writes a file
    fn large_contractions_get_data_tiling_or_the_matmul_spec_on_the_cpu_only() {
        let runtime = Runtime::new("local-sync").unwrap();
        // The default settings' options: their extra flags are not the
        // caller's own.
        let mut base = CompileOptions::stablehlo();
        base.extra_flags = DEFAULT_EXTRA_FLAGS.iter().map(|f| (*f).into()).collect();
        let cpu = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &base);
        let matmul = |n: usize| {
            format!(
                "%c = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : \
                 (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>"
            )
        };
        let has = |options: &CompileOptions, wanted: &[&str]| {
            let flags = options.flags();
            wanted.iter().all(|flag| flags.iter().any(|f| f == flag))
        };
        let tiled = |placement: &Placement, module: &str| {
            has(
                &placement.options_for(module, FloatSemantics::Strict),
                CONTRACTION_FLAGS,
            )
        };
        let spec_path = |options: &CompileOptions| {
            options.flags().iter().find_map(|flag| {
                flag.strip_prefix("--iree-codegen-tuning-spec-path=")
                    .map(std::path::PathBuf::from)
            })
        };

        // A short f32 product: the spec on an AVX-512 host, in a file that
        // lives as long as the options; data tiling elsewhere.
        let reach = matmul_spec_reach();
        let options = cpu.options_for(&matmul(512), FloatSemantics::Strict);
        if reach.is_some() {
            assert!(has(&options, &["--iree-opt-data-tiling=false"]));
            assert!(!has(&options, CONTRACTION_FLAGS));
            let path = spec_path(&options).expect("the spec's flag");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), AVX512_MATMUL_SPEC);
            drop(options);
            assert!(!path.exists(), "{} outlived its compile", path.display());
        } else {
            assert!(has(&options, CONTRACTION_FLAGS));
            assert_eq!(spec_path(&options), None);
        }
        // What the spec does not win keeps data tiling everywhere.
        let transposed = matmul(512).replace("[1] x [0]", "[1] x [1]");
        let wide = matmul(512)
            .replace("512x512xf32>)", "512x2048xf32>)")
            .replace("-> tensor<512x512", "-> tensor<512x2048");
        let dynamic = matmul(512).replace("512x512xf32>)", "?x512xf32>)");
        for module in [&transposed, &wide, &dynamic] {
            let options = cpu.options_for(module, FloatSemantics::Strict);
            assert!(has(&options, CONTRACTION_FLAGS), "{module}");
            assert_eq!(spec_path(&options), None, "{module}");
        }
        assert!(!tiled(&cpu, &matmul(256)));
        assert!(!tiled(&cpu, "%y = stablehlo.logistic %x : tensor<4xf32>"));
        // A page-long row, and a batch of products each too small for data
        // tiling: as far as the CPU family's reach goes.
        let page = cpu.options_for(&matmul(1024), FloatSemantics::Strict);
        let page_in_reach = reach.is_some_and(|reach| reach.longest_row >= 1024);
        assert_eq!(spec_path(&page).is_some(), page_in_reach);
        assert_eq!(has(&page, CONTRACTION_FLAGS), !page_in_reach);
        let batched = "%c = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], \
                       contracting_dims = [2] x [1] : (tensor<8x256x256xf32>, \
                       tensor<8x256x256xf32>) -> tensor<8x256x256xf32>";
        let batched = cpu.options_for(batched, FloatSemantics::Strict);
        let batch_in_reach = reach.is_some_and(|reach| reach.batched);
        assert_eq!(spec_path(&batched).is_some(), batch_in_reach);
        assert!(!has(&batched, CONTRACTION_FLAGS));
        // Nor does code for which the caller adds flags of their own.
        let mut flagged = base.clone();
        flagged.extra_flags = vec![DEFAULT_EXTRA_FLAGS[0].into(), "--iree-opt-level=O2".into()];
        let flagged = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &flagged);
        assert!(tiled(&flagged, &matmul(512)));
        // Code for another CPU than the host's gets no spec.
        let other_cpu = Placement::new(
            runtime.clone(),
            CompileTarget::Cpu {
                cpu: "x86-64-v3".into(),
                triple: None,
            },
            &base,
        );
        assert!(tiled(&other_cpu, &matmul(512)));
        let cuda = Placement::new(
            runtime,
            CompileTarget::Cuda {
                arch: "sm_80".into(),
            },
            &base,
        );
        assert!(!tiled(&cuda, &matmul(512)));
        assert_eq!(
            spec_path(&cuda.options_for(&matmul(512), FloatSemantics::Strict)),
            None
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc
    fn a_worker_count_opens_local_task_with_it_and_is_ignored_elsewhere() {
        let open = |driver: &str| {
            Placement::open(
                &DeviceSpec::named(driver),
                NonZeroUsize::new(1),
                None,
                &CompileOptions::stablehlo(),
                &CompilerPreference::InProcess,
            )
            .unwrap()
        };
        for driver in ["local-task", "local-task://", "local-sync"] {
            let placement = open(driver);
            assert!(placement.is_cpu(), "{driver}");
            assert_eq!(
                placement
                    .device()
                    .query_i64("hal.device.id", device::driver_name(driver))
                    .unwrap(),
                1,
                "{driver}"
            );
        }
    }

    #[test]
    fn metal_off_macos_is_a_clear_error() {
        let error = Placement::open(
            &DeviceSpec::named("metal"),
            None,
            None,
            &CompileOptions::stablehlo(),
            &CompilerPreference::Auto,
        )
        .unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, JitError::Unsupported(_)), "{message}");
        assert!(message.contains("only on macOS"), "{message}");
        assert!(message.contains("CompileTarget::Metal"), "{message}");
    }
}
