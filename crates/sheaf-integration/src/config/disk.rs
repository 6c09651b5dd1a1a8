//! Where compiled artifacts are kept between processes, and how much of
//! them: the disk cache's folder and size bound.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use jit_store::StoreConfig;

use crate::error::ConfigError;

/// The folder name of the disk cache inside the user's cache directory.
pub const DEFAULT_CACHE_FOLDER: &str = "sheaf-jit";

/// The disk cache's folder inside a project ([`DiskCacheFolder::project`]),
/// next to Sheaf's own `__sheaf__/` files.
pub const PROJECT_CACHE_FOLDER: &str = "__sheaf__/jit-cache";

/// Where compiled artifacts are kept between processes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DiskCacheFolder {
    /// The user's cache directory: `$XDG_CACHE_HOME/sheaf-jit`, else
    /// `$HOME/.cache/sheaf-jit`; on macOS `$HOME/Library/Caches/sheaf-jit`
    /// (Apple's place for caches; `XDG_CACHE_HOME` is not read there). None
    /// when the variables it needs are not set. The default with the
    /// `disk-cache` feature.
    #[cfg_attr(feature = "disk-cache", default)]
    UserCache,
    /// This folder.
    Dir(PathBuf),
    /// No disk cache. The default without the `disk-cache` feature, and
    /// then the only folder [`JitConfigBuilder::build`](crate::JitConfigBuilder::build)
    /// takes.
    #[cfg_attr(not(feature = "disk-cache"), default)]
    Disabled,
}

impl DiskCacheFolder {
    /// The folder of the project at `root`: `root/__sheaf__/jit-cache`
    /// ([`PROJECT_CACHE_FOLDER`]).
    ///
    /// ```
    /// use std::path::Path;
    /// use sheaf_integration::settings::DiskCacheFolder;
    ///
    /// let folder = DiskCacheFolder::project("/work/app");
    /// assert_eq!(folder, DiskCacheFolder::Dir("/work/app/__sheaf__/jit-cache".into()));
    /// ```
    pub fn project(root: impl AsRef<Path>) -> Self {
        DiskCacheFolder::Dir(root.as_ref().join(PROJECT_CACHE_FOLDER))
    }
}

/// The artifact disk cache: its folder and size bound.
///
/// ```
/// use sheaf_integration::{settings::DiskCacheFolder, JitConfig};
///
/// let config = JitConfig::builder()
///     .disk(|disk| {
///         disk.folder = DiskCacheFolder::Dir("/tmp/jit".into());
///         disk.max_bytes = 64 << 20;
///     })
///     .build()?;
/// let store = config.disk.store_config().unwrap();
/// assert_eq!(store.directory, std::path::Path::new("/tmp/jit"));
/// # Ok::<(), sheaf_integration::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiskCacheSettings {
    /// Where the artifacts are kept. Default
    /// [`DiskCacheFolder::UserCache`] ([`DiskCacheFolder::Disabled`]
    /// without the `disk-cache` feature).
    pub folder: DiskCacheFolder,
    /// Bound on the disk cache's size, in bytes. Default 1 GiB.
    pub max_bytes: u64,
}

impl Default for DiskCacheSettings {
    fn default() -> Self {
        DiskCacheSettings {
            folder: DiskCacheFolder::default(),
            max_bytes: StoreConfig::DEFAULT_MAX_BYTES,
        }
    }
}

impl DiskCacheSettings {
    /// Where the disk cache lives under these settings, if anywhere: `None`
    /// when it is disabled, or when it should be in the user's cache
    /// directory and neither `XDG_CACHE_HOME` nor `HOME` is set (on macOS,
    /// `HOME`).
    pub fn store_config(&self) -> Option<StoreConfig> {
        self.store_config_on(std::env::consts::OS, |name| std::env::var_os(name))
    }

    /// [`Self::store_config`] on the system `os` (`std::env::consts::OS`)
    /// with the environment `var`.
    pub(super) fn store_config_on(
        &self,
        os: &str,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Option<StoreConfig> {
        let set = |name: &str| {
            var(name)
                .filter(|value| !value.is_empty())
                .map(PathBuf::from)
        };
        let directory = match &self.folder {
            DiskCacheFolder::Disabled => return None,
            DiskCacheFolder::Dir(dir) => dir.clone(),
            DiskCacheFolder::UserCache if os == "macos" => set("HOME")?
                .join("Library/Caches")
                .join(DEFAULT_CACHE_FOLDER),
            DiskCacheFolder::UserCache => set("XDG_CACHE_HOME")
                .or_else(|| set("HOME").map(|home| home.join(".cache")))?
                .join(DEFAULT_CACHE_FOLDER),
        };
        Some({
            let mut config = StoreConfig::at(directory);
            config.max_bytes = self.max_bytes;
            config
        })
    }

    /// Checks that the size bound is positive, and that a build without
    /// the `disk-cache` feature is not asked for a folder.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if !cfg!(feature = "disk-cache") && self.folder != DiskCacheFolder::Disabled {
            return Err(ConfigError::FeatureDisabled {
                setting: "disk.folder",
                part: "disk cache",
                feature: "disk-cache",
            });
        }
        if self.max_bytes == 0 {
            return Err(ConfigError::invalid(
                "disk.max_bytes",
                "0".to_owned(),
                "a positive size (or DiskCacheFolder::Disabled)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_cache_folder_follows_the_setting_and_the_user_directories() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(key, _)| *key == name)
                    .map(|(_, value)| OsString::from(value))
            }
        };
        // The default with the `disk-cache` feature.
        let default = DiskCacheSettings {
            folder: DiskCacheFolder::UserCache,
            ..DiskCacheSettings::default()
        };
        let both = vars(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]);
        let xdg = default.store_config_on("linux", both);
        assert_eq!(xdg.unwrap().directory, PathBuf::from("/x/sheaf-jit"));
        let home_only = vars(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]);
        let home = default.store_config_on("linux", home_only);
        assert_eq!(
            home.unwrap().directory,
            PathBuf::from("/h/.cache/sheaf-jit")
        );
        assert_eq!(default.store_config_on("linux", vars(&[])), None);
        // macOS: Apple's folder of caches, whatever XDG_CACHE_HOME says.
        for env in [both, home_only] {
            let mac = default.store_config_on("macos", env);
            assert_eq!(
                mac.unwrap().directory,
                PathBuf::from("/h/Library/Caches/sheaf-jit")
            );
        }
        let xdg_only = vars(&[("XDG_CACHE_HOME", "/x")]);
        assert_eq!(default.store_config_on("macos", xdg_only), None);
        let dir = DiskCacheSettings {
            folder: DiskCacheFolder::project("/p"),
            ..DiskCacheSettings::default()
        };
        let store = dir.store_config().unwrap();
        assert_eq!(
            (store.directory, store.max_bytes),
            (PathBuf::from("/p/__sheaf__/jit-cache"), 1 << 30)
        );
        let disabled = DiskCacheSettings {
            folder: DiskCacheFolder::Disabled,
            ..DiskCacheSettings::default()
        };
        assert_eq!(disabled.store_config(), None);
    }
}
