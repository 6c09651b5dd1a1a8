//! Code compiled for a CPU whose features this machine's CPU lacks never
//! runs: a fresh compile for `cpu:diamondrapids` (AMX-FP16, AVX10.2, ...)
//! on a machine without them is interpreted with the reason, nothing of it
//! reaches the disk cache, and the same bytes handed over from elsewhere
//! (provided, as from a bundle or a cluster's cache whose portable target
//! is set too high) are refused naming the missing features. Before the
//! check, the first compiled call died of SIGILL (exit 132), taking this
//! test binary with it. Skipped, saying so, on a CPU that has them all.

mod support;

use std::path::Path;

use sheaf_integration::{
    artifacts::ProvidedFunction, compiler::CompileTarget, lowering::Signature, reference,
    settings::DiskCacheFolder, DType, Dispatched, JitConfig, JitRuntime, Value,
};
use support::{array, compiled_outside};

/// A CPU with AMX-FP16 and AMX-COMPLEX, which no Sapphire Rapids and no
/// AMD CPU has.
const FOREIGN_CPU: &str = "diamondrapids";

/// Why the test cannot run here, if it cannot: not x86-64 Linux, or this
/// CPU has the features (in `/proc/cpuinfo`'s names) that tell it apart.
fn skip_reason() -> Option<String> {
    if !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
        return Some("the CPU check reads x86-64 Linux's /proc/cpuinfo".into());
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let has = |flag: &str| cpuinfo.split_whitespace().any(|word| word == flag);
    ["amx_fp16", "amx_complex"]
        .iter()
        .all(|flag| has(flag))
        .then(|| format!("this CPU has every feature of {FOREIGN_CPU} the test relies on"))
}

fn foreign() -> CompileTarget {
    CompileTarget::Cpu {
        cpu: FOREIGN_CPU.to_owned(),
        triple: None,
    }
}

fn runtime(disk: &Path) -> JitRuntime {
    let disk = disk.to_owned();
    let config = support::blocking()
        .compile(|compile| compile.target = Some(foreign()))
        .disk(move |settings| settings.folder = DiskCacheFolder::Dir(disk))
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

#[test]
fn code_for_a_cpu_this_one_is_not_is_interpreted_never_run() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let disk = tempfile::tempdir().unwrap();
    let sigmoid = reference::sigmoid();
    let x = [Value::from(array(&[1, 5], 3))];
    for run in 0..2 {
        // A second runtime on the same disk cache finds nothing there.
        let jit = runtime(disk.path());
        let Dispatched::Interpret(reason) = jit.dispatch(&sigmoid, &x, &[]).unwrap() else {
            panic!("run {run}: code for {FOREIGN_CPU} was loaded on a CPU that lacks its features")
        };
        let why = format!("{reason}");
        assert!(
            why.contains(FOREIGN_CPU) && why.contains("amx-fp16"),
            "run {run}: the reason names the CPU and the feature: {why}"
        );
        let stored = std::fs::read_dir(disk.path().join("vmfb"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        assert_eq!(stored, 0, "run {run}: nothing stored");
    }
}

#[test]
fn a_module_for_a_cpu_this_one_is_not_is_refused_from_elsewhere() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let artifact = compiled_outside(
        dir.path(),
        "func.func @sigmoid_4(%x: tensor<4xf32>) -> tensor<4xf32> {\n  \
         %y = stablehlo.logistic %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n",
        &foreign(),
    );
    let jit = JitRuntime::new(
        JitConfig::builder()
            .compile(|compile| compile.target = Some(foreign()))
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .build()
            .unwrap(),
    )
    .unwrap();
    let sigmoid = reference::sigmoid();
    let signature = Signature::builder().arg(DType::F32, &[4]).build();
    let error = jit
        .provide_artifact(
            artifact.vmfb(),
            &foreign(),
            vec![ProvidedFunction::new(&sigmoid, "sigmoid_4", signature)],
        )
        .unwrap_err();
    let shown = sheaf_integration::ErrorChain(&error).to_string();
    assert!(
        shown.contains("amx-fp16") && shown.contains("illegal instruction"),
        "{shown}"
    );
}

/// Set in a child of the fleet test: `publish` or `fetch`.
const ROLE: &str = "SHEAF_JIT_TEST_FLEET_ROLE";

/// A fleet's portable target set too high: every machine compiles
/// `cpu:x86-64-v4` (AVX-512) into one shared folder, and one machine lacks
/// AVX-512 (played by a child told `IREE_SAFE_ASSUME_CPU_LACKS=avx512f`).
/// The first machine's artifact is keyed for the target, not the CPU, so
/// the second one finds it: it must refuse it (and its own compile), not
/// run it. Skipped where this CPU lacks AVX-512 itself.
#[test]
fn a_shared_artifact_for_a_cpu_this_one_is_not_is_refused() {
    const TEST: &str = "a_shared_artifact_for_a_cpu_this_one_is_not_is_refused";
    if let Ok(role) = std::env::var(ROLE) {
        fleet_machine(&role);
        return;
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    if !cfg!(target_arch = "x86_64") || !cpuinfo.split_whitespace().any(|f| f == "avx512f") {
        println!("skipped: the publishing machine needs AVX-512, which this CPU lacks");
        return;
    }
    let shared = tempfile::tempdir().unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let secret = secrets.path().join("secret");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&secret)
            .unwrap();
        std::io::Write::write_all(&mut file, &[0x5a; 32]).unwrap();
    }
    for (role, lacks) in [("publish", ""), ("fetch", "avx512f")] {
        let disk = tempfile::tempdir().unwrap();
        let output = test_support::child::rerun(TEST)
            .env(ROLE, role)
            .env("IREE_SAFE_ASSUME_CPU_LACKS", lacks)
            .env(
                "SHEAF_JIT_REMOTE_CACHE",
                format!("file://{}", shared.path().display()),
            )
            .env("SHEAF_JIT_REMOTE_SECRET_FILE", &secret)
            .env("SHEAF_JIT_CACHE_DIR", disk.path())
            .env("SHEAF_JIT_TARGET", "cpu:x86-64-v4")
            .env("SHEAF_JIT_COMPILE_MODE", "blocking")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{role}: {:?}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

fn fleet_machine(role: &str) {
    let jit = JitRuntime::new(JitConfig::from_env().unwrap()).unwrap();
    let sigmoid = reference::sigmoid();
    let x = [Value::from(array(&[1, 5], 3))];
    let dispatched = jit.dispatch(&sigmoid, &x, &[]).unwrap();
    let remote = jit.remote_cache_stats().unwrap();
    match (role, dispatched) {
        ("publish", Dispatched::Compiled(_)) => {
            // Published when the runtime goes.
            drop(jit);
        }
        ("fetch", Dispatched::Interpret(reason)) => {
            let why = reason.to_string();
            assert!(why.contains("avx512f"), "{why}");
            assert!(
                remote.rejected >= 1,
                "the shared artifact was refused: {remote:?}"
            );
        }
        (role, Dispatched::Compiled(compiled)) => {
            panic!("{role}: ran code from {:?}", compiled.source())
        }
        (role, Dispatched::Interpret(reason)) => panic!("{role}: interpreted: {reason}"),
    }
}
