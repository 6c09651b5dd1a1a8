//! What a runtime finishes when the process exits: a short program's
//! background compiles reach the disk cache, so the next run of the same
//! program runs compiled from its first call; a runtime kept in a `static`
//! prints its profile, once (as JSON when asked to, and adds its counts
//! to the disk cache's), as does one dropped before the exit, and a
//! broken stderr loses the profile without a panic. Each program is a child
//! process of this test binary.

mod support;

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    JitConfig, JitRuntime, Provenance, Value,
};

/// Set in a child: which program it runs, and its disk cache folder.
const CHILD: &str = "SHEAF_JIT_TEST_EXIT_PROGRAM";
const CACHE: &str = "SHEAF_JIT_TEST_EXIT_CACHE";

/// Runs this test binary's `test` as a child with `program`; its output.
fn run_child(test: &str, program: &str, cache: &Path) -> std::process::Output {
    let output = test_support::child::rerun(test)
        .env(CHILD, program)
        .env(CACHE, cache)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{program}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn a_short_program_runs_compiled_from_its_first_call_on_its_next_runs() {
    if std::env::var(CHILD).as_deref() == Ok("short") {
        short_program(Path::new(&std::env::var_os(CACHE).unwrap()));
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for run in 1..=3 {
        let start = Instant::now();
        let output = run_child(
            "a_short_program_runs_compiled_from_its_first_call_on_its_next_runs",
            "short",
            cache.path(),
        );
        let stdout = String::from_utf8(output.stdout).unwrap();
        let calls: Vec<String> = stdout
            .lines()
            // libtest may print on the same line before it.
            .filter_map(|line| line.split_once("call ").map(|(_, call)| call))
            .map(str::to_owned)
            .collect();
        println!("run {run} ({:.2?}): {}", start.elapsed(), calls.join(", "));
        runs.push(calls);
    }
    assert_eq!(runs[0].len(), 6, "{:?}", runs[0]);
    assert!(
        runs[0][0].ends_with("interpreted"),
        "the first run interprets its first call while it compiles: {:?}",
        runs[0]
    );
    for run in &runs[1..] {
        assert!(
            run.iter().all(|call| call.ends_with("compiled")),
            "a later run runs every call compiled, its first included: {run:?}"
        );
    }
}

/// The short program: two functions, three calls each, in the default
/// (background) mode, and it returns; one line per call.
fn short_program(cache: &Path) {
    let jit = JitRuntime::new(
        JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Background)
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.to_path_buf()))
            .build()
            .unwrap(),
    )
    .unwrap();
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let x = Value::host(ArrayD::<f32>::ones(IxDyn(&[100_000])));
    let rows = Value::host(ArrayD::<f32>::ones(IxDyn(&[32, 1000])));
    let t = [reference::temperature(0.5)];
    let said = |name: &str, provenance: &Provenance| {
        let how = if provenance.is_compiled() {
            "compiled"
        } else {
            "interpreted"
        };
        println!("call {name} {how}");
    };
    for _ in 0..3 {
        let sig = jit
            .call(&sigmoid, std::slice::from_ref(&x), &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        said("sigmoid", &sig.provenance);
        let soft = jit
            .call(&softmax, std::slice::from_ref(&rows), &t, |args, _, _| {
                reference::interpret_softmax(args, 0.5)
            })
            .unwrap();
        said("softmax", &soft.provenance);
    }
}

/// Where the program keeps its runtime, as Sheaf does.
static JIT: OnceLock<JitRuntime> = OnceLock::new();

#[test]
fn a_runtime_in_a_static_prints_its_profile_at_exit() {
    if std::env::var(CHILD).as_deref() == Ok("static") {
        let jit = JIT.get_or_init(|| {
            let config = JitConfig::builder()
                .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
                .profile_at_exit(true)
                .build()
                .unwrap();
            JitRuntime::new(config).unwrap()
        });
        let x = [Value::host(ArrayD::<f32>::ones(IxDyn(&[1, 5])))];
        jit.call(&reference::sigmoid(), &x, &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = run_child(
        "a_runtime_in_a_static_prints_its_profile_at_exit",
        "static",
        dir.path(),
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.matches("JIT profile").count(),
        1,
        "the profile, once:\n{stderr}"
    );
}

/// Where the JSON program keeps its runtime.
#[cfg(feature = "serde")]
static JSON_JIT: OnceLock<JitRuntime> = OnceLock::new();

#[test]
#[cfg(feature = "serde")]
fn a_runtime_in_a_static_prints_its_profile_as_json_and_adds_its_counts_at_exit() {
    const TEST: &str =
        "a_runtime_in_a_static_prints_its_profile_as_json_and_adds_its_counts_at_exit";
    if std::env::var(CHILD).as_deref() == Ok("json") {
        // As Sheaf configures it: from the environment.
        let jit = JSON_JIT.get_or_init(|| JitRuntime::new(JitConfig::from_env().unwrap()).unwrap());
        let x = [Value::host(ArrayD::<f32>::ones(IxDyn(&[1, 5])))];
        for _ in 0..3 {
            jit.call(&reference::sigmoid(), &x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        }
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = test_support::child::rerun(TEST)
        .env(CHILD, "json")
        .env("SHEAF_JIT_PROFILE", "json")
        .env("SHEAF_JIT_CACHE_DIR", dir.path())
        .env("SHEAF_JIT_COMPILE_MODE", "blocking")
        .output()
        .unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(output.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("{\""))
        .collect();
    assert_eq!(lines.len(), 1, "one JSON profile:\n{stderr}");
    let profile: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(profile["cache"]["total"]["calls"], 3, "{profile}");
    assert!(
        profile["phases"].as_array().unwrap().len() >= 7,
        "{profile}"
    );
    // The runtime in a static added its counts to the disk cache's at exit.
    let store = jit_store::ArtifactStore::open(jit_store::StoreConfig::at(dir.path())).unwrap();
    let totals = store.run_totals().unwrap();
    assert_eq!((totals.runs, totals.calls.calls), (1, 3), "{totals:?}");
}

#[test]
fn a_runtime_dropped_before_exit_prints_its_profile_once() {
    if std::env::var(CHILD).as_deref() == Ok("dropped") {
        // Blocking: no background compile holds the runtime past the drop.
        let config = JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .profile_at_exit(true)
            .build()
            .unwrap();
        let jit = JitRuntime::new(config).unwrap();
        let x = [Value::host(ArrayD::<f32>::ones(IxDyn(&[1, 5])))];
        jit.call(&reference::sigmoid(), &x, &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
        drop(jit);
        eprintln!("dropped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = run_child(
        "a_runtime_dropped_before_exit_prints_its_profile_once",
        "dropped",
        dir.path(),
    );
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.matches("JIT profile").count(),
        1,
        "the profile, once, at the drop:\n{stderr}"
    );
    assert!(
        stderr.find("JIT profile") < stderr.find("dropped"),
        "printed when dropped, not at exit:\n{stderr}"
    );
}

#[test]
fn a_runtime_dropped_with_a_broken_stderr_does_not_panic() {
    if std::env::var(CHILD).as_deref() == Ok("broken") {
        let config = JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .profile_at_exit(true)
            .build()
            .unwrap();
        let jit = JitRuntime::new(config).unwrap();
        // stderr a pipe whose reader left: writing to it fails (EPIPE).
        rustix::stdio::dup2_stderr(pipe_without_reader()).unwrap();
        drop(jit);
        println!("dropped");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let output = run_child(
        "a_runtime_dropped_with_a_broken_stderr_does_not_panic",
        "broken",
        dir.path(),
    );
    assert!(String::from_utf8_lossy(&output.stdout).contains("dropped"));
}

/// The write end of a pipe whose read end is closed.
fn pipe_without_reader() -> rustix::fd::OwnedFd {
    let (reader, writer) = rustix::pipe::pipe().unwrap();
    drop(reader);
    writer
}

/// A program with a disk cache and a profile to print that queues its
/// first compiles and, at once, is sent `signal` (it then sleeps: a
/// signal that did not end it would fail the test).
fn signalled_program(cache: &Path, signal: rustix::process::Signal) {
    let jit = JitRuntime::new(
        JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Background)
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.to_path_buf()))
            .profile_at_exit(true)
            .apply_env()
            .unwrap()
            .build()
            .unwrap(),
    )
    .unwrap();
    let sigmoid = reference::sigmoid();
    let x = Value::host(ArrayD::<f32>::ones(IxDyn(&[1000])));
    let call = jit
        .call(&sigmoid, std::slice::from_ref(&x), &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
    assert!(!call.provenance.is_compiled(), "queued, not compiled yet");
    rustix::process::kill_process(rustix::process::getpid(), signal).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(30));
}

/// SIGTERM and SIGINT skipped the exit hook: the queued compile and the
/// profile were lost (nothing on disk, no profile on stderr). Now both
/// finish the runtime first and still end the process by the signal;
/// `SHEAF_JIT_EXIT_ON_SIGNALS=off` leaves them as they were.
#[test]
fn sigterm_and_sigint_finish_the_runtime_and_still_end_the_process_by_the_signal() {
    use rustix::process::Signal;
    use std::os::unix::process::ExitStatusExt;
    const TEST: &str =
        "sigterm_and_sigint_finish_the_runtime_and_still_end_the_process_by_the_signal";
    if let Ok(program) = std::env::var(CHILD) {
        let signal = match program.as_str() {
            "int" => Signal::INT,
            _ => Signal::TERM,
        };
        signalled_program(Path::new(&std::env::var_os(CACHE).unwrap()), signal);
        return;
    }
    for (program, number, finished) in [("term", 15, true), ("int", 2, true), ("off", 15, false)] {
        let cache = tempfile::tempdir().unwrap();
        let output = test_support::child::rerun(TEST)
            .env(CHILD, program)
            .env(CACHE, cache.path())
            .env(
                "SHEAF_JIT_EXIT_ON_SIGNALS",
                if finished { "on" } else { "off" },
            )
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        // A signal this process ignores (SIGINT in a background job of a
        // non-interactive shell) is ignored by the child too, and the
        // runtime leaves an ignored signal alone: the child then runs to
        // its end, which also finishes the runtime.
        let ended_by = (!ignored_here(number)).then_some(number);
        assert_eq!(
            output.status.signal(),
            ended_by,
            "{program}: ended by the signal: {:?}\n{stderr}",
            output.status
        );
        let stored = std::fs::read_dir(cache.path().join("vmfb"))
            .map(|entries| entries.count())
            .unwrap_or(0);
        let printed = stderr.matches("JIT profile").count();
        if finished {
            assert_eq!(printed, 1, "{program}: the profile, once:\n{stderr}");
            assert_eq!(stored, 1, "{program}: the queued compile reached the disk");
        } else {
            assert_eq!(printed, 0, "{program}: no profile:\n{stderr}");
        }
    }
}

/// Whether this process ignores `signal` (its bit in `SigIgn` of
/// `/proc/self/status`, which a child inherits).
fn ignored_here(signal: i32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .map(|hex| u64::from_str_radix(hex.trim(), 16).unwrap())
        .unwrap();
    mask & (1 << (signal - 1)) != 0
}
