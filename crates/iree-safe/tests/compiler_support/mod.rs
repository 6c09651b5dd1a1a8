//! Fixtures of the compiler tests: the test programs with their inputs and
//! expected outputs, a runner on the real runtime, and compilers that count
//! their calls.

#![allow(dead_code, reason = "each test file uses a different subset")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use iree_safe::compiler::{
    Artifact, CompileError, CompileOptions, Compiler, CompilerVersion, InProcessCompiler,
    SubprocessCompiler,
};
use iree_safe::{Runtime, Tensor};

/// The text of `tests/data/compiler/<name>.mlir`.
pub(crate) fn source(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compiler")
        .join(format!("{name}.mlir"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A test program: what to compile, what to feed it, what it must return.
#[derive(Debug, Clone)]
pub(crate) struct Program {
    pub name: &'static str,
    pub function: &'static str,
    pub options: CompileOptions,
    pub inputs: Vec<(Vec<usize>, Vec<f32>)>,
    pub expected: Vec<f32>,
}

impl Program {
    pub(crate) fn source(&self) -> String {
        source(self.name)
    }
}

pub(crate) fn sigmoid() -> Program {
    let x = vec![-2.0f32, -0.5, 0.0, 3.0];
    Program {
        name: "sigmoid",
        function: "sigmoid",
        options: CompileOptions::stablehlo(),
        expected: x.iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect(),
        inputs: vec![(vec![4], x)],
    }
}

/// Four different programs: three StableHLO, one linalg.
pub(crate) fn programs() -> Vec<Program> {
    let (a, x, y) = (
        vec![2.0f32, -1.0, 0.5, 3.0],
        vec![1.0f32, 2.0, 3.0, 4.0],
        vec![0.5f32; 4],
    );
    let matrix_a = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let matrix_b = vec![7.0f32, 8.0, 9.0, 10.0, 11.0, 12.0];
    let scale_x = vec![-1.0f32, 0.0, 1.5, 10.0];
    vec![
        sigmoid(),
        Program {
            name: "axpy",
            function: "axpy",
            options: CompileOptions::stablehlo(),
            expected: a
                .iter()
                .zip(&x)
                .zip(&y)
                .map(|((a, x), y)| a * x + y)
                .collect(),
            inputs: vec![(vec![4], a), (vec![4], x), (vec![4], y)],
        },
        Program {
            name: "matmul",
            function: "matmul",
            options: CompileOptions::stablehlo(),
            expected: vec![58.0, 64.0, 139.0, 154.0],
            inputs: vec![(vec![2, 3], matrix_a), (vec![3, 2], matrix_b)],
        },
        Program {
            name: "scale_linalg",
            function: "scale",
            options: CompileOptions::default(),
            expected: scale_x.iter().map(|v| 2.0 * v + 1.0).collect(),
            inputs: vec![(vec![4], scale_x)],
        },
    ]
}

/// The process's runtime (one per process; docs/architecture.md, "One runtime per process").
pub(crate) fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| Runtime::new("local-sync").expect("the local-sync runtime"))
}

/// Loads `vmfb`, calls the program's function on its inputs, returns the
/// first result.
pub(crate) fn run(program: &Program, vmfb: &Artifact) -> Result<Vec<f32>, iree_safe::Error> {
    let runtime = runtime();
    let module = runtime.load(vmfb.vmfb())?;
    let function = module.function(program.function)?;
    let arguments = program
        .inputs
        .iter()
        .map(|(shape, data)| Tensor::from_slice(runtime.device(), shape, data).map(Into::into))
        .collect::<Result<Vec<_>, _>>()?;
    let outputs = function.call(&arguments)?;
    outputs[0].as_tensor().expect("a tensor result").to_vec()
}

/// Compiles `program` with `compiler`, runs it and checks its expected
/// result (see [`check`]).
pub(crate) fn check_compiled_by(program: &Program, compiler: &dyn Compiler) -> Vec<f32> {
    let vmfb = compiler
        .compile(&program.source(), &program.options)
        .unwrap_or_else(|e| panic!("{}: {e}", program.name));
    check(program, &vmfb)
}

/// Runs `vmfb` and checks the program's expected result (within 1e-6).
pub(crate) fn check(program: &Program, vmfb: &Artifact) -> Vec<f32> {
    let got = run(program, vmfb).unwrap_or_else(|e| panic!("{}: {e}", program.name));
    assert_eq!(got.len(), program.expected.len(), "{}", program.name);
    for (index, (got, want)) in got.iter().zip(&program.expected).enumerate() {
        assert!(
            (got - want).abs() <= 1e-6,
            "{}[{index}]: got {got}, want {want}",
            program.name
        );
    }
    got
}

pub(crate) fn in_process() -> InProcessCompiler {
    InProcessCompiler::load().expect("libIREECompiler.so, installed by `cargo xtask build-iree`")
}

pub(crate) fn subprocess() -> SubprocessCompiler {
    SubprocessCompiler::locate().expect("iree-compile, installed by `cargo xtask build-iree`")
}

/// Wraps a compiler and counts the compilations that reach it.
#[derive(Debug)]
pub(crate) struct Counting {
    inner: Arc<dyn Compiler>,
    calls: AtomicUsize,
}

impl Counting {
    pub(crate) fn new(inner: Arc<dyn Compiler>) -> Arc<Self> {
        Arc::new(Counting {
            inner,
            calls: AtomicUsize::new(0),
        })
    }

    pub(crate) fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Compiler for Counting {
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.compile(mlir, options)
    }

    fn version(&self) -> &CompilerVersion {
        self.inner.version()
    }
}

/// A stand-in for `iree-compile`: a shell script that answers `--version`
/// with an IREE version line naming `build` (appending a line to
/// `counter` each time it is asked), and "compiles" anything to the bytes
/// [`FAKE_VMFB`]. Written whole before it runs: call it from a test file
/// of its own, where no other thread forks while the script is open for
/// writing (which would make running it fail with "text file busy").
pub(crate) fn fake_iree_compile(
    dir: &std::path::Path,
    counter: &std::path::Path,
    build: &str,
) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("iree-compile");
    let script = format!(
        "#!/bin/sh\n\
         if [ \"$1\" = \"--version\" ]; then\n\
         \x20 echo run >> '{counter}'\n\
         \x20 printf 'IREE (https://iree.dev):\\n  IREE compiler version %s\\n  LLVM version 22.0.0git\\n' '{build}'\n\
         \x20 exit 0\n\
         fi\n\
         cat > /dev/null\n\
         printf '%s' '{vmfb}'\n",
        counter = counter.display(),
        vmfb = std::str::from_utf8(FAKE_VMFB).unwrap(),
    );
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// What [`fake_iree_compile`] writes for any compilation.
pub(crate) const FAKE_VMFB: &[u8] = b"fake vmfb";

/// How many times `counter` says the fake was asked for its version.
pub(crate) fn version_runs(counter: &std::path::Path) -> usize {
    std::fs::read_to_string(counter).map_or(0, |text| text.lines().count())
}
