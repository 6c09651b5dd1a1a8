//! The `auto` device: the first GPU this process can run on, in Sheaf's
//! order, else the CPU.
//!
//! Sheaf probes CUDA, then Metal, then Vulkan, then the CPU; each platform
//! has the drivers its runtime is built with (`cargo xtask build-iree`'s
//! defaults). On Linux `auto` tries:
//!
//! 1. `cuda`: the driver's first device (the driver loads `libcuda.so`; a
//!    machine without NVIDIA's driver fails here, cheaply);
//! 2. `vulkan`: the first device that is not a software rasterizer (Mesa's
//!    lavapipe or SwiftShader run "GPU" code on the CPU, slower than the
//!    CPU driver: they are used only when asked for by name, `vulkan`);
//! 3. the CPU: the configured CPU fallback, else `local-sync`.
//!
//! On macOS (Apple Silicon) it tries `metal`, the system's default Metal
//! device, then the CPU as above. That path is compiled and linked for
//! macOS from Linux (`cargo xtask darwin-link`): it has never run on a Mac.
//!
//! The probe runs once per process (opening drivers and listing devices
//! costs milliseconds); each runtime then opens the device it chose. When
//! it settles on the CPU it logs one warning that names what each GPU
//! driver said.

use std::sync::OnceLock;

use iree_safe::Device;

/// The GPU drivers `auto` tries, in order: Linux's.
#[cfg(not(target_os = "macos"))]
const GPU_DRIVERS: &[&str] = &["cuda", "vulkan"];
/// The GPU drivers `auto` tries, in order: macOS's.
#[cfg(target_os = "macos")]
const GPU_DRIVERS: &[&str] = &["metal"];

/// What the probe found: a GPU's URI, or why each GPU driver was passed over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Probed {
    Gpu(String),
    Cpu { reasons: Vec<String> },
}

/// A device a driver listed, as the probe weighs it.
#[derive(Debug)]
struct Candidate {
    uri: String,
    name: String,
    software: bool,
}

/// The process's probe, run on first use.
pub(crate) fn probed() -> &'static Probed {
    static PROBED: OnceLock<Probed> = OnceLock::new();
    PROBED.get_or_init(|| {
        choose(GPU_DRIVERS.iter().map(|&driver| {
            let listing = Device::available(driver).map_err(|e| e.to_string());
            let candidates = listing.map(|devices| {
                devices
                    .into_iter()
                    .map(|d| Candidate {
                        uri: d.uri(),
                        software: d.kind.is_software(),
                        name: d.name,
                    })
                    .collect()
            });
            (driver, candidates)
        }))
    })
}

/// The first device of the first driver (in `listings`' order) that is
/// not software; or the reasons none was chosen.
fn choose<'a>(
    listings: impl IntoIterator<Item = (&'a str, Result<Vec<Candidate>, String>)>,
) -> Probed {
    let mut reasons = Vec::new();
    for (driver, listing) in listings {
        match listing {
            Err(error) => reasons.push(format!("{driver}: {}", first_line(&error))),
            Ok(devices) => match devices.iter().find(|d| !d.software) {
                Some(device) => return Probed::Gpu(device.uri.clone()),
                None if devices.is_empty() => reasons.push(format!("{driver}: no devices")),
                None => reasons.push(format!(
                    "{driver}: only software devices ({}; name `{driver}` to use one)",
                    devices
                        .iter()
                        .map(|d| d.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
        }
    }
    Probed::Cpu { reasons }
}

/// The one warning `auto` logs when it settles on the CPU driver `cpu`.
pub(crate) fn cpu_warning(reasons: &[String], cpu: &str) -> String {
    format!(
        "no GPU to run on ({}); running on the CPU (`{cpu}`)",
        reasons.join("; ")
    )
}

/// IREE's messages carry a source location and, after `; `, annotations;
/// the first clause says what failed.
fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(driver: &str, name: &str, software: bool) -> Candidate {
        Candidate {
            uri: format!("{driver}://GPU-{name}"),
            name: name.into(),
            software,
        }
    }

    fn unavailable(what: &str) -> Result<Vec<Candidate>, String> {
        Err(what.to_owned())
    }

    #[test]
    fn the_first_hardware_device_of_the_first_driver_wins() {
        let probed = choose([
            ("cuda", unavailable("libcuda.so not available")),
            (
                "vulkan",
                Ok(vec![
                    device("vulkan", "llvmpipe", true),
                    device("vulkan", "rtx", false),
                ]),
            ),
        ]);
        assert_eq!(probed, Probed::Gpu("vulkan://GPU-rtx".into()));
        let cuda_first = choose([
            ("cuda", Ok(vec![device("cuda", "h100", false)])),
            ("vulkan", Ok(vec![device("vulkan", "rtx", false)])),
        ]);
        assert_eq!(cuda_first, Probed::Gpu("cuda://GPU-h100".into()));
    }

    #[test]
    fn software_devices_are_skipped_and_every_reason_is_kept() {
        let probed = choose([
            ("cuda", unavailable("libcuda.so not available\nmore")),
            ("vulkan", Ok(vec![device("vulkan", "llvmpipe", true)])),
        ]);
        let Probed::Cpu { reasons } = probed else {
            panic!("{probed:?}")
        };
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons[0].starts_with("cuda: "), "{reasons:?}");
        assert!(!reasons[0].contains("more"), "{reasons:?}");
        assert_eq!(
            reasons[1],
            "vulkan: only software devices (llvmpipe; name `vulkan` to use one)"
        );
        assert_eq!(
            cpu_warning(&reasons, "local-sync"),
            format!(
                "no GPU to run on ({}; {}); running on the CPU (`local-sync`)",
                reasons[0], reasons[1]
            )
        );
        let empty = choose([("vulkan", Ok(Vec::new()))]);
        assert_eq!(
            empty,
            Probed::Cpu {
                reasons: vec!["vulkan: no devices".into()]
            }
        );
    }
}
