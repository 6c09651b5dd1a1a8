//! The HAL drivers this build links, from the crate's cargo features
//! (README.md, "Cargo features"):
//!
//! - `platform-gpu` (default): the GPU drivers of the target's platform
//!   (`drivers::platform_gpu`: Vulkan and, when its headers are found, CUDA
//!   on Linux; Metal on macOS);
//! - `vulkan`, `cuda`, `metal`: that driver, required: a build that cannot
//!   have it fails with one line saying why and what to install; on a
//!   system that does not build the driver (Metal on Linux, Vulkan and CUDA
//!   on macOS) the feature does nothing, so that a dependent can name the
//!   drivers of all its platforms at once;
//! - the CPU drivers `local-sync` and `local-task`, always.
//!
//! A build from source builds what is chosen here; an install (`IREE_DIR`,
//! or the workspace's `cargo xtask build-iree`) must hold every required
//! driver, and links whatever else it has.

use crate::cuda_headers::{self, CudaHeaders};
use crate::{drivers, env};

/// The drivers the features ask for.
#[derive(Debug)]
pub(crate) struct Wanted {
    /// Rust's `target_os` of the build.
    target_os: String,
    /// Drivers named by their own feature.
    required: Vec<&'static str>,
    /// Whether `platform-gpu` is on.
    platform_gpu: bool,
}

/// What a build from source builds.
#[derive(Debug)]
pub(crate) struct SourceDrivers {
    /// The drivers, CPU ones first.
    pub(crate) drivers: Vec<&'static str>,
    /// Where CUDA's headers are, when `cuda` is among them.
    pub(crate) cuda: Option<CudaHeaders>,
}

impl Wanted {
    /// The features of this build, for its target.
    pub(crate) fn from_features() -> Self {
        let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        let feature = |driver: &str| {
            env::cfg_is_set(&format!(
                "CARGO_FEATURE_{}",
                driver.replace('-', "_").to_uppercase()
            ))
        };
        // A driver of another system's is no driver of this build: a
        // dependent names the features of all its platforms at once.
        let required: Vec<&'static str> = ["vulkan", "cuda", "metal"]
            .into_iter()
            .filter(|driver| feature(driver) && drivers::buildable(&target_os).contains(driver))
            .collect();
        Wanted {
            target_os,
            required,
            platform_gpu: feature("platform-gpu"),
        }
    }

    /// The drivers to build from source, with CUDA's headers if CUDA is
    /// one of them: fails when `cuda` is required and no headers are found.
    pub(crate) fn for_source(&self) -> Result<SourceDrivers, String> {
        let cuda_headers =
            || cuda_headers::find(env::path("IREE_CUDA_DEPS_DIR"), env::path("CUDA_PATH"));
        let mut chosen: Vec<&'static str> = drivers::CPU.to_vec();
        let mut cuda = None;
        let platform = if self.platform_gpu {
            drivers::platform_gpu(&self.target_os)
        } else {
            &[]
        };
        for driver in drivers::ALL {
            let required = self.required.contains(&driver);
            if !required && !platform.contains(&driver) || chosen.contains(&driver) {
                continue;
            }
            if driver == "cuda" {
                match cuda_headers() {
                    Some(headers) => cuda = Some(headers),
                    None if required => {
                        return Err(format!(
                            "iree-sys: the `cuda` feature needs the CUDA headers (cuda.h), and \
                             none were found in {}; install the CUDA toolkit (NVIDIA's \
                             `cuda-toolkit` package) or set CUDA_PATH, or leave the feature off",
                            cuda_headers::SEARCHED
                        ))
                    }
                    // `platform-gpu` takes CUDA only where its headers are.
                    None => continue,
                }
            }
            chosen.push(driver);
        }
        Ok(SourceDrivers {
            drivers: chosen,
            cuda,
        })
    }

    /// Fails when the install described by `origin`, holding `drivers`
    /// (`None`: it does not say), lacks a driver that a feature requires.
    pub(crate) fn check_install(
        &self,
        drivers: &Option<Vec<String>>,
        origin: &str,
    ) -> Result<(), String> {
        let Some(drivers) = drivers else {
            return match self.required.as_slice() {
                [] => Ok(()),
                required => Err(format!(
                    "iree-sys: the `{}` feature asks for a driver, and {origin} has no \
                     manifest.json to say which drivers it was built with; use an install of \
                     `cargo xtask build-iree`, or unset IREE_DIR to build one from source",
                    required.join("`, `")
                )),
            };
        };
        let missing: Vec<&str> = self
            .required
            .iter()
            .copied()
            .filter(|driver| !drivers.iter().any(|d| d == driver))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let mut rebuild: Vec<&str> = drivers.iter().map(String::as_str).collect();
        rebuild.extend(&missing);
        Err(format!(
            "iree-sys: the `{}` feature asks for a driver that {origin} was built without (it \
             has {}); build an install with it (`cargo xtask build-iree --drivers {}` in this \
             crate's repository, which also makes it the workspace's install), point IREE_DIR \
             at one, or leave the feature off",
            missing.join("`, `"),
            drivers.join(", "),
            rebuild.join(",")
        ))
    }
}

/// Announces the drivers linked to dependents (`DEP_IREE_DRIVERS`) and to
/// the crate (`build_info::DRIVERS`).
pub(crate) fn emit(drivers: &[impl AsRef<str>]) {
    let list: Vec<&str> = drivers.iter().map(AsRef::as_ref).collect();
    let list = list.join(",");
    println!("cargo:drivers={list}");
    println!("cargo:rustc-env=IREE_SYS_DRIVERS={list}");
}
