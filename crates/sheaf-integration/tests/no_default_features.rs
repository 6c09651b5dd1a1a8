//! The build without the default features, as an application that wants
//! neither a disk cache nor a remote one gets it (`cargo test -p
//! sheaf-integration --no-default-features --test no_default_features`, a
//! step of `cargo xtask test`): compiled code runs from memory, and every
//! setting that asks for a cache this build leaves out is an error naming
//! the feature to enable, never ignored. With either feature on, this file
//! has no tests.

#![cfg(not(any(feature = "disk-cache", feature = "remote-cache")))]

mod support;

use std::ffi::OsString;

use sheaf_integration::settings::{DiskCacheFolder, ENV_VARIABLES};
use sheaf_integration::{
    reference, ConfigError, Dispatched, JitConfig, JitError, JitRuntime, Value,
};
use support::{array, assert_close, blocking};

/// The error of the configuration whose only variable is `name=value`.
fn refused(name: &'static str, value: &str) -> ConfigError {
    let value = OsString::from(value);
    let lookup = move |variable: &str| (variable == name).then(|| value.clone());
    match JitConfig::builder().apply_vars(lookup) {
        Ok(_) => panic!("{name} was taken by a build without its feature"),
        Err(error) => error,
    }
}

#[test]
fn a_runtime_without_disk_or_remote_cache_compiles_and_runs_from_memory() {
    let config = blocking().build().unwrap();
    assert_eq!(config.disk.folder, DiskCacheFolder::Disabled, "the default");
    let jit = JitRuntime::new(config).unwrap();
    let sigmoid = reference::sigmoid();
    let args = [Value::from(array(&[2, 3], 1))];
    let expected = reference::interpret_sigmoid(&args).unwrap();
    for call in ["first", "second"] {
        let Dispatched::Compiled(compiled) = jit.dispatch(&sigmoid, &args, &[]).unwrap() else {
            panic!("the {call} call did not run compiled");
        };
        assert_close(&compiled.outputs[0], &expected[0], call);
    }
    let stats = jit.stats();
    assert_eq!(
        (stats.total.compiles, stats.total.hits),
        (1, 1),
        "compiled once, then served from memory: {stats}"
    );
    assert!(jit.compiler().is_some(), "a compiler was loaded");
}

#[test]
fn a_variable_that_asks_for_a_left_out_cache_names_the_feature() {
    let disk = [
        "SHEAF_JIT_CACHE_DIR",
        "SHEAF_JIT_DISK_CACHE",
        "SHEAF_JIT_CACHE_MAX_BYTES",
    ];
    let remote: Vec<_> = ENV_VARIABLES
        .iter()
        .map(|variable| variable.name)
        .filter(|name| name.starts_with("SHEAF_JIT_REMOTE_"))
        .collect();
    assert_eq!(remote.len(), 10, "{remote:?}");
    let asks = disk
        .iter()
        .map(|name| (*name, "disk cache", "disk-cache"))
        .chain(
            remote
                .iter()
                .map(|name| (*name, "remote cache", "remote-cache")),
        );
    for (name, part, feature) in asks {
        let value = match name {
            "SHEAF_JIT_DISK_CACHE" => "on",
            "SHEAF_JIT_REMOTE_MODE" => "read-only",
            _ => "1",
        };
        let error = refused(name, value);
        assert_eq!(
            error,
            ConfigError::FeatureDisabled {
                setting: name,
                part,
                feature
            }
        );
        let message = error.to_string();
        assert!(
            message.contains(name) && message.contains(&format!("`{feature}`")),
            "{message}"
        );
    }
    // The profile as JSON needs serde.
    assert_eq!(
        refused("SHEAF_JIT_PROFILE", "json"),
        ConfigError::FeatureDisabled {
            setting: "SHEAF_JIT_PROFILE",
            part: "profile as JSON",
            feature: "serde"
        }
    );
    // Signatures are not the remote cache's alone: bundles take them too.
    let key = format!("ed25519:{}", "ab".repeat(32));
    let trusted = move |name: &str| (name == "SHEAF_JIT_TRUSTED_KEYS").then(|| key.clone().into());
    let config = JitConfig::builder()
        .apply_vars(trusted)
        .unwrap()
        .build()
        .unwrap();
    assert!(config.trust.is_signed());
    let off = |name: &str| (name == "SHEAF_JIT_DISK_CACHE").then(|| "off".into());
    let config = JitConfig::builder()
        .apply_vars(off)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(config.disk.folder, DiskCacheFolder::Disabled);
}

#[test]
fn a_disk_cache_folder_is_refused_by_build_and_by_new() {
    let folder = DiskCacheFolder::Dir("/tmp/sheaf-jit".into());
    let expected = ConfigError::FeatureDisabled {
        setting: "disk.folder",
        part: "disk cache",
        feature: "disk-cache",
    };
    let error = JitConfig::builder()
        .disk(|disk| disk.folder = folder.clone())
        .build()
        .unwrap_err();
    assert_eq!(error, expected);
    let mut config = JitConfig::builder().build().unwrap();
    config.disk.folder = DiskCacheFolder::UserCache;
    match JitRuntime::new(config) {
        Err(JitError::Config(error)) => assert_eq!(error, expected),
        Err(error) => panic!("another error: {error}"),
        Ok(_) => panic!("a disk cache folder was ignored"),
    }
}

/// Without `in-process-compiler` (`--no-default-features` leaves it out
/// too), compiles run `iree-compile`, and asking for the in-process
/// compiler, by variable or by field, is an error naming the feature.
#[cfg(not(feature = "in-process-compiler"))]
mod without_the_in_process_compiler {
    use super::*;
    use iree_safe::compiler::{
        choose_compiler, CompileError, CompilerKind, CompilerPreference, TrustedCompilerLibrary,
    };

    fn left_out(setting: &'static str) -> ConfigError {
        ConfigError::FeatureDisabled {
            setting,
            part: "in-process compiler",
            feature: "in-process-compiler",
        }
    }

    #[test]
    fn the_variable_that_asks_for_it_names_the_feature() {
        let error = refused("SHEAF_JIT_COMPILER", "in-process");
        assert_eq!(error, left_out("SHEAF_JIT_COMPILER"));
        assert!(
            error.to_string().contains("`in-process-compiler`"),
            "{error}"
        );
        for taken in ["auto", "subprocess", "none"] {
            let value = OsString::from(taken);
            let lookup = |name: &str| (name == "SHEAF_JIT_COMPILER").then(|| value.clone());
            assert!(JitConfig::builder().apply_vars(lookup).is_ok(), "{taken}");
        }
    }

    #[test]
    fn a_field_that_asks_for_it_is_refused_by_build_and_by_new() {
        // SAFETY: never loaded: the build without the feature refuses it
        // before anything is loaded (that is what this test checks).
        let library = unsafe { TrustedCompilerLibrary::new_unchecked("/nonexistent.so") };
        for preference in [
            CompilerPreference::InProcess,
            CompilerPreference::Library(library),
        ] {
            let error = JitConfig::builder()
                .compile(|compile| compile.compiler = preference.clone())
                .build()
                .unwrap_err();
            assert_eq!(error, left_out("compile.compiler"));
            let mut config = JitConfig::builder().build().unwrap();
            config.compile.compiler = preference.clone();
            match JitRuntime::new(config) {
                Err(JitError::Config(error)) => assert_eq!(error, left_out("compile.compiler")),
                Err(error) => panic!("another error: {error}"),
                Ok(_) => panic!("{preference:?} was taken by a build without it"),
            }
            // iree-safe alone says the same, in its words.
            assert!(matches!(
                choose_compiler(preference),
                Err(CompileError::InProcessDisabled)
            ));
        }
    }

    #[test]
    fn auto_compiles_with_iree_compile() {
        let choice = choose_compiler(CompilerPreference::Auto).unwrap();
        assert_eq!(choice.kind, CompilerKind::Subprocess, "{}", choice.reason);
    }
}
