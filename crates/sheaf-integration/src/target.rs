//! Where compiled code runs: a runtime on a device, and the compile options
//! that produce code for that device.
//!
//! The device is the configured driver or URI, or for `auto` the first GPU
//! the probe finds (`probe.rs`). The target follows the device that was
//! opened: `local-sync` and `local-task` get CPU code (`llvm-cpu` for this
//! process's CPU, plus [`CPU_FLAGS`]: `host` when the compiler runs on the
//! process's architecture, else the process's triple and a generic CPU, as
//! for an aarch64 process under qemu-user that compiles with the x86_64
//! `iree-compile`; see `CompileTarget::process_cpu`); `cuda` gets code for
//! the device's compute capability (`sm_XY`, asked of the device); `vulkan`
//! gets SPIR-V for IREE's portable baseline with the SPIR-V version and
//! capabilities the device reports ([`vulkan_target`]); other drivers need
//! their target named in the configuration. When the device cannot be
//! opened, or a GPU compile fails, the CPU is used instead (see
//! `DeviceSettings::cpu_fallback`).

use std::borrow::Cow;
use std::num::NonZeroUsize;

use iree_safe::compiler::{CompileOptions, CompileTarget, CompilerPreference};
use iree_safe::{Device, Runtime};

use crate::config::DeviceSettings;
use jit_cache::ErrorChain;

use crate::contraction::{self, Work};
use crate::error::JitError;
use crate::probe::{self, Probed};

/// Extra flags for all CPU code, chosen by measurement (`cargo bench -p
/// sheaf-integration --bench compile_breakdown`): without IREE's eager
/// evaluation of constants (a nested compile of the module's initializers)
/// a compile took 5–19 % less time (sigmoid 236 → 215 ms, softmax
/// 378 → 306 ms, `mlp_layer` 490 → 448 ms) and its code ran as fast; the
/// constants a JIT module holds are few and small, so evaluating them when
/// the module loads costs nothing measurable. See the sheaf-integration
/// README, "CPU flags".
pub const CPU_FLAGS: &[&str] = &["--iree-opt-const-eval=false"];

/// Flags for CPU code with a large contraction (or one whose size cannot be
/// told): IREE's data tiling and microkernels. Measured
/// (`compile_breakdown -- --tiling`): an `f32[512,512]` matmul runs 25 %
/// faster with them (1,749 → 1,315 µs on local-sync) and a 384³ one 17 %,
/// while up to 320³ the code runs as fast without them and each compile
/// takes ~190 ms more; so they are added from [`LARGE_CONTRACTION`]
/// multiply-adds on.
pub const CONTRACTION_FLAGS: &[&str] = &[
    "--iree-llvmcpu-enable-ukernels=all",
    "--iree-opt-data-tiling",
];

/// The multiply-adds (of the module's largest `dot_general`) from which CPU
/// code gets [`CONTRACTION_FLAGS`]: 2²⁵, between the 320³ matmul that gains
/// nothing and the 384³ that gains 17 %.
pub const LARGE_CONTRACTION: u64 = 1 << 25;

/// A runtime and the options that compile for it.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) runtime: Runtime,
    pub(crate) options: CompileOptions,
    /// `options.target_identity()`, computed once: part of every disk key.
    pub(crate) target_identity: String,
}

impl Placement {
    /// Opens the device `settings` name (probing for `auto`), falling back
    /// to the CPU driver, with a warning, when it cannot be opened and the
    /// settings allow; its code is for the compiler of `compiler`.
    pub(crate) fn primary(
        settings: &DeviceSettings,
        explicit: Option<&CompileTarget>,
        base: &CompileOptions,
        compiler: &CompilerPreference,
    ) -> Result<Placement, JitError> {
        let cpu = settings.cpu_fallback.as_deref();
        let workers = settings.cpu_workers;
        let driver = match settings.driver.as_str() {
            probe::AUTO => match probe::probed() {
                Probed::Gpu(uri) => uri.as_str(),
                Probed::Cpu { reasons } => {
                    let cpu = cpu.unwrap_or("local-sync");
                    let warning = probe::cpu_warning(reasons, cpu);
                    tracing::warn!(target: "sheaf_jit", fallback = %cpu, "{warning}");
                    return Placement::open(cpu, workers, explicit, base, compiler);
                }
            },
            driver => driver,
        };
        let error = match Placement::open(driver, workers, explicit, base, compiler) {
            Ok(placement) => return Ok(placement),
            Err(error) => error,
        };
        match cpu {
            Some(cpu) if cpu != driver => {
                let error = ErrorChain(&error);
                tracing::warn!(
                    target: "sheaf_jit",
                    %driver,
                    fallback = %cpu,
                    %error,
                    "cannot use the `{driver}` device ({error}); running on the CPU (`{cpu}`) instead",
                );
                Placement::open(cpu, workers, None, base, compiler)
            }
            _ => Err(error),
        }
    }

    /// Opens `driver` (a `local-task` device with `workers` workers when
    /// given) and works out what to compile for it (`explicit` when given;
    /// `base` holds the input type and extra flags) with the compiler of
    /// `compiler`.
    pub(crate) fn open(
        driver: &str,
        workers: Option<NonZeroUsize>,
        explicit: Option<&CompileTarget>,
        base: &CompileOptions,
        compiler: &CompilerPreference,
    ) -> Result<Placement, JitError> {
        if driver_name(driver) == "metal" && !cfg!(target_os = "macos") {
            return Err(JitError::Unsupported(
                "the `metal` device exists only on macOS (Apple GPUs); on Linux run on \
                 `cuda`, `vulkan` or `auto`. Code for Metal still compiles here: \
                 CompileTarget::Metal"
                    .to_owned(),
            ));
        }
        let runtime = match workers {
            // `local-task` or `local-task://`: its one device.
            Some(workers) if driver.trim_end_matches("://") == "local-task" => {
                Runtime::with_device(Device::open_local_task(workers)?)?
            }
            _ => Runtime::new(driver)?,
        };
        let target = match explicit {
            Some(target) => target.clone(),
            None => target_for(driver, runtime.device(), compiler)?,
        };
        Ok(Placement::new(runtime, target, base))
    }

    fn new(runtime: Runtime, target: CompileTarget, base: &CompileOptions) -> Placement {
        let mut options = CompileOptions {
            target,
            ..base.clone()
        };
        if is_cpu(&options.target) {
            prepend(&mut options, CPU_FLAGS);
        }
        Placement {
            runtime,
            target_identity: options.target_identity(),
            options,
        }
    }

    /// The options that compile `module` here: on the CPU, with
    /// [`CONTRACTION_FLAGS`] when the module's largest contraction reaches
    /// [`LARGE_CONTRACTION`] multiply-adds or cannot be told. They follow
    /// from the module's text, which its disk key covers, so the key needs
    /// no more.
    pub(crate) fn options_for(&self, module: &str) -> Cow<'_, CompileOptions> {
        let large = match contraction::largest(module) {
            Work::None => false,
            Work::Known(multiply_adds) => multiply_adds >= LARGE_CONTRACTION,
            Work::Unknown => true,
        };
        if !(large && self.is_cpu()) {
            return Cow::Borrowed(&self.options);
        }
        let mut options = self.options.clone();
        prepend(&mut options, CONTRACTION_FLAGS);
        Cow::Owned(options)
    }

    /// True when the code runs on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        is_cpu(&self.options.target)
    }

    pub(crate) fn device(&self) -> &Device {
        self.runtime.device()
    }
}

/// Puts `flags` before the options' extra flags, so that a caller's own
/// choice (later on the command line) wins.
fn prepend(options: &mut CompileOptions, flags: &[&str]) {
    let mut all: Vec<String> = flags.iter().map(|f| (*f).to_owned()).collect();
    all.append(&mut options.extra_flags);
    options.extra_flags = all;
}

fn is_cpu(target: &CompileTarget) -> bool {
    matches!(target, CompileTarget::Cpu { .. })
}

/// The driver of a driver name or device URI (`vulkan://GPU-…` → `vulkan`).
fn driver_name(driver: &str) -> &str {
    driver.split("://").next().unwrap_or(driver)
}

/// What the compiler of `compiler` must compile for the device `driver`
/// opened.
pub(crate) fn target_for(
    driver: &str,
    device: &Device,
    compiler: &CompilerPreference,
) -> Result<CompileTarget, JitError> {
    match driver_name(driver) {
        "local-sync" | "local-task" => Ok(CompileTarget::process_cpu(compiler)),
        "cuda" => {
            let major = device.query_i64("cuda.device", "compute_capability_major")?;
            let minor = device.query_i64("cuda.device", "compute_capability_minor")?;
            Ok(CompileTarget::Cuda {
                arch: format!("sm_{major}{minor}"),
            })
        }
        "vulkan" => vulkan_target(device),
        other => Err(JitError::Unsupported(format!(
            "cannot tell which code the `{other}` driver's device runs; name it with \
             CompileSettings::target (e.g. CompileTarget::Hip {{ arch: \"gfx942\" }})"
        ))),
    }
}

/// IREE's portable Vulkan target, the compiler's own default: every
/// Vulkan 1.1 device with compute runs its code.
pub(crate) const VULKAN_BASELINE: &str = "vp_android_baseline_2022";

/// SPIR-V for the opened Vulkan device: IREE's [`VULKAN_BASELINE`] target
/// with the SPIR-V version the device's Vulkan version guarantees and the
/// shader capabilities it enabled (asked of the device: IREE's Vulkan
/// driver answers `vulkan.device :: api_version` and `vulkan.feature ::
/// shader_*`, `iree/hal/drivers/vulkan/logical_device.c`). A device that
/// reports more than the baseline gets code that may use it (64-bit
/// floats and integers, 16- and 8-bit arithmetic).
pub(crate) fn vulkan_target(device: &Device) -> Result<CompileTarget, JitError> {
    let api = device.query_i64("vulkan.device", "api_version")?;
    // VK_MAKE_API_VERSION: major in bits 22..29, minor in 12..21.
    let (major, minor) = ((api >> 22) & 0x7f, (api >> 12) & 0x3ff);
    let spirv = match (major, minor) {
        (1, 0) => "v1.0",
        (1, 1) => "v1.3",
        (1, 2) => "v1.5",
        _ => "v1.6",
    };
    let mut features = vec![format!("spirv:{spirv}"), "cap:Shader".to_owned()];
    for (feature, capability) in [
        ("shader_float64", "Float64"),
        ("shader_float16", "Float16"),
        ("shader_int64", "Int64"),
        ("shader_int16", "Int16"),
        ("shader_int8", "Int8"),
    ] {
        if device.query_i64("vulkan.feature", feature)? == 1 {
            features.push(format!("cap:{capability}"));
        }
    }
    Ok(CompileTarget::Vulkan {
        target: VULKAN_BASELINE.to_owned(),
        features,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_code_gets_the_measured_flags_before_the_callers() {
        let runtime = Runtime::new("local-sync").unwrap();
        let base = CompileOptions {
            extra_flags: vec!["--iree-opt-level=O3".into()],
            ..CompileOptions::stablehlo()
        };
        let placement = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &base);
        let flags = placement.options.flags();
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
            .options
            .flags()
            .iter()
            .any(|f| CPU_FLAGS.contains(&f.as_str())));
        assert!(!cuda.is_cpu());
    }

    #[test]
    fn large_contractions_get_data_tiling_and_microkernels_on_the_cpu_only() {
        let runtime = Runtime::new("local-sync").unwrap();
        let base = CompileOptions::stablehlo();
        let cpu = Placement::new(runtime.clone(), CompileTarget::host_cpu(), &base);
        let matmul = |n: usize| {
            format!(
                "%c = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : \
                 (tensor<{n}x{n}xf32>, tensor<{n}x{n}xf32>) -> tensor<{n}x{n}xf32>"
            )
        };
        let tiled = |placement: &Placement, module: &str| {
            let flags = placement.options_for(module).flags();
            CONTRACTION_FLAGS
                .iter()
                .all(|flag| flags.iter().any(|f| f == flag))
        };
        assert!(tiled(&cpu, &matmul(512)));
        assert!(!tiled(&cpu, &matmul(256)));
        assert!(!tiled(&cpu, "%y = stablehlo.logistic %x : tensor<4xf32>"));
        assert!(tiled(
            &cpu,
            &matmul(512).replace("512x512xf32>)", "?x512xf32>)")
        ));
        let cuda = Placement::new(
            runtime,
            CompileTarget::Cuda {
                arch: "sm_80".into(),
            },
            &base,
        );
        assert!(!tiled(&cuda, &matmul(512)));
    }

    #[test]
    fn the_target_follows_the_driver() {
        let runtime = Runtime::new("local-sync").unwrap();
        let device = runtime.device();
        // The in-process compiler runs on this process's architecture.
        let compiler = &CompilerPreference::InProcess;
        assert_eq!(
            target_for("local-sync", device, compiler).unwrap(),
            CompileTarget::host_cpu()
        );
        assert_eq!(
            target_for("local-task://", device, compiler).unwrap(),
            CompileTarget::host_cpu()
        );
        // A CPU device cannot say which CUDA architecture or Vulkan
        // version it has.
        assert!(target_for("cuda", device, compiler).is_err());
        assert!(target_for("vulkan://GPU-0", device, compiler).is_err());
        let hip = target_for("hip", device, compiler).unwrap_err().to_string();
        assert!(hip.contains("CompileSettings::target"), "{hip}");
    }

    #[test]
    fn a_worker_count_opens_local_task_with_it_and_is_ignored_elsewhere() {
        let open = |driver: &str| {
            Placement::open(
                driver,
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
                    .query_i64("hal.device.id", driver_name(driver))
                    .unwrap(),
                1,
                "{driver}"
            );
        }
    }

    #[test]
    fn metal_off_macos_is_a_clear_error() {
        let error = Placement::open(
            "metal",
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

    #[test]
    fn cpu_code_is_for_this_process_whatever_the_compiler_runs_on() {
        let runtime = Runtime::new("local-sync").unwrap();
        let device = runtime.device();
        // The compiler the tests use: under qemu-user (`cargo xtask test
        // --aarch64`) an x86_64 iree-compile, which must be told the triple.
        let target = target_for("local-sync", device, &CompilerPreference::Auto).unwrap();
        assert_eq!(
            target,
            CompileTarget::process_cpu(&CompilerPreference::Auto)
        );
        let CompileTarget::Cpu { cpu, triple } = &target else {
            panic!("{target}");
        };
        match triple {
            None => assert_eq!(cpu, "host"),
            Some(triple) => {
                assert_eq!(*triple, iree_safe::compiler::process_triple());
                assert_eq!(cpu, iree_safe::compiler::GENERIC_CPU);
            }
        }
    }
}
