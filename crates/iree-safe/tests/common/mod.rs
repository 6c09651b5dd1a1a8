//! Test fixtures shared by the iree-safe test files.
//!
//! `program(name)` returns a loadable artifact for `tests/data/<name>.mlir`:
//! compiled with the installed `iree-compile` against the real runtime, or
//! the mock module of the same name under miri / the `mock` feature.
//! `LeakCheck` asserts at the end of a test that no IREE object is alive
//! (beyond the process-wide instance) when running on the mock.

#![allow(dead_code)] // each test file uses a different subset

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

pub use imp::*;

#[cfg(not(any(miri, feature = "mock")))]
mod imp {
    use super::*;

    /// The compiled `.vmfb` of `tests/data/<name>.mlir`, compiled once per
    /// test process.
    pub fn program(name: &str) -> Vec<u8> {
        static CACHE: OnceLock<Mutex<HashMap<String, Vec<u8>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        if let Some(bytes) = cache.lock().unwrap().get(name) {
            return bytes.clone();
        }
        let bytes = compile(name);
        cache.lock().unwrap().insert(name.to_owned(), bytes.clone());
        bytes
    }

    fn compile(name: &str) -> Vec<u8> {
        let source =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/{name}.mlir"));
        let out = tempfile::tempdir().expect("a temporary folder");
        let vmfb = out.path().join("out.vmfb");
        let output = std::process::Command::new(iree_compile())
            .args([
                "--iree-input-type=stablehlo",
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
                "--iree-input-demote-f64-to-f32=false",
            ])
            .arg(&source)
            .arg("-o")
            .arg(&vmfb)
            .output()
            .expect("iree-compile starts");
        assert!(
            output.status.success(),
            "iree-compile {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::read(vmfb).expect("compiled artifact")
    }

    fn iree_compile() -> PathBuf {
        let manifest =
            iree_sys::build_info::MANIFEST.expect("IREE installed by `cargo xtask build-iree`");
        let json = std::fs::read_to_string(manifest).expect("readable manifest");
        let key = "\"iree_compile\": \"";
        let start = json.find(key).expect("manifest names iree_compile") + key.len();
        let end = start + json[start..].find('"').expect("closing quote");
        PathBuf::from(&json[start..end])
    }

    /// Nothing to check against the real runtime: valgrind covers leaks.
    pub struct LeakCheck;

    impl LeakCheck {
        pub fn start() -> LeakCheck {
            LeakCheck
        }
    }
}

/// The driver the tests run on.
pub const DRIVER: &str = "local-sync";
