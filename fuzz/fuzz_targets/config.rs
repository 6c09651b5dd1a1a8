//! The configuration parsers on any values: every `SHEAF_JIT_*` variable of
//! `ENV_VARIABLES`, and byte sizes. They never panic; a byte size prints as
//! a whole number of its unit exactly when that text parses back to the
//! same size. The seeds name variables by their index in the table.
#![no_main]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

use jit_cache::ByteSize;
use libfuzzer_sys::fuzz_target;
use sheaf_integration::{settings::ENV_VARIABLES, JitConfig};

fuzz_target!(|data: &[u8]| {
    // Records separated by 0xff: an index into the table of variables,
    // then its raw value.
    let mut values: Vec<Option<OsString>> = vec![None; ENV_VARIABLES.len()];
    for record in data.split(|&b| b == 0xff) {
        if let Some((&index, value)) = record.split_first() {
            let index = usize::from(index) % ENV_VARIABLES.len();
            values[index] = Some(OsString::from_vec(value.to_vec()));
        }
    }
    let lookup = |name: &str| {
        let index = ENV_VARIABLES.iter().position(|v| v.name == name)?;
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
