//! The dump folder (`CompileSettings::dump_dir`, `SHEAF_JIT_DUMP_DIR`): a
//! compile's MLIR, exact flags and target, runnable command and artifact
//! (or diagnostics); the command, run again, makes the same artifact.

mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use iree_safe::compiler::CompilerPreference;
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::lowering::Lowered;
use sheaf_integration::settings::{CompileMode, DiskCacheFolder};
use sheaf_integration::{mlir, Dispatched, JitConfig, JitFunction, JitRuntime, Value};

fn runtime(dump: &Path) -> JitRuntime {
    runtime_with(dump, CompilerPreference::Auto)
}

fn runtime_with(dump: &Path, compiler: CompilerPreference) -> JitRuntime {
    let config = JitConfig::builder()
        .compile(|compile| {
            compile.mode = CompileMode::Blocking;
            compile.dump_dir = Some(dump.to_owned());
            compile.compiler = compiler;
        })
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

/// The folders in `dir`, in order.
fn folders(dir: &Path) -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    folders.sort();
    folders
}

/// The dumps in `dir`, in order: in the one folder of this process's
/// runtime (`<pid>-<random>`).
fn dumps(dir: &Path) -> Vec<PathBuf> {
    let own = folders(dir);
    assert_eq!(own.len(), 1, "one folder per process: {own:?}");
    let name = own[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("{}-", std::process::id())),
        "{name}"
    );
    folders(&own[0])
}

#[test]
fn a_dumped_compile_recompiles_to_the_same_artifact() {
    recompiles_to_the_same_artifact(CompilerPreference::Auto);
}

#[test]
fn an_in_process_compile_recompiles_to_the_same_artifact() {
    recompiles_to_the_same_artifact(CompilerPreference::InProcess);
}

fn recompiles_to_the_same_artifact(compiler: CompilerPreference) {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime_with(dir.path(), compiler);
    support::checked_sigmoid(&jit, &[2, 3], 5);
    let dumps = dumps(dir.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let dump = &dumps[0];
    let name = dump.file_name().unwrap().to_string_lossy();
    assert!(name.starts_with("0000-sigmoid-"), "{name}");
    assert!(name.contains("f32[2,3]"), "{name}");
    let mlir = fs::read_to_string(dump.join("input.mlir")).unwrap();
    assert!(mlir.contains("stablehlo"), "{mlir}");
    let flags = fs::read_to_string(dump.join("flags.txt")).unwrap();
    assert!(flags.contains("--iree-hal-target-device="), "{flags}");
    assert!(flags.contains("--iree-input-type=stablehlo"), "{flags}");
    let target = fs::read_to_string(dump.join("target.txt")).unwrap();
    assert!(!target.trim().is_empty());
    let key = fs::read_to_string(dump.join("key.txt")).unwrap();
    assert_eq!(key.trim().len(), 64, "{key}");
    assert!(!dump.join("diagnostics.txt").exists());

    // The command, run as written, makes the same bytes.
    let status = Command::new(dump.join("command.sh")).status().unwrap();
    assert!(status.success());
    let artifact = fs::read(dump.join("artifact.vmfb")).unwrap();
    let recompiled = fs::read(dump.join("recompiled.vmfb")).unwrap();
    assert!(!artifact.is_empty());
    assert!(
        artifact == recompiled,
        "the recorded command compiled other bytes"
    );

    // A hit is not a compile: nothing more is dumped.
    support::checked_sigmoid(&jit, &[2, 3], 5);
    assert_eq!(self::dumps(dir.path()).len(), 1);
}

/// A 512² f32 matmul: on an x86-64 CPU with AVX-512 the runtime compiles
/// it with its own tuning spec (`tuning::AVX512_MATMUL_SPEC`), from a file
/// that lives as long as the compile. Both compilers take it, the results
/// are right, and the dump keeps the spec so that its command makes the
/// same bytes after that file is gone.
#[test]
fn a_matmul_compiled_with_the_runtimes_tuning_spec_recompiles_from_its_dump() {
    let on_avx512 = avx512f();
    // Where the spec is used, both compilers must take it; elsewhere (an
    // aarch64 run under qemu-user, whose in-process compiler would be the
    // host's x86_64 library) the subprocess compiler shows that nothing
    // else changed.
    let compilers = if on_avx512 {
        vec![CompilerPreference::Auto, CompilerPreference::InProcess]
    } else {
        vec![CompilerPreference::Auto]
    };
    for compiler in compilers {
        let dir = tempfile::tempdir().unwrap();
        let jit = runtime_with(dir.path(), compiler.clone());
        let (a, b) = (
            support::array(&[512, 512], 1),
            support::array(&[512, 512], 2),
        );
        let matmul = sheaf_integration::reference::matmul();
        let y = match jit
            .dispatch(&matmul, &[a.clone().into(), b.clone().into()], &[])
            .unwrap()
        {
            Dispatched::Compiled(compiled) => compiled.outputs,
            Dispatched::Interpret(why) => panic!("{compiler:?}: interpreted: {why}"),
        };
        support::assert_matmul_close(&a, &b, &y[0], "512² with the runtime's flags");
        let dump = &dumps(dir.path())[0];
        let flags = fs::read_to_string(dump.join("flags.txt")).unwrap();
        let spec = dump.join("tuning_spec.mlir");
        assert_eq!(
            flags.contains("--iree-codegen-tuning-spec-path="),
            on_avx512,
            "{compiler:?}: {flags}"
        );
        assert_eq!(spec.exists(), on_avx512, "{compiler:?}");
        if on_avx512 {
            assert_eq!(
                fs::read_to_string(&spec).unwrap(),
                sheaf_integration::tuning::AVX512_MATMUL_SPEC
            );
        }
        let status = Command::new(dump.join("command.sh")).status().unwrap();
        assert!(status.success(), "{compiler:?}");
        let artifact = fs::read(dump.join("artifact.vmfb")).unwrap();
        let recompiled = fs::read(dump.join("recompiled.vmfb")).unwrap();
        assert!(
            artifact == recompiled,
            "{compiler:?}: the recorded command compiled other bytes"
        );
    }
}

#[cfg(target_arch = "x86_64")]
fn avx512f() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512f() -> bool {
    false
}

#[test]
fn a_failed_compile_leaves_its_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime(dir.path());
    let broken: JitFunction = JitFunction::new("broken", "(defn broken [x] ?)", |ctx| {
        let ty = mlir::arg_type(&ctx.args()[0])?;
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> {ty} {{
               %y = stablehlo.no_such_op %x : {ty}
               return %y : {ty}
             }}",
            ctx.entry_symbol()
        )))
    });
    let x = Value::host(ArrayD::<f32>::ones(IxDyn(&[1, 5])));
    let dispatched = jit.dispatch(&broken, &[x], &[]).unwrap();
    assert!(matches!(dispatched, Dispatched::Interpret(_)));
    let dumps = dumps(dir.path());
    assert_eq!(dumps.len(), 1, "{dumps:?}");
    let diagnostics = fs::read_to_string(dumps[0].join("diagnostics.txt")).unwrap();
    assert!(diagnostics.contains("no_such_op"), "{diagnostics}");
    assert!(!dumps[0].join("artifact.vmfb").exists());
    assert!(dumps[0].join("command.sh").exists());
}

#[test]
fn the_target_and_flags_from_the_environment_reach_the_compiler() {
    let dir = tempfile::tempdir().unwrap();
    // Portable code for this process's architecture (the compiler may run
    // on another one: aarch64 under qemu-user).
    let target = format!("cpu:generic:{}", iree_safe::compiler::process_triple());
    let vars = |name: &str| match name {
        "SHEAF_JIT_TARGET" => Some(target.clone().into()),
        "SHEAF_JIT_COMPILER_FLAGS" => {
            Some("--iree-opt-level=O1 '--iree-llvmcpu-loop-unrolling=false'".into())
        }
        "SHEAF_JIT_FUNCTION_CAPACITY" => Some("sigmoid=1".into()),
        "SHEAF_JIT_DUMP_DIR" => Some(dir.path().as_os_str().to_owned()),
        "SHEAF_JIT_COMPILE_MODE" => Some("blocking".into()),
        "SHEAF_JIT_DISK_CACHE" => Some("off".into()),
        _ => None,
    };
    let config = JitConfig::builder()
        .apply_vars(vars)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(config.cache.capacity_for("sigmoid"), 1);
    let jit = JitRuntime::new(config).unwrap();
    support::checked_sigmoid(&jit, &[2, 3], 5);
    let dumps = dumps(dir.path());
    let flags = fs::read_to_string(dumps[0].join("flags.txt")).unwrap();
    let flags: Vec<&str> = flags.lines().collect();
    assert!(
        flags.contains(&"--iree-llvmcpu-target-cpu=generic"),
        "{flags:?}"
    );
    // After the runtime's own flags, in the order given.
    let opt = flags.iter().position(|f| *f == "--iree-opt-level=O1");
    let unroll = flags
        .iter()
        .position(|f| *f == "--iree-llvmcpu-loop-unrolling=false");
    assert!(opt.is_some() && unroll > opt, "{flags:?}");
    let status = Command::new(dumps[0].join("command.sh")).status().unwrap();
    assert!(status.success());
    assert!(
        fs::read(dumps[0].join("artifact.vmfb")).unwrap()
            == fs::read(dumps[0].join("recompiled.vmfb")).unwrap()
    );
}
