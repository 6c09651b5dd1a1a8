//! The bounds of the upload cache: device copies of host arrays that calls
//! pass again and again (see `upload.rs`).

/// How host arrays reach the device: imported without a copy where the
/// device can read them in place, else copied and the copies of reused
/// arrays cached, within these bounds (0 for either bound disables the
/// cache; imports need none).
///
/// ```
/// use sheaf_integration::{settings::UploadSettings, JitConfig};
///
/// let config = JitConfig::builder()
///     .uploads(|uploads| uploads.bytes = 64 << 20)
///     .build()?;
/// assert_eq!((config.uploads.entries, config.uploads.bytes), (4096, 64 << 20));
/// assert_eq!(UploadSettings::default().bytes, UploadSettings::DEVICE_SIZED);
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadSettings {
    /// Device copies kept. Default 4096 (the leaves of a large model's
    /// parameter tree; the bytes are the real bound).
    pub entries: usize,
    /// Their bytes. Default [`DEVICE_SIZED`](Self::DEVICE_SIZED): a quarter
    /// of the host's physical memory on CPU devices, 256 MiB on others.
    pub bytes: usize,
    /// Hand a host array to a CPU device without a copy when it can be
    /// (`iree_safe::Tensor::import_shared`: contiguous, 64-byte aligned).
    /// Default on.
    pub import: bool,
}

impl UploadSettings {
    /// A byte bound sized to the device when the runtime opens it: on CPU
    /// devices (`local-sync`, `local-task`), whose memory is the host's, a
    /// quarter of the host's physical memory (`MemTotal` of
    /// `/proc/meminfo`; 256 MiB where that cannot be read); on other
    /// devices 256 MiB, as IREE does not report a device's memory size.
    pub const DEVICE_SIZED: usize = usize::MAX;

    /// The bound when the device's memory is not known.
    pub const FALLBACK_BYTES: usize = 256 << 20;

    /// The byte bound for a device (`is_local`: a CPU device), resolving
    /// [`DEVICE_SIZED`](Self::DEVICE_SIZED).
    pub fn bytes_for(&self, is_local: bool) -> usize {
        if self.bytes != Self::DEVICE_SIZED {
            return self.bytes;
        }
        if !is_local {
            return Self::FALLBACK_BYTES;
        }
        host_memory_bytes().map_or(Self::FALLBACK_BYTES, |total| total / 4)
    }
}

impl Default for UploadSettings {
    fn default() -> Self {
        UploadSettings {
            entries: 4096,
            bytes: Self::DEVICE_SIZED,
            import: true,
        }
    }
}

/// The host's physical memory (`MemTotal` of `/proc/meminfo`).
fn host_memory_bytes() -> Option<usize> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_mem_total(&meminfo)
}

fn parse_mem_total(meminfo: &str) -> Option<usize> {
    let kib: usize = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc/meminfo
    fn the_default_bound_follows_the_device() {
        let settings = UploadSettings::default();
        assert_eq!(settings.bytes_for(false), 256 << 20);
        let cpu = settings.bytes_for(true);
        match host_memory_bytes() {
            Some(total) => assert_eq!(cpu, total / 4),
            None => assert_eq!(cpu, 256 << 20),
        }
        let fixed = UploadSettings {
            bytes: 1 << 20,
            ..settings
        };
        assert_eq!(
            (fixed.bytes_for(true), fixed.bytes_for(false)),
            (1 << 20, 1 << 20)
        );
    }

    #[test]
    fn mem_total_is_read_in_kib() {
        let meminfo = "MemTotal:       24576000 kB\nMemFree:         1000 kB\n";
        assert_eq!(parse_mem_total(meminfo), Some(24576000 * 1024));
        assert_eq!(parse_mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(parse_mem_total("MemTotal: lots\n"), None);
    }
}
