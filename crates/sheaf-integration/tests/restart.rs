//! A warm restart on the real runtime and compiler. A process runs the
//! ragged `mlp_layer` workload until its batch dim went dynamic and is
//! killed (SIGKILL, nothing runs at exit); a process started on the same
//! disk cache runs other batch sizes compiled from the first call, with no
//! compile: the policy file makes the batch dim dynamic at once, and every
//! variant comes from the disk cache. A damaged or stale policy file is
//! ignored with one warning: the sizes compile as in a new cache, with
//! results equal to the interpreter's.

mod support;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use sheaf_integration::{
    artifacts::ArtifactSource,
    lowering::stable_hash,
    lowering::{ArgSpec, Signature},
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::Origin,
    DType, JitConfig, JitRuntime, Provenance, Value,
};
use support::{array, assert_close};
use test_support::child::rerun;
use test_support::logs::Level;

/// The `jit_cache` and `sheaf_jit` events (up to info level) this thread
/// logs while `f` runs.
fn capture_logs<R>(f: impl FnOnce() -> R) -> (R, String) {
    test_support::logs::capture_logs(Level::INFO, f)
}

/// Set in the child process: the disk cache folder it learns in.
const CHILD: &str = "SHEAF_JIT_RESTART_CHILD";

/// What the child prints once its policy file holds the dynamic batch dim.
const LEARNED: &str = "restart child: the batch dim went dynamic";

/// A runtime on the disk cache in `dir`, compiling in `mode`.
fn runtime(dir: &Path, mode: CompileMode) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.to_path_buf()))
        .compile(|compile| compile.mode = mode)
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

/// `mlp_layer` at batch `batch`, checked against the interpreter; how it
/// ran and where its variant came from.
fn mlp_call(jit: &JitRuntime, batch: usize, seed: u32) -> (Provenance, Option<ArtifactSource>) {
    let args = [
        Value::from(array(&[batch, 256], seed)),
        Value::from(array(&[256, 256], 1)),
        Value::from(array(&[256], 2)),
    ];
    let expected = reference::interpret_mlp_layer(&args).unwrap();
    let result = jit
        .call(&reference::mlp_layer(), &args, &[], |args, _, _| {
            reference::interpret_mlp_layer(args)
        })
        .unwrap();
    assert_close(
        &result.outputs[0],
        &expected[0],
        &format!("mlp_layer at batch {batch}"),
    );
    let source = result.source();
    (result.provenance, source)
}

/// The signature of `mlp_layer` with a dynamic batch.
fn any_batch() -> Signature {
    Signature::builder()
        .arg(DType::F32, &[ArgSpec::DYNAMIC, 256])
        .arg(DType::F32, &[256, 256])
        .arg(DType::F32, &[256])
        .build()
}

/// The one policy file of the disk cache in `dir`.
fn the_policy_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = fs::read_dir(dir.join("policy"))
        .unwrap()
        .map(|item| item.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// The child: learns in `dir` until the batch dim is dynamic, says so,
/// and waits to be killed.
fn learn_until_killed(dir: &Path) -> ! {
    let jit = runtime(dir, CompileMode::Blocking);
    let mlp = reference::mlp_layer();
    for (i, batch) in reference::ragged_batch_sizes(100, 128)
        .into_iter()
        .enumerate()
    {
        mlp_call(&jit, batch, i as u32);
        let stats = jit.stats();
        if stats
            .function(mlp.id())
            .unwrap()
            .last_generalization
            .is_some()
        {
            break;
        }
    }
    println!("{LEARNED}");
    loop {
        std::thread::park();
    }
}

#[test]
fn a_killed_process_restarts_warm_with_no_compile() {
    const TEST: &str = "a_killed_process_restarts_warm_with_no_compile";
    if let Some(dir) = std::env::var_os(CHILD) {
        learn_until_killed(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = rerun(TEST)
        .env(CHILD, dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let learned = stdout
        .lines()
        .map_while(Result::ok)
        // The harness prints the test's name on the line before it.
        .any(|line| line.ends_with(LEARNED));
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(
        learned,
        "the child ended before its dim went dynamic: {status}"
    );
    assert_eq!(status.signal(), Some(9), "killed: {status}");

    // Another process on the same disk cache, compiling in the background
    // (the default): batch sizes the child never ran, each compiled from
    // its first call.
    let jit = runtime(dir.path(), CompileMode::Background);
    let seen = reference::ragged_batch_sizes(100, 128);
    let mut calls = 0;
    for (i, batch) in reference::ragged_batch_sizes(400, 128)
        .into_iter()
        .enumerate()
        .skip(100)
    {
        let (provenance, source) = mlp_call(&jit, batch, i as u32);
        let Provenance::Compiled(origin) = &provenance else {
            panic!("call {calls} (batch {batch}) ran in the interpreter: {provenance:?}");
        };
        assert!(
            calls > 0 || matches!(origin, Origin::CompiledNow { .. }),
            "{origin:?}"
        );
        assert_eq!(source, Some(ArtifactSource::DiskCache), "batch {batch}");
        calls += 1;
        if calls == 1 {
            assert!(
                !seen[..3].contains(&batch),
                "the first call is a size the child did not compile"
            );
        }
    }
    let profile = jit.profile();
    assert_eq!(
        profile.loaded_from(ArtifactSource::Compiler),
        0,
        "no compile: {profile}"
    );
    assert!(jit.compiler().is_none(), "the compiler was never loaded");
    assert_eq!(jit.disk_cache_stats().misses, 0);
    let stats = jit.stats();
    let f = stats.function(reference::mlp_layer().id()).unwrap();
    assert_eq!(
        f.last_generalization.as_ref().map(|g| g.signature()),
        Some(&any_batch()),
        "{stats}"
    );
    assert_eq!(f.counters.fallback_calls, 0, "{stats}");
}

#[test]
fn a_damaged_or_stale_policy_file_is_ignored_with_one_warning() {
    let dir = tempfile::tempdir().unwrap();
    let ((), logs) = capture_logs(|| {
        let jit = runtime(dir.path(), CompileMode::Blocking);
        for batch in [3, 5, 7] {
            mlp_call(&jit, batch, batch as u32);
        }
    });
    assert!(!logs.contains("WARN sheaf_jit::cache"), "{logs}");
    let file = the_policy_file(dir.path());
    let learned = fs::read_to_string(&file).unwrap();
    assert!(learned.contains("\ndynamic\t0.0\t"), "{learned}");

    // Another definition hash, its end line made to match.
    let definition = format!("\t{:016x}\n", reference::mlp_layer().id().definition_hash());
    let stale = learned.replacen(&definition, "\t0123456789abcdef\n", 1);
    let at = stale.trim_end_matches('\n').rfind('\n').unwrap() + 1;
    let body = &stale[..at];
    let stale = format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes()));
    let cases = [
        (
            "garbage",
            b"\x00\x01 not a policy".to_vec(),
            "not a policy file",
        ),
        (
            "another definition",
            stale.into_bytes(),
            "another definition of `mlp_layer`",
        ),
    ];
    for (round, (what, bytes, why)) in cases.into_iter().enumerate() {
        fs::write(&file, bytes).unwrap();
        let first = 11 + 10 * round;
        let ((), logs) = capture_logs(|| {
            let jit = runtime(dir.path(), CompileMode::Blocking);
            // As in a new cache: one static size compiles, then the
            // dynamic variant (on disk already) serves the second on.
            for batch in [first, first + 2, first + 4, first] {
                assert!(mlp_call(&jit, batch, 7).0.is_compiled(), "{what}");
            }
            let profile = jit.profile();
            assert_eq!(
                profile.loaded_from(ArtifactSource::Compiler),
                1,
                "{what}: {profile}"
            );
            assert_eq!(profile.loaded_from(ArtifactSource::DiskCache), 1, "{what}");
        });
        let warnings: Vec<&str> = logs
            .lines()
            .filter(|l| l.contains("WARN sheaf_jit::cache"))
            .collect();
        assert_eq!(warnings.len(), 1, "{what}: {logs}");
        assert!(
            warnings[0].contains("ignoring the learned policy of `mlp_layer`")
                && warnings[0].contains(why),
            "{what}: {}",
            warnings[0]
        );
        let written = fs::read_to_string(&file).unwrap();
        assert!(written.contains("\ndynamic\t0.0\t"), "{what}: rewritten");
    }
}
