//! Which code a device runs: CPU code for this process on the CPU drivers,
//! `sm_XY` for the CUDA device's compute capability, SPIR-V for the Vulkan
//! device's version and capabilities.

use iree_safe::compiler::{CompileTarget, CompilerPreference};
use iree_safe::Device;

use crate::error::JitError;

use super::device::DeviceSpec;

/// What the compiler of `compiler` must compile for `device`, opened.
pub(crate) fn target_for(
    spec: &DeviceSpec,
    device: &Device,
    compiler: &CompilerPreference,
) -> Result<CompileTarget, JitError> {
    let driver = match spec {
        DeviceSpec::Cpu { .. } => return Ok(CompileTarget::process_cpu(compiler)),
        DeviceSpec::Auto => "auto",
        DeviceSpec::Other { driver, .. } => driver,
    };
    match driver {
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
    use iree_safe::Runtime;

    use super::*;

    #[test]
    fn the_target_follows_the_driver() {
        let runtime = Runtime::new("local-sync").unwrap();
        let device = runtime.device();
        // The in-process compiler runs on this process's architecture.
        let compiler = &CompilerPreference::InProcess;
        assert_eq!(
            target_for(&DeviceSpec::named("local-sync"), device, compiler).unwrap(),
            CompileTarget::host_cpu()
        );
        assert_eq!(
            target_for(&DeviceSpec::named("local-task://"), device, compiler).unwrap(),
            CompileTarget::host_cpu()
        );
        // A CPU device cannot say which CUDA architecture or Vulkan
        // version it has.
        assert!(target_for(&DeviceSpec::named("cuda"), device, compiler).is_err());
        assert!(target_for(&DeviceSpec::named("vulkan://GPU-0"), device, compiler).is_err());
        let hip = target_for(&DeviceSpec::named("hip"), device, compiler)
            .unwrap_err()
            .to_string();
        assert!(hip.contains("CompileSettings::target"), "{hip}");
    }

    #[test]
    fn cpu_code_is_for_this_process_whatever_the_compiler_runs_on() {
        let runtime = Runtime::new("local-sync").unwrap();
        let device = runtime.device();
        // The compiler the tests use: under qemu-user (`cargo xtask test
        // --aarch64`) an x86_64 iree-compile, which must be told the triple.
        let target = target_for(
            &DeviceSpec::named("local-sync"),
            device,
            &CompilerPreference::Auto,
        )
        .unwrap();
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
