//! Which device runs the compiled code, and which CPU driver takes over
//! when it cannot.

use std::num::NonZeroUsize;

use crate::error::ConfigError;

use super::device::DeviceSpec;

/// The device the runtime opens, and its CPU fallback.
///
/// ```
/// use sheaf_integration::JitConfig;
///
/// let config = JitConfig::builder()
///     .device(|device| {
///         device.driver = "cuda".into();
///         device.cpu_fallback = None;
///     })
///     .build()?;
/// assert_eq!(config.device.driver, "cuda");
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceSettings {
    /// `auto`, an IREE driver (`local-sync`, `local-task`, `vulkan`,
    /// `cuda`) or a device URI (`vulkan://GPU-<uuid>`). Default `auto`:
    /// the first GPU found, in Sheaf's order (CUDA, then Vulkan, skipping
    /// software Vulkan devices such as Mesa's lavapipe unless `vulkan` is
    /// named), else the CPU fallback (or `local-sync` when it is `None`),
    /// with one warning naming why each GPU driver was passed over. It is
    /// the default because it is Sheaf's: a program written against the
    /// defaults runs on the machine's GPU where there is one, and on a
    /// machine without one it is exactly `local-sync`.
    pub driver: String,
    /// The CPU driver to use when the device cannot be opened, or when a
    /// signature does not compile for the GPU; `None` makes both errors.
    /// Default `local-sync`.
    pub cpu_fallback: Option<String>,
    /// The most worker threads a `local-task` device (as the driver or
    /// the CPU fallback) gets: IREE makes one per physical core of the
    /// calling thread's NUMA node, each pinned to its core, up to this
    /// (`iree_safe::Device::open_local_task`); `None` keeps IREE's cap of
    /// 64. Other drivers have no workers and ignore it. Default `None`.
    ///
    /// `local-task` runs a dispatch's workgroups on its workers, so large
    /// calls use several cores, but each call wakes them: tiny calls are
    /// several times slower there than on the single-threaded
    /// `local-sync`. The repository's `docs/measurements.md` ("CPU flags and
    /// what a compile costs") has the measurements (`cargo bench -p
    /// sheaf-integration --bench cpu_flags`).
    pub cpu_workers: Option<NonZeroUsize>,
    /// When the code runs on `local-sync`: the most workers of a
    /// `local-task` device opened beside it (on first use) for code whose
    /// largest contraction reaches
    /// [`PARALLEL_CONTRACTION`](crate::tuning::PARALLEL_CONTRACTION) multiply-adds,
    /// so that large matmuls use several cores while every other call
    /// stays on the calling thread. Tensors pass between the two devices
    /// as they are (both keep them in this process's memory). `None`, or
    /// one worker, runs everything on `local-sync`; other drivers ignore
    /// it. Default: the cores this process may use
    /// ([`std::thread::available_parallelism`]), `None` on one core.
    ///
    /// The repository's `docs/measurements.md` ("Where large contractions
    /// start") has the measurements.
    pub parallel_workers: Option<NonZeroUsize>,
    /// The most bytes of freed buffer memory kept for the next calls'
    /// results on CPU devices ([`iree_safe::BufferPool`]: blocks of
    /// 256 KiB and more, kept by size, the oldest released first), so that
    /// a call whose results are as large as the last one's takes no fresh
    /// pages. The pool is the process's: [`JitRuntime::new`](crate::JitRuntime::new)
    /// sets its capacity, the last runtime made deciding. `0` keeps
    /// nothing. Default 1 GiB
    /// ([`iree_safe::DEFAULT_BUFFER_POOL_CAPACITY`]).
    pub buffer_pool_bytes: usize,
}

impl Default for DeviceSettings {
    fn default() -> Self {
        DeviceSettings {
            driver: "auto".into(),
            cpu_fallback: Some("local-sync".into()),
            cpu_workers: None,
            parallel_workers: std::thread::available_parallelism()
                .ok()
                .filter(|cores| cores.get() > 1),
            buffer_pool_bytes: usize::try_from(iree_safe::DEFAULT_BUFFER_POOL_CAPACITY)
                .unwrap_or(usize::MAX),
        }
    }
}

/// The devices [`DeviceSettings`] names, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeviceSpecs {
    /// The device the runtime opens.
    pub(crate) primary: DeviceSpec,
    /// The CPU driver to fall back on (`None`: off).
    pub(crate) cpu_fallback: Option<DeviceSpec>,
}

impl DeviceSettings {
    /// The devices these settings name, parsed once.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for an empty driver, or a CPU fallback
    /// that is empty or `auto`.
    pub(crate) fn specs(&self) -> Result<DeviceSpecs, ConfigError> {
        let primary = DeviceSpec::parse("device.driver", &self.driver)?;
        let cpu_fallback = match self.cpu_fallback.as_deref() {
            None => None,
            Some(text) => match DeviceSpec::parse("device.cpu_fallback", text)? {
                DeviceSpec::Auto => {
                    return Err(ConfigError::invalid(
                        "device.cpu_fallback",
                        text.to_owned(),
                        "a CPU driver (`local-sync`, `local-task`) or `None`; `auto` is what \
                         falls back",
                    ))
                }
                spec => Some(spec),
            },
        };
        Ok(DeviceSpecs {
            primary,
            cpu_fallback,
        })
    }

    /// Checks that the driver and the CPU fallback parse.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        self.specs().map(drop)
    }
}
