//! Where compiled code runs: a runtime on a device, and the compile options
//! that produce code for that device.
//!
//! The target follows the device: `local-sync` and `local-task` get CPU
//! code (`llvm-cpu`, this machine's CPU, plus [`CPU_FLAGS`]); `cuda` gets
//! code for the device's compute capability (`sm_XY`, asked of the device);
//! `metal` gets Metal code; `vulkan` and `hip` need their target named in
//! the configuration. When the device cannot be opened, or a GPU compile
//! fails, the CPU is used instead (see `JitConfig::cpu_fallback`).

use iree_safe::compiler::{CompileOptions, CompileTarget};
use iree_safe::{Device, Runtime};

use crate::error::JitError;

/// Extra flags for CPU code, chosen by measurement (`cargo bench -p
/// sheaf-integration --bench cpu_flags`): with IREE's data tiling and
/// microkernels, an `f32[512,512]` matmul took 11–14 % less time per call on
/// local-sync and 34–36 % less on local-task on the 2-core development
/// machine, and compiled in ~45 % more time (once per signature); a small
/// elementwise module ran and compiled as fast as without them. Data tiling
/// alone, or `--iree-opt-level=O3`, gained less. See the sheaf-integration
/// README, "CPU flags".
pub const CPU_FLAGS: &[&str] = &[
    "--iree-llvmcpu-enable-ukernels=all",
    "--iree-opt-data-tiling",
];

/// A runtime and the options that compile for it.
#[derive(Debug, Clone)]
pub(crate) struct Placement {
    pub(crate) runtime: Runtime,
    pub(crate) options: CompileOptions,
    /// `options.target_identity()`, computed once: part of every disk key.
    pub(crate) target_identity: String,
}

impl Placement {
    /// Opens `driver` and works out what to compile for it (`explicit`
    /// when given; `base` holds the input type and extra flags).
    pub(crate) fn open(
        driver: &str,
        explicit: Option<&CompileTarget>,
        base: &CompileOptions,
    ) -> Result<Placement, JitError> {
        let runtime = Runtime::new(driver)?;
        let target = match explicit {
            Some(target) => target.clone(),
            None => target_for(driver, runtime.device())?,
        };
        Ok(Placement::new(runtime, target, base))
    }

    fn new(runtime: Runtime, target: CompileTarget, base: &CompileOptions) -> Placement {
        let mut options = CompileOptions {
            target,
            ..base.clone()
        };
        if is_cpu(&options.target) {
            // The base flags come after, so a caller's own choice wins.
            let mut flags: Vec<String> = CPU_FLAGS.iter().map(|f| (*f).to_owned()).collect();
            flags.append(&mut options.extra_flags);
            options.extra_flags = flags;
        }
        Placement {
            runtime,
            target_identity: options.target_identity(),
            options,
        }
    }

    /// True when the code runs on the CPU.
    pub(crate) fn is_cpu(&self) -> bool {
        is_cpu(&self.options.target)
    }

    pub(crate) fn device(&self) -> &Device {
        self.runtime.device()
    }
}

fn is_cpu(target: &CompileTarget) -> bool {
    matches!(target, CompileTarget::Cpu { .. })
}

/// What to compile for the device `driver` opened.
pub(crate) fn target_for(driver: &str, device: &Device) -> Result<CompileTarget, JitError> {
    let name = driver.split("://").next().unwrap_or(driver);
    match name {
        "local-sync" | "local-task" => Ok(CompileTarget::host_cpu()),
        "cuda" => {
            let major = device.query_i64("cuda.device", "compute_capability_major")?;
            let minor = device.query_i64("cuda.device", "compute_capability_minor")?;
            Ok(CompileTarget::Cuda {
                arch: format!("sm_{major}{minor}"),
            })
        }
        "metal" => Ok(CompileTarget::Metal),
        other => Err(JitError::Unsupported(format!(
            "cannot tell which code the `{other}` driver's device runs; name it with \
             CompileSettings::target (e.g. CompileTarget::Vulkan {{ target: \"rdna3\" }})"
        ))),
    }
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
    fn the_target_follows_the_driver() {
        let runtime = Runtime::new("local-sync").unwrap();
        let device = runtime.device();
        assert_eq!(
            target_for("local-sync", device).unwrap(),
            CompileTarget::host_cpu()
        );
        assert_eq!(
            target_for("local-task://", device).unwrap(),
            CompileTarget::host_cpu()
        );
        // A CPU device cannot say which CUDA architecture it has.
        assert!(target_for("cuda", device).is_err());
        let vulkan = target_for("vulkan", device).unwrap_err().to_string();
        assert!(vulkan.contains("CompileSettings::target"), "{vulkan}");
    }
}
