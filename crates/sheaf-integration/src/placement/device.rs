//! Which device the configuration names, parsed once: [`DeviceSpec`]. The
//! rest of the crate matches on it instead of comparing driver names.

use crate::error::ConfigError;

/// What [`DeviceSettings::driver`](crate::settings::DeviceSettings::driver) and
/// [`DeviceSettings::cpu_fallback`](crate::settings::DeviceSettings::cpu_fallback)
/// may name, in words (for errors).
pub(crate) const EXPECTED: &str =
    "`auto`, `local-sync`, `local-task`, `vulkan`, `cuda`, `metal` or a device URI";

/// A device the configuration names: `auto`, a CPU driver, or any other
/// IREE driver or device URI (opened as given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DeviceSpec {
    /// `auto`: the first GPU the probe finds (`probe.rs`), else the CPU
    /// fallback.
    Auto,
    /// A CPU driver, `local-sync` or `local-task` (or a URI of one); its
    /// code is CPU code for this process.
    Cpu {
        /// Which of the two.
        driver: CpuDriver,
        /// As the configuration names it (`local-task`, `local-task://`).
        uri: String,
    },
    /// Another driver (`cuda`, `vulkan`, `hip`, `metal`) or a device URI
    /// (`vulkan://GPU-<uuid>`), opened as named.
    Other {
        /// The driver part of `uri` (`vulkan` for `vulkan://GPU-0`).
        driver: String,
        /// As the configuration names it.
        uri: String,
    },
}

/// IREE's two CPU drivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CpuDriver {
    /// Runs each call on the calling thread.
    LocalSync,
    /// Runs a dispatch's workgroups on worker threads.
    LocalTask,
}

impl DeviceSpec {
    /// Parses the value of `setting` (a configuration field, for the
    /// error): `auto`, or a driver name or URI.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Invalid`] for an empty name, or one that is only a
    /// scheme (`://…`).
    pub(crate) fn parse(setting: &'static str, text: &str) -> Result<DeviceSpec, ConfigError> {
        if driver_name(text).is_empty() {
            return Err(ConfigError::invalid(setting, text.to_owned(), EXPECTED));
        }
        Ok(DeviceSpec::named(text))
    }

    /// `local-sync`, the CPU driver of last resort.
    pub(crate) fn local_sync() -> DeviceSpec {
        DeviceSpec::named("local-sync")
    }

    /// The device `uri` names (a driver, a device URI, or `auto`), as IREE
    /// or the configuration gives it.
    pub(crate) fn named(uri: &str) -> DeviceSpec {
        let driver = driver_name(uri);
        let uri = uri.to_owned();
        match driver {
            "auto" if uri == "auto" => DeviceSpec::Auto,
            "local-sync" => DeviceSpec::Cpu {
                driver: CpuDriver::LocalSync,
                uri,
            },
            "local-task" => DeviceSpec::Cpu {
                driver: CpuDriver::LocalTask,
                uri,
            },
            driver => DeviceSpec::Other {
                driver: driver.to_owned(),
                uri,
            },
        }
    }

    /// The name the device is opened with (`auto` for the probe).
    pub(crate) fn uri(&self) -> &str {
        match self {
            DeviceSpec::Auto => "auto",
            DeviceSpec::Cpu { uri, .. } | DeviceSpec::Other { uri, .. } => uri,
        }
    }

    /// True for `local-task` named without a device (`local-task` or
    /// `local-task://`): the one device a worker count applies to.
    pub(crate) fn is_whole_local_task(&self) -> bool {
        matches!(self, DeviceSpec::Cpu { driver: CpuDriver::LocalTask, uri }
            if uri.trim_end_matches("://") == "local-task")
    }
}

/// The driver of a driver name or device URI (`vulkan://GPU-…` → `vulkan`).
pub(crate) fn driver_name(uri: &str) -> &str {
    uri.split("://").next().unwrap_or(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_once_into_what_they_mean() {
        let parse = |text: &str| DeviceSpec::parse("device.driver", text).unwrap();
        assert_eq!(parse("auto"), DeviceSpec::Auto);
        assert!(matches!(
            parse("local-sync"),
            DeviceSpec::Cpu {
                driver: CpuDriver::LocalSync,
                ..
            }
        ));
        for whole in ["local-task", "local-task://"] {
            assert!(parse(whole).is_whole_local_task(), "{whole}");
        }
        assert!(!parse("local-task://0").is_whole_local_task());
        assert!(!parse("local-sync").is_whole_local_task());
        let gpu = parse("vulkan://GPU-0");
        assert_eq!(gpu.uri(), "vulkan://GPU-0");
        assert!(matches!(&gpu, DeviceSpec::Other { driver, .. } if driver == "vulkan"));
    }

    #[test]
    fn an_empty_name_is_a_config_error_naming_the_setting() {
        for text in ["", "://x"] {
            let error = DeviceSpec::parse("device.cpu_fallback", text).unwrap_err();
            assert!(error.to_string().contains("device.cpu_fallback"), "{error}");
        }
    }
}
