//! The table of variables applied to a configuration: each variable's
//! effect, its errors, and the order in which they apply.

use std::collections::HashMap;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;

use jit_cache::CachePolicy;
use jit_store::RemoteMode;

use super::*;
use crate::config::{CompileMode, FloatSemantics, SigningKeySource, TrustedKey};

fn from_os(vars: &[(&str, OsString)]) -> Result<JitConfig, ConfigError> {
    let vars: HashMap<&str, OsString> = vars.iter().cloned().collect();
    JitConfig::builder()
        .apply_vars(|name| vars.get(name).cloned())?
        .build()
}

fn from(vars: &[(&str, &str)]) -> Result<JitConfig, ConfigError> {
    let vars: Vec<(&str, OsString)> = vars.iter().map(|&(k, v)| (k, v.into())).collect();
    from_os(&vars)
}

/// A valid value of each variable that is not its default, and one it
/// refuses (`None`: any value is a valid path).
const SAMPLES: &[(&str, &str, Option<&[u8]>)] = &[
    ("SHEAF_JIT_DRIVER", "local-task", Some(b"\xff")),
    ("SHEAF_JIT_CAPACITY", "3", Some(b"eight")),
    ("SHEAF_JIT_MAX_ENTRIES", "100", Some(b"-1")),
    ("SHEAF_JIT_MAX_BYTES", "512M", Some(b"lots")),
    ("SHEAF_JIT_CACHE_POLICY", "lru-cool-down", Some(b"lru")),
    ("SHEAF_JIT_THRASH_WINDOW", "50", Some(b"1e3")),
    ("SHEAF_JIT_THRASH_THRESHOLD", "6", Some(b"six")),
    ("SHEAF_JIT_THRASH_COOL_DOWN", "9", Some(b"9.5")),
    ("SHEAF_JIT_THRASH_COOL_DOWN_CAP", "90", Some(b"lots")),
    ("SHEAF_JIT_COMPILE_MODE", "blocking", Some(b"async")),
    ("SHEAF_JIT_COMPILE_THREADS", "3", Some(b"many")),
    ("SHEAF_JIT_FAILED_RETRY", "7", Some(b"never")),
    ("SHEAF_JIT_DYNAMIC_DIMS", "off", Some(b"maybe")),
    ("SHEAF_JIT_DYNAMIC_DIMS_AFTER", "3", Some(b"x")),
    ("SHEAF_JIT_SPECIALIZE_HOT_SIZES", "off", Some(b"sometimes")),
    ("SHEAF_JIT_STATIC_SHAPES", "softmax", Some(b"soft\xffmax")),
    ("SHEAF_JIT_EXIT_WAIT", "0", Some(b"10s")),
    ("SHEAF_JIT_EXIT_ON_SIGNALS", "off", Some(b"later")),
    ("SHEAF_JIT_COMPILER", "in-process", Some(b"gpu")),
    ("SHEAF_JIT_FLOAT_SEMANTICS", "reassociate", Some(b"fast")),
    ("SHEAF_JIT_TARGET", "cpu:x86-64-v3", Some(b"x86-64-v3")),
    (
        "SHEAF_JIT_COMPILER_FLAGS",
        "--iree-opt-level=O2 '--a=b c'",
        Some(b"--a='b"),
    ),
    (
        "SHEAF_JIT_FUNCTION_CAPACITY",
        "softmax=2",
        Some(b"softmax=two"),
    ),
    ("SHEAF_JIT_CACHE_DIR", "/c", None),
    ("SHEAF_JIT_DISK_CACHE", "off", Some(b"bogus")),
    ("SHEAF_JIT_CACHE_MAX_BYTES", "64M", Some(b"1.5G")),
    ("SHEAF_JIT_CPU_FALLBACK", "off", Some(b"\xff")),
    ("SHEAF_JIT_CPU_WORKERS", "2", Some(b"0")),
    ("SHEAF_JIT_PARALLEL_WORKERS", "61", Some(b"0")),
    ("SHEAF_JIT_BUFFER_POOL_MAX_BYTES", "0", Some(b"lots")),
    ("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "1M", Some(b"big")),
    ("SHEAF_JIT_BUNDLES", "/a:/b", None),
    (
        "SHEAF_JIT_LOG",
        "warn,sheaf_jit::remote=debug",
        Some(b"sheaf_jit=loud"),
    ),
    ("SHEAF_JIT_DUMP_DIR", "/tmp/dumps", None),
    (crate::settings::TRACE_ENV, "1", Some(b"verbose")),
    ("SHEAF_JIT_PROFILE", "on", Some(b"loud")),
    ("SHEAF_JIT_REMOTE_CACHE", "redis://cache", Some(b"\xff")),
    ("SHEAF_JIT_REMOTE_SECRET_FILE", "/etc/secret", None),
    ("SHEAF_JIT_SIGNING_KEY_FILE", "/etc/signing-key", None),
    (
        "SHEAF_JIT_TRUSTED_KEYS",
        "/etc/trusted-keys",
        Some(b"ed25519:0123"),
    ),
    ("SHEAF_JIT_REMOTE_MODE", "read-only", Some(b"ro")),
    ("SHEAF_JIT_REMOTE_NAMESPACE", "staging", Some(b"prod:eu")),
    ("SHEAF_JIT_REMOTE_CA", "/etc/ca.pem", None),
    ("SHEAF_JIT_REMOTE_TIMEOUT", "50", Some(b"1s")),
    ("SHEAF_JIT_REMOTE_CONNECT_TIMEOUT", "20", Some(b"-5")),
    ("SHEAF_JIT_REMOTE_MAX_ENTRY", "8M", Some(b"big")),
    ("SHEAF_JIT_REMOTE_COOL_DOWN", "1500", Some(b"30s")),
    ("SHEAF_JIT_REMOTE_LEASE", "0", Some(b"10s")),
];

/// The variable's value applied to the defaults, unvalidated (a remote
/// cache alone lacks its secret).
fn applied(name: &str, value: OsString) -> Result<JitConfig, ConfigError> {
    let var = |wanted: &str| (wanted == name).then(|| value.clone());
    Ok(JitConfig::builder().apply_vars(var)?.config)
}

#[test]
fn every_variable_in_the_table_is_parsed_and_a_bad_value_names_it() {
    let names: Vec<&str> = ENV_VARIABLES.iter().map(|v| v.name).collect();
    let sampled: Vec<&str> = SAMPLES.iter().map(|(name, ..)| *name).collect();
    assert_eq!(
        names, sampled,
        "a sample per variable, in the table's order"
    );
    let defaults = format!("{:?}", JitConfig::default());
    for &(name, good, bad) in SAMPLES {
        let config = applied(name, good.into()).unwrap();
        // The log's variables are read when a runtime starts.
        if ![crate::settings::TRACE_ENV, "SHEAF_JIT_LOG"].contains(&name) {
            assert_ne!(
                format!("{config:?}"),
                defaults,
                "{name}={good} changes nothing"
            );
        }
        if let Some(bad) = bad {
            let bad = OsString::from_vec(bad.to_vec());
            let error = applied(name, bad.clone()).unwrap_err().to_string();
            let shown = bad.to_string_lossy();
            assert!(error.contains(&format!("{name}={shown} ")), "{error}");
            assert!(error.contains("expected"), "{error}");
        }
    }
}

#[test]
fn the_documented_defaults_are_the_defaults() {
    let defaults = format!("{:?}", JitConfig::default());
    for variable in ENV_VARIABLES {
        // `none`: unset; the cache folder's default is a description.
        if variable.default == "none" || variable.name == "SHEAF_JIT_CACHE_DIR" {
            continue;
        }
        let value = variable.default.trim_matches('`');
        let config = applied(variable.name, value.into()).unwrap();
        assert_eq!(format!("{config:?}"), defaults, "{}={value}", variable.name);
    }
}

#[test]
fn variables_override_the_defaults() {
    let config = from(&[
        ("SHEAF_JIT_DRIVER", "local-task"),
        ("SHEAF_JIT_CAPACITY", "3"),
        ("SHEAF_JIT_MAX_ENTRIES", "100"),
        ("SHEAF_JIT_MAX_BYTES", "512M"),
        ("SHEAF_JIT_CACHE_POLICY", "lru-cool-down"),
        ("SHEAF_JIT_COMPILE_MODE", "blocking"),
        ("SHEAF_JIT_COMPILE_THREADS", "3"),
        ("SHEAF_JIT_THRASH_WINDOW", "50"),
        ("SHEAF_JIT_THRASH_THRESHOLD", "6"),
        ("SHEAF_JIT_THRASH_COOL_DOWN", "9"),
        ("SHEAF_JIT_THRASH_COOL_DOWN_CAP", "90"),
        ("SHEAF_JIT_FAILED_RETRY", "7"),
        ("SHEAF_JIT_DYNAMIC_DIMS", "off"),
        ("SHEAF_JIT_DYNAMIC_DIMS_AFTER", "3"),
        ("SHEAF_JIT_SPECIALIZE_HOT_SIZES", "off"),
        ("SHEAF_JIT_STATIC_SHAPES", "softmax, mlp_layer,"),
        ("SHEAF_JIT_COMPILER", "subprocess"),
        ("SHEAF_JIT_FLOAT_SEMANTICS", "reassociate"),
        ("SHEAF_JIT_CACHE_DIR", "/c"),
        ("SHEAF_JIT_CACHE_MAX_BYTES", "64M"),
        ("SHEAF_JIT_TRACE", "1"),
        ("SHEAF_JIT_CPU_FALLBACK", "off"),
        ("SHEAF_JIT_CPU_WORKERS", "2"),
        ("SHEAF_JIT_PARALLEL_WORKERS", "off"),
        ("SHEAF_JIT_BUFFER_POOL_MAX_BYTES", "512M"),
        ("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "1M"),
        ("SHEAF_JIT_BUNDLES", "/a:/b"),
        ("SHEAF_JIT_PROFILE", "1"),
    ])
    .unwrap();
    assert!(config.profile_at_exit);
    assert_eq!(config.device.cpu_fallback, None);
    assert_eq!(config.device.cpu_workers, std::num::NonZeroUsize::new(2));
    assert_eq!(config.device.parallel_workers, None);
    assert_eq!(config.device.buffer_pool_bytes, 512 << 20);
    assert_eq!(config.uploads.bytes, 1 << 20);
    let auto = from(&[("SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES", "auto")]).unwrap();
    assert_eq!(
        auto.uploads.bytes,
        crate::config::UploadSettings::DEVICE_SIZED
    );
    assert_eq!(config.bundles, [PathBuf::from("/a"), PathBuf::from("/b")]);
    assert_eq!(config.device.driver, "local-task");
    let cache = &config.cache;
    assert_eq!(
        (
            cache.function_capacity,
            cache.max_total_entries,
            cache.max_total_bytes
        ),
        (3, 100, 512 << 20)
    );
    assert_eq!(
        (
            cache.thrash_window,
            cache.thrash_threshold,
            cache.thrash_cool_down
        ),
        (50, 6, 9)
    );
    assert_eq!(
        (cache.thrash_cool_down_cap, cache.failed_compile_retry_after),
        (90, 7)
    );
    assert_eq!(cache.policy, CachePolicy::LruCoolDown);
    assert_eq!((cache.dynamic_dims, cache.dynamic_dims_after), (false, 3));
    assert!(!cache.specialize_hot_sizes);
    let mut static_shapes: Vec<_> = cache.static_shape_functions.iter().collect();
    static_shapes.sort();
    assert_eq!(static_shapes, ["mlp_layer", "softmax"]);
    assert_eq!(
        (config.compile.mode, cache.compile_threads),
        (CompileMode::Blocking, 3)
    );
    assert_eq!(config.compile.compiler, CompilerPreference::Subprocess);
    assert_eq!(config.compile.float_semantics, FloatSemantics::Reassociate);
    assert_eq!(config.disk.folder, DiskCacheFolder::Dir("/c".into()));
    assert_eq!(config.disk.max_bytes, 64 << 20);
}

#[test]
fn the_remote_cache_needs_a_secret_and_takes_its_settings_from_variables() {
    let error = from(&[("SHEAF_JIT_REMOTE_CACHE", "redis://cache:6379")]).unwrap_err();
    assert_eq!(error, ConfigError::RemoteSecretMissing);
    assert!(error.to_string().contains("SHEAF_JIT_REMOTE_SECRET_FILE"));
    let config = from(&[
        ("SHEAF_JIT_REMOTE_CACHE", "redis://cache:6379"),
        ("SHEAF_JIT_REMOTE_SECRET_FILE", "/etc/sheaf/secret"),
        ("SHEAF_JIT_REMOTE_NAMESPACE", "staging-eu"),
        ("SHEAF_JIT_REMOTE_CA", "/etc/sheaf/ca.pem"),
        ("SHEAF_JIT_REMOTE_TIMEOUT", "50"),
        ("SHEAF_JIT_REMOTE_CONNECT_TIMEOUT", "20"),
        ("SHEAF_JIT_REMOTE_MAX_ENTRY", "8M"),
        ("SHEAF_JIT_REMOTE_COOL_DOWN", "1500"),
        ("SHEAF_JIT_REMOTE_LEASE", "2500"),
    ])
    .unwrap();
    let remote = &config.remote;
    let url = remote.url.as_ref().map(RemoteCacheUrl::as_str);
    assert_eq!(url, Some("redis://cache:6379"));
    assert!(matches!(
        &remote.secret,
        Some(RemoteSecret::File(path)) if path == Path::new("/etc/sheaf/secret")
    ));
    assert_eq!(
        (remote.timeouts.request, remote.timeouts.connect),
        (Duration::from_millis(50), Duration::from_millis(20))
    );
    assert_eq!(remote.options.max_entry_bytes, 8 << 20);
    assert_eq!(remote.options.cool_down, Duration::from_millis(1500));
    assert_eq!(remote.options.namespace.as_str(), "staging-eu");
    assert_eq!(
        remote.ca_file.as_deref(),
        Some(Path::new("/etc/sheaf/ca.pem"))
    );
    assert_eq!(remote.options.lease_ttl, Some(Duration::from_millis(2500)));
    let no_leases = from(&[("SHEAF_JIT_REMOTE_LEASE", "0")]).unwrap();
    assert_eq!(no_leases.remote.options.lease_ttl, None);
    assert!(from(&[]).unwrap().remote.url.is_none(), "off by default");
}

#[test]
fn signed_remote_caches_take_a_signing_key_trusted_keys_and_a_mode_from_variables() {
    let key = format!("ed25519:{}", "ab".repeat(32));
    let reader = from(&[
        ("SHEAF_JIT_REMOTE_CACHE", "file:///mnt/jit"),
        (
            "SHEAF_JIT_TRUSTED_KEYS",
            &format!(" {key},/etc/sheaf/keys  /k2 "),
        ),
    ])
    .unwrap();
    assert_eq!(
        reader.trust.trusted_keys,
        [
            TrustedKey::Key(key.parse().unwrap()),
            TrustedKey::File("/etc/sheaf/keys".into()),
            TrustedKey::File("/k2".into()),
        ]
    );
    assert!(reader.remote.secret.is_none() && reader.trust.signing_key.is_none());
    let builder = from(&[
        ("SHEAF_JIT_REMOTE_CACHE", "file:///mnt/jit"),
        ("SHEAF_JIT_SIGNING_KEY_FILE", "/etc/sheaf/signing-key"),
        ("SHEAF_JIT_REMOTE_MODE", "read-only"),
    ])
    .unwrap();
    assert!(matches!(
        &builder.trust.signing_key,
        Some(SigningKeySource::File(path)) if path == Path::new("/etc/sheaf/signing-key")
    ));
    assert_eq!(builder.remote.options.mode, RemoteMode::ReadOnly);
    let both = from(&[
        ("SHEAF_JIT_REMOTE_CACHE", "file:///mnt/jit"),
        ("SHEAF_JIT_REMOTE_SECRET_FILE", "/etc/sheaf/secret"),
        ("SHEAF_JIT_TRUSTED_KEYS", &key),
    ])
    .unwrap_err();
    assert!(both.to_string().contains("not both"), "{both}");
}

#[test]
fn the_profile_can_be_asked_for_as_json() {
    let config = from(&[("SHEAF_JIT_PROFILE", "json")]);
    if cfg!(feature = "serde") {
        let config = config.unwrap();
        assert!(config.profile_at_exit);
        assert_eq!(config.profile_format, crate::config::ProfileFormat::Json);
    } else {
        let error = config.unwrap_err().to_string();
        assert!(error.contains("serde"), "{error}");
    }
    let table = from(&[("SHEAF_JIT_PROFILE", "1")]).unwrap();
    assert_eq!(table.profile_format, crate::config::ProfileFormat::Table);
}

#[test]
fn unset_and_empty_variables_keep_the_defaults() {
    let config = from(&[("SHEAF_JIT_CAPACITY", ""), ("SHEAF_JIT_DISK_CACHE", "")]).unwrap();
    assert_eq!(format!("{config:?}"), format!("{:?}", JitConfig::default()));
}

#[test]
fn the_disk_cache_switch_wins_over_the_folder() {
    for off in ["0", "off", "OFF", "false", "no"] {
        let config = from(&[("SHEAF_JIT_DISK_CACHE", off), ("SHEAF_JIT_CACHE_DIR", "/c")]).unwrap();
        assert_eq!(config.disk.store_config(), None, "{off}");
    }
    let on = from(&[
        ("SHEAF_JIT_DISK_CACHE", "on"),
        ("SHEAF_JIT_CACHE_DIR", "/c"),
    ])
    .unwrap();
    let store = on.disk.store_config().unwrap();
    assert_eq!(
        (store.directory, store.max_bytes),
        (PathBuf::from("/c"), 1 << 30)
    );
}

#[test]
fn a_bad_value_names_the_variable_and_what_it_may_be() {
    for (name, value, expected) in [
        (
            "SHEAF_JIT_CAPACITY",
            "eight",
            "a whole number from 1 to 65536 (invalid digit",
        ),
        ("SHEAF_JIT_MAX_BYTES", "lots", "binary units"),
        ("SHEAF_JIT_CACHE_MAX_BYTES", "1.5G", "binary units"),
        ("SHEAF_JIT_DISK_CACHE", "bogus", "`on` or `off`"),
        (
            "SHEAF_JIT_REMOTE_TIMEOUT",
            "1s",
            "a whole number of milliseconds from 1 to 600000 (invalid digit",
        ),
        ("SHEAF_JIT_REMOTE_MAX_ENTRY", "big", "binary units"),
        (
            "SHEAF_JIT_REMOTE_NAMESPACE",
            "prod:eu",
            "':' is not allowed; expected 1 to 64 ASCII letters, digits, `.`, `_` and `-`",
        ),
        (
            "SHEAF_JIT_REMOTE_NAMESPACE",
            "x".repeat(65).as_str(),
            "65 characters long",
        ),
        (
            "SHEAF_JIT_REMOTE_NAMESPACE",
            "prod eu",
            "' ' is not allowed",
        ),
        ("SHEAF_JIT_TRACE", "verbose", "`on` or `off`"),
        (
            "SHEAF_JIT_COMPILE_MODE",
            "async",
            "`blocking` or `background`",
        ),
        (
            "SHEAF_JIT_CACHE_POLICY",
            "lru",
            "`adaptive` or `lru-cool-down`",
        ),
        (
            "SHEAF_JIT_FLOAT_SEMANTICS",
            "fast",
            "`strict` or `reassociate`",
        ),
        (
            "SHEAF_JIT_COMPILER",
            "gpu",
            "`auto`, `in-process`, `subprocess` or `none`",
        ),
    ] {
        let error = from(&[(name, value)]).unwrap_err().to_string();
        assert!(error.contains(&format!("{name}={value}")), "{error}");
        assert!(error.contains(expected), "{error}");
    }
    let utf8 = from_os(&[("SHEAF_JIT_DRIVER", OsString::from_vec(b"\xff".to_vec()))]);
    let utf8 = utf8.unwrap_err().to_string();
    assert!(utf8.contains("SHEAF_JIT_DRIVER=\u{fffd}"), "{utf8}");
    assert!(utf8.contains("UTF-8 text"), "{utf8}");
    // Named the field `function_capacity` before the ranges.
    let error = from(&[("SHEAF_JIT_CAPACITY", "0")]).unwrap_err();
    assert!(
        error.to_string().contains("SHEAF_JIT_CAPACITY=0 "),
        "{error}"
    );
}

#[test]
fn every_numeric_variable_has_a_range_that_its_row_states_and_that_refuses_the_rest() {
    // Failed before the ranges: `SHEAF_JIT_REMOTE_LEASE=18446744073709551615`
    // (and every other maximum) was accepted.
    for range in ranges::ALL {
        let variable = ENV_VARIABLES.iter().find(|v| v.name == range.variable);
        let variable = variable.unwrap_or_else(|| panic!("{} is no variable", range.variable));
        let described = range.describe();
        assert!(
            variable.meaning.contains(&described),
            "the row of {} does not state its range {described}: {}",
            range.variable,
            variable.meaning
        );
        // FUNCTION_CAPACITY's values are `name=N` pairs.
        let value = |n: &str| match range.variable {
            "SHEAF_JIT_FUNCTION_CAPACITY" => format!("softmax={n}"),
            _ => n.to_owned(),
        };
        for good in [range.min, range.max] {
            let good = value(&good.to_string());
            let applied = applied(range.variable, good.clone().into());
            assert!(applied.is_ok(), "{}={good}: {applied:?}", range.variable);
        }
        let mut bad = vec![
            (range.max + 1).to_string(),
            u64::MAX.to_string(),
            "18446744073709551616".to_owned(),
        ];
        if range.min > 0 {
            bad.push((range.min - 1).to_string());
        }
        for bad in bad {
            let bad = value(&bad);
            let error = applied(range.variable, bad.clone().into())
                .unwrap_err()
                .to_string();
            assert!(
                error.contains(&format!("{}={bad} ", range.variable)),
                "{error}"
            );
            assert!(error.contains(&described), "{error}");
        }
    }
}

#[test]
fn fields_set_in_code_are_held_to_the_same_ranges_and_named() {
    let error = |edit: fn(&mut JitConfig)| {
        let mut builder = JitConfig::builder();
        edit(&mut builder.config);
        builder.build().unwrap_err().to_string()
    };
    let threads = error(|config| config.cache.compile_threads = 1_000_000);
    assert!(
        threads.contains("cache.compile_threads=1000000 ") && threads.contains("1 to 256"),
        "{threads}"
    );
    let wait = error(|config| config.compile.exit_wait = Duration::MAX);
    assert!(wait.contains("compile.exit_wait="), "{wait}");
    let lease = error(|config| {
        config.remote.options.lease_ttl = Some(Duration::from_millis(u64::MAX));
    });
    assert!(lease.contains("remote.options.lease_ttl="), "{lease}");
    let entry = error(|config| config.remote.options.max_entry_bytes = u64::MAX);
    assert!(entry.contains("remote.options.max_entry_bytes="), "{entry}");
    let overrides = error(|config| {
        config
            .cache
            .function_capacity_overrides
            .insert("softmax".into(), 0);
    });
    assert!(
        overrides.contains("cache.function_capacity_overrides="),
        "{overrides}"
    );
    // The one value past its range: sized when the device opens.
    let mut sized = JitConfig::builder();
    sized.config.uploads.bytes = crate::config::UploadSettings::DEVICE_SIZED;
    assert!(sized.build().is_ok());
}

#[test]
fn errors_of_settings_that_variables_set_name_the_variables() {
    // Named `device.cpu_fallback` and the cache policy's fields before.
    let fallback = from(&[("SHEAF_JIT_CPU_FALLBACK", "auto")])
        .unwrap_err()
        .to_string();
    assert!(
        fallback.starts_with("SHEAF_JIT_CPU_FALLBACK=auto "),
        "{fallback}"
    );
    let cap = from(&[
        ("SHEAF_JIT_THRASH_COOL_DOWN", "100"),
        ("SHEAF_JIT_THRASH_COOL_DOWN_CAP", "10"),
    ])
    .unwrap_err()
    .to_string();
    assert!(
        cap.starts_with("SHEAF_JIT_THRASH_COOL_DOWN_CAP=10 ") && cap.contains("100"),
        "{cap}"
    );
    let driver = from(&[("SHEAF_JIT_DRIVER", " ")]).unwrap_err().to_string();
    assert!(driver.starts_with("SHEAF_JIT_DRIVER="), "{driver}");
    // Set in code, the field is named.
    let code = JitConfig::builder()
        .device(|device| device.cpu_fallback = Some("auto".into()))
        .build()
        .unwrap_err()
        .to_string();
    assert!(code.contains("device.cpu_fallback"), "{code}");
}

#[test]
fn a_function_named_twice_in_the_capacities_is_refused() {
    // Failed before: the second capacity won silently.
    let error = from(&[("SHEAF_JIT_FUNCTION_CAPACITY", "softmax=2,softmax=4")])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("SHEAF_JIT_FUNCTION_CAPACITY=softmax=2,softmax=4 ")
            && error.contains("named twice"),
        "{error}"
    );
}

#[test]
fn a_log_filter_of_other_than_printable_ascii_is_an_error_not_a_panic() {
    // Found by the `config` fuzz target: tracing-subscriber slices inside
    // a `\u{85}` (NEL) and panics.
    for filter in ["a,\u{85}b=6", "sheaf_jit\r=debug"] {
        let vars = |name: &str| (name == "SHEAF_JIT_LOG").then(|| filter.into());
        let error = log_filter(vars).unwrap_err();
        assert!(error.to_string().contains("SHEAF_JIT_LOG"), "{error}");
    }
}

#[test]
fn targets_and_flags_with_which_nothing_can_compile_or_load_are_refused() {
    // Each was taken, and then every call was interpreted.
    let foreign = if cfg!(target_arch = "aarch64") {
        "cpu:generic:x86_64-unknown-linux-gnu"
    } else {
        "cpu:generic:aarch64-unknown-linux-gnu"
    };
    for (name, value, expected) in [
        ("SHEAF_JIT_TARGET", "cpu:not-a-cpu", "`not-a-cpu` is not"),
        ("SHEAF_JIT_TARGET", foreign, "does not load here"),
        ("SHEAF_JIT_COMPILER_FLAGS", "--help", "print and exit"),
        (
            "SHEAF_JIT_COMPILER_FLAGS",
            "--compile-to=input",
            "stops the compile",
        ),
    ] {
        let error = from(&[(name, value)]).unwrap_err().to_string();
        assert!(error.starts_with(&format!("{name}=")), "{error}");
        assert!(error.contains(expected), "{error}");
    }
    for good in ["cpu:host", "cpu:generic", "cpu:x86-64-v3", "cuda:sm_80"] {
        if good == "cpu:x86-64-v3" && !cfg!(target_arch = "x86_64") {
            continue;
        }
        assert!(from(&[("SHEAF_JIT_TARGET", good)]).is_ok(), "{good}");
    }
    let native = format!("cpu:generic:{}", iree_safe::compiler::process_triple());
    assert!(from(&[("SHEAF_JIT_TARGET", &native)]).is_ok(), "{native}");
}

/// The defaults the table states (and the README repeats: tidy compares
/// them) are the code's: a variable set to its stated default configures
/// what no variable does. A default that is not one value (`none`, a
/// sentence) is checked apart below, or is what the variable unset means.
#[test]
fn every_default_the_table_states_is_the_codes() {
    let unset = format!("{:?}", from(&[]).unwrap());
    let mut checked = Vec::new();
    for variable in ENV_VARIABLES {
        let value = variable.default.trim_matches('`');
        let one_value = !value.is_empty() && !value.contains([' ', '`', ',', ';']);
        if !one_value || value == "none" {
            continue;
        }
        let set = from(&[(variable.name, value)])
            .unwrap_or_else(|error| panic!("{}'s stated default: {error}", variable.name));
        assert_eq!(
            format!("{set:?}"),
            unset,
            "{}={value}, its stated default, configures something else than leaving it unset",
            variable.name
        );
        checked.push(variable.name);
    }
    // Among them, those the documents state most: the compile mode, the
    // compiler, the float semantics, the cache policy and bounds.
    for name in [
        "SHEAF_JIT_COMPILE_MODE",
        "SHEAF_JIT_COMPILER",
        "SHEAF_JIT_FLOAT_SEMANTICS",
        "SHEAF_JIT_CACHE_POLICY",
        "SHEAF_JIT_CAPACITY",
        "SHEAF_JIT_CACHE_MAX_BYTES",
    ] {
        assert!(
            checked.contains(&name),
            "{name} was not checked: {checked:?}"
        );
    }
}

/// The disk cache's folder, as the table states it, is where the code puts
/// it on Linux (with and without `XDG_CACHE_HOME`) and on macOS.
#[test]
fn the_stated_disk_cache_folders_are_the_codes() {
    let stated = ENV_VARIABLES
        .iter()
        .find(|variable| variable.name == "SHEAF_JIT_CACHE_DIR")
        .unwrap()
        .default;
    let settings = crate::config::DiskCacheSettings::default();
    let symbolic = |os: &str, vars: &[&str]| {
        let folder = settings
            .store_config_on(os, |name| {
                vars.contains(&name)
                    .then(|| OsString::from(format!("${name}")))
            })
            .unwrap()
            .directory;
        format!("`{}`", folder.display())
    };
    for folder in [
        symbolic("linux", &["XDG_CACHE_HOME", "HOME"]),
        symbolic("linux", &["HOME"]),
        symbolic("macos", &["XDG_CACHE_HOME", "HOME"]),
    ] {
        assert!(
            stated.contains(&folder),
            "SHEAF_JIT_CACHE_DIR's stated default ({stated}) does not name {folder}"
        );
    }
}
