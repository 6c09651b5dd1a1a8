//! Fixtures of iree-safe's tests, benchmarks and examples (feature
//! `iree-safe`).
//!
//! `program(name)` returns a loadable artifact for iree-safe's
//! `tests/data/<name>.mlir`: compiled with the installed `iree-compile`
//! against the real runtime, or the mock module of the same name under miri
//! (where iree-safe's build script sets its `iree_mock` cfg; here the same
//! condition is `cfg(miri)`). `LeakCheck` asserts at the end of a test that
//! no IREE object is alive (beyond the process-wide instance) when running
//! on the mock.

pub use imp::*;

/// The function `name` of the test program `name` (`tests/data/<name>.mlir`),
/// loaded into `runtime`.
pub fn load_function(runtime: &iree_safe::Runtime, name: &str) -> iree_safe::Function {
    runtime
        .load(program(name).vmfb())
        .unwrap()
        .function(name)
        .unwrap()
}

#[cfg(not(miri))]
mod imp {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Mutex, OnceLock};

    use iree_safe::compiler::{
        Artifact, CompileOptions, CompileTarget, Compiler, CompilerPreference, SubprocessCompiler,
    };

    /// The compiled `.vmfb` of `tests/data/<name>.mlir` for this process's
    /// CPU (`host`, or this process's triple when `iree-compile` runs on
    /// another architecture: `CompileTarget::process_cpu`), compiled once
    /// per test process.
    pub fn program(name: &str) -> Artifact {
        let target = CompileTarget::process_cpu(&CompilerPreference::Subprocess);
        program_for(name, target)
    }

    /// Like [`program`], for another `--iree-llvmcpu-target-cpu` of the
    /// compiler's architecture (e.g. a baseline x86-64 that valgrind can
    /// decode, unlike AVX-512).
    pub fn program_for_cpu(name: &str, cpu: &str) -> Artifact {
        let target = CompileTarget::Cpu {
            cpu: cpu.to_owned(),
            triple: None,
        };
        program_for(name, target)
    }

    fn program_for(name: &str, target: CompileTarget) -> Artifact {
        /// Artifacts by (program, target).
        type Artifacts = HashMap<(String, CompileTarget), Artifact>;
        static CACHE: OnceLock<Mutex<Artifacts>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let key = (name.to_owned(), target);
        if let Some(bytes) = cache.lock().unwrap().get(&key) {
            return bytes.clone();
        }
        let bytes = compile(name, key.1.clone());
        cache.lock().unwrap().insert(key, bytes.clone());
        bytes
    }

    /// Compiles with `iree-compile` in a child process: the tests exercise the
    /// runtime, and a child process stays out of valgrind's way.
    fn compile(name: &str, target: CompileTarget) -> Artifact {
        let source = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../iree-safe/tests/data")
            .join(format!("{name}.mlir"));
        let mlir = std::fs::read_to_string(&source).expect("test program");
        let mut options = CompileOptions::stablehlo();
        options.target = target;
        options
            .extra_flags
            .push("--iree-input-demote-f64-to-f32=false".to_owned());
        let compiler =
            SubprocessCompiler::locate().expect("iree-compile (run `cargo xtask build-iree`)");
        match compiler.compile(&mlir, &options) {
            Ok(artifact) => artifact,
            Err(error) => panic!("compiling {}: {error}", source.display()),
        }
    }

    /// Nothing to check against the real runtime: valgrind covers leaks.
    #[derive(Debug)]
    pub struct LeakCheck;

    impl LeakCheck {
        pub fn start() -> LeakCheck {
            LeakCheck
        }
    }
}

#[cfg(miri)]
mod imp {
    use std::sync::{Mutex, MutexGuard, PoisonError};

    use iree_safe::compiler::Artifact;
    use iree_safe::mock::{live_objects, LiveObjects};

    /// The mock artifact named `name` (see `iree_safe::mock::program`).
    pub fn program(name: &str) -> Artifact {
        iree_safe::mock::program(name)
            .unwrap_or_else(|| panic!("the mock has no test program `{name}`"))
    }

    /// The mock has no CPU targets: the same artifact as [`program`].
    pub fn program_for_cpu(name: &str, _cpu: &str) -> Artifact {
        program(name)
    }

    /// Serializes the tests of one binary (they run on parallel threads and
    /// share the mock's live-object counts) and, when dropped at the end of
    /// a test that did not panic, asserts that every mock object the test
    /// created was released: only the process-wide VM instance, which
    /// `Instance::global()` keeps by design, may have appeared.
    #[derive(Debug)]
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
