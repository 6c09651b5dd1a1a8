//! The configuration parsers on any values: `SHEAF_JIT_*` variables and byte
//! sizes. They never panic; a byte size prints as a whole number of its unit
//! exactly when that text parses back to the same size.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use jit_cache::ByteSize;
use libfuzzer_sys::fuzz_target;
use sheaf_integration::JitConfig;

const VARIABLES: &[&str] = &[
    "SHEAF_JIT_DRIVER",
    "SHEAF_JIT_CAPACITY",
    "SHEAF_JIT_MAX_ENTRIES",
    "SHEAF_JIT_MAX_BYTES",
    "SHEAF_JIT_CACHE_POLICY",
    "SHEAF_JIT_COMPILE_MODE",
    "SHEAF_JIT_COMPILE_THREADS",
    "SHEAF_JIT_THRASH_WINDOW",
    "SHEAF_JIT_THRASH_THRESHOLD",
    "SHEAF_JIT_THRASH_COOL_DOWN",
    "SHEAF_JIT_THRASH_COOL_DOWN_CAP",
    "SHEAF_JIT_FAILED_RETRY",
    "SHEAF_JIT_COMPILER",
    "SHEAF_JIT_CACHE_DIR",
    "SHEAF_JIT_DISK_CACHE",
    "SHEAF_JIT_CACHE_MAX_BYTES",
    "SHEAF_JIT_CPU_FALLBACK",
    "SHEAF_JIT_UPLOAD_CACHE_MAX_BYTES",
    "SHEAF_JIT_BUNDLES",
    "SHEAF_JIT_TRACE",
];

fuzz_target!(|data: &[u8]| {
    // Records separated by 0xff: a variable index, then its raw value.
    let mut values: Vec<Option<OsString>> = vec![None; VARIABLES.len()];
    for record in data.split(|&b| b == 0xff) {
        if let Some((&index, value)) = record.split_first() {
            values[usize::from(index) % VARIABLES.len()] = Some(OsString::from_vec(value.to_vec()));
        }
    }
    let lookup = |name: &str| {
        let index = VARIABLES.iter().position(|v| *v == name)?;
        values[index].clone()
    };
    if let Ok(builder) = JitConfig::builder().apply_vars(lookup) {
        let _ = builder.build();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(size) = text.parse::<ByteSize>() {
            let printed = size.to_string();
            if !printed.contains('.') {
                assert_eq!(printed.parse(), Ok(size), "{text:?} printed as {printed}");
            }
        }
    }
});
