//! The bounds of the upload cache: device copies of host arrays that calls
//! pass again and again (see `upload.rs`).

/// How many device copies of reused host arrays are kept, at most (0 for
/// either bound disables the upload cache).
///
/// ```
/// use sheaf_integration::JitConfig;
///
/// let config = JitConfig::builder()
///     .uploads(|uploads| uploads.bytes = 64 << 20)
///     .build()?;
/// assert_eq!((config.uploads.entries, config.uploads.bytes), (256, 64 << 20));
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UploadSettings {
    /// Device copies kept. Default 256.
    pub entries: usize,
    /// Their bytes. Default 256 MiB.
    pub bytes: usize,
}

impl Default for UploadSettings {
    fn default() -> Self {
        UploadSettings {
            entries: 256,
            bytes: 256 << 20,
        }
    }
}
