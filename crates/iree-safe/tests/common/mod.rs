//! Test fixtures shared by the iree-safe test files.
//!
//! `program(name)` returns a loadable artifact for `tests/data/<name>.mlir`:
//! compiled with the installed `iree-compile` against the real runtime, or
//! the mock module of the same name under miri / the `mock` feature.
//! `LeakCheck` asserts at the end of a test that no IREE object is alive
//! (beyond the process-wide instance) when running on the mock.

#![allow(dead_code)] // each test file uses a different subset

pub use imp::*;

#[cfg(not(any(miri, feature = "mock")))]
mod imp {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Mutex, OnceLock};

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

#[cfg(any(miri, feature = "mock"))]
mod imp {
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use iree_safe::mock::{live_objects, LiveObjects};

    /// The mock artifact named `name` (see `iree_safe::mock::program`).
    pub fn program(name: &str) -> Vec<u8> {
        iree_safe::mock::program(name)
            .unwrap_or_else(|| panic!("the mock has no test program `{name}`"))
    }

    /// Serializes the tests of one binary (they run on parallel threads and
    /// share the mock's live-object counts) and, when dropped at the end of
    /// a test that did not panic, asserts that every mock object the test
    /// created was released: only the process-wide VM instance, which
    /// `Instance::global()` keeps by design, may have appeared.
    pub struct LeakCheck {
        before: LiveObjects,
        _serial: MutexGuard<'static, ()>,
    }

    impl LeakCheck {
        pub fn start() -> LeakCheck {
            static SERIAL: Mutex<()> = Mutex::new(());
            // A failed test poisons the lock; the others still run.
            let serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
            // Normally all zeros; compared against (rather than asserted
            // zero) so that one leaking test does not fail all that follow.
            LeakCheck {
                before: live_objects(),
                _serial: serial,
            }
        }
    }

    impl Drop for LeakCheck {
        fn drop(&mut self) {
            if std::thread::panicking() {
                return;
            }
            let after = live_objects();
            let instance_only = LiveObjects {
                instances: self.before.instances,
                ..after
            };
            assert!(
                instance_only == self.before && after.instances <= 1,
                "mock objects leaked (or released too late) by this test; alive now: {after:#?}\nalive at its start: {:#?}",
                self.before
            );
        }
    }
}

/// The driver the tests run on.
pub const DRIVER: &str = "local-sync";
