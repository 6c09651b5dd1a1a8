//! A process that ends while compiles run ends with its own exit status:
//! never a crash. Each case runs in a child process of this test binary
//! that calls the runtime from other threads (ragged `mlp_layer` and
//! `softmax` calls, compiling new signatures; with `busy`, a 512² matmul
//! running compiled on the `local-task` device beside `local-sync`) and,
//! after a delay spread over its first compile and later ones, its test
//! returns, calls `exit(17)` or panics (on libtest's thread of the test:
//! returning and panicking end the process from `main`).

mod support;

use std::io::{Read, Seek, SeekFrom};
use std::process::Stdio;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    JitConfig, JitFunction, JitRuntime, Value,
};

/// Set in a child: `mode action delay_ms busy`.
const CHILD: &str = "SHEAF_JIT_TEST_EXIT_CASE";

/// Children per mode (three ways to end each); `SHEAF_JIT_TEST_EXIT_CHILDREN`
/// overrides it.
const CHILDREN_PER_MODE: usize = 64;

/// How many children run at once.
const CHILDREN_AT_ONCE: usize = 4;

/// The latest a child ends, after its runtime is up: past the compiler's
/// load and the first compiles.
const LATEST_END_MS: u64 = 1_500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Return,
    Exit,
    Panic,
}

impl End {
    const ALL: [End; 3] = [End::Return, End::Exit, End::Panic];

    fn name(self) -> &'static str {
        match self {
            End::Return => "return",
            End::Exit => "exit",
            End::Panic => "panic",
        }
    }

    fn parse(text: &str) -> End {
        End::ALL
            .into_iter()
            .find(|end| end.name() == text)
            .unwrap_or_else(|| panic!("unknown end `{text}`"))
    }

    /// The status the program itself ends with: libtest's 0 after a test
    /// that returns, `exit`'s argument, libtest's 101 after a test panics.
    fn status(self) -> i32 {
        match self {
            End::Return => 0,
            End::Exit => 17,
            End::Panic => 101,
        }
    }
}

#[test]
fn a_process_ending_during_compiles_exits_with_its_own_status() {
    if let Ok(case) = std::env::var(CHILD) {
        run_child(&case);
        return;
    }
    let per_mode = std::env::var("SHEAF_JIT_TEST_EXIT_CHILDREN")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CHILDREN_PER_MODE);
    let mut cases = Vec::new();
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for mode in ["background", "blocking"] {
        for i in 0..per_mode {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let end = End::ALL[i % 3];
            // Half of the children end in their first 300 ms (the
            // compiler's load and first compile), the rest later.
            let delay = if i % 2 == 0 {
                state % 300
            } else {
                state % LATEST_END_MS
            };
            let busy = (i / 3) % 2 == 1;
            cases.push((format!("{mode} {} {delay} {busy}", end.name()), end));
        }
    }
    let started = Instant::now();
    let failures = run_children(
        "a_process_ending_during_compiles_exits_with_its_own_status",
        CHILD,
        &cases,
        CHILDREN_AT_ONCE,
    );
    println!(
        "{} children in {:.1?}: {} ended with a status of their own",
        cases.len(),
        started.elapsed(),
        cases.len() - failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Runs `test` of this binary once per case, `at_once` children at a time
/// (a new one started as soon as one ends), with `variable` set to the
/// case's text; returns a line for each child that did not end with its
/// case's own status. Their stderr goes to a file, not a pipe: an
/// `iree-compile` a child started may outlive it, holding a pipe open.
fn run_children(
    test: &str,
    variable: &str,
    cases: &[(String, End)],
    at_once: usize,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut waiting = cases.iter();
    let mut running = Vec::new();
    loop {
        while running.len() < at_once {
            let Some(case) = waiting.next() else { break };
            let stderr = tempfile::tempfile().unwrap();
            let child = test_support::child::rerun(test)
                .env(variable, &case.0)
                .stdout(Stdio::null())
                .stderr(stderr.try_clone().unwrap())
                .spawn()
                .unwrap();
            running.push((case, child, stderr));
        }
        if running.is_empty() {
            return failures;
        }
        let Some(ended) = running
            .iter_mut()
            .position(|(_, child, _)| child.try_wait().unwrap().is_some())
        else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let ((case, end), mut child, mut stderr) = running.swap_remove(ended);
        let status = child.wait().unwrap();
        if status.code() != Some(end.status()) {
            let mut text = String::new();
            stderr.seek(SeekFrom::Start(0)).unwrap();
            stderr.read_to_string(&mut text).unwrap();
            let last: Vec<&str> = text.lines().rev().take(4).collect();
            failures.push(format!("{case}: {status:?} ({})", last.join(" | ")));
        }
    }
}

fn run_child(case: &str) {
    let fields: Vec<&str> = case.split(' ').collect();
    let [mode, end, delay, busy] = fields[..] else {
        panic!("bad case `{case}`");
    };
    let mode = match mode {
        "blocking" => CompileMode::Blocking,
        _ => CompileMode::Background,
    };
    let (end, delay) = (End::parse(end), delay.parse::<u64>().unwrap());
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = mode)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    for caller in 0..2 {
        let jit = jit.clone();
        std::thread::spawn(move || call_ragged(&jit, caller));
    }
    if busy == "true" {
        let jit = jit.clone();
        std::thread::spawn(move || call_matmul(&jit));
    }
    std::thread::sleep(Duration::from_millis(delay));
    match end {
        End::Return => {}
        End::Exit => std::process::exit(17),
        End::Panic => panic!("the child panics on purpose"),
    }
}

/// Calls `mlp_layer` on ragged batches and `softmax` on growing rows, each
/// new signature a miss, until the process ends.
fn call_ragged(jit: &JitRuntime, caller: usize) {
    let mlp = reference::mlp_layer();
    let softmax = reference::softmax();
    let w = Value::host(ArrayD::<f32>::ones(IxDyn(&[64, 32])));
    let b = Value::host(ArrayD::<f32>::zeros(IxDyn(&[32])));
    for (i, batch) in reference::ragged_batch_sizes(100_000, 64)
        .into_iter()
        .enumerate()
    {
        let x = Value::host(ArrayD::<f32>::ones(IxDyn(&[batch, 64])));
        let args = [x, w.clone(), b.clone()];
        jit.call(&mlp, &args, &[], |args, _, _| {
            reference::interpret_mlp_layer(args)
        })
        .unwrap();
        let row = 1 + (i + caller) % 24;
        let t = [reference::temperature(0.5)];
        let x = [Value::host(ArrayD::<f32>::ones(IxDyn(&[2, row])))];
        jit.call(&softmax, &x, &t, |args, _, _| {
            reference::interpret_softmax(args, 0.5)
        })
        .unwrap();
    }
}

/// Runs a 512² matmul compiled (blocking, so it runs compiled from its
/// first call), on the `local-task` device where that is on, until the
/// process ends.
fn call_matmul(jit: &JitRuntime) {
    let matmul: JitFunction = reference::matmul().with_compile_mode(CompileMode::Blocking);
    let a = Value::host(ArrayD::<f32>::ones(IxDyn(&[512, 512])));
    loop {
        jit.call(&matmul, &[a.clone(), a.clone()], &[], |args, _, _| {
            reference::interpret_matmul(args)
        })
        .unwrap();
    }
}

/// Set in a child of the in-process tests: `end delay_ms disk_folder`.
const FIRST_COMPILE_CHILD: &str = "SHEAF_JIT_TEST_FIRST_IN_PROCESS_COMPILE";

/// Points at which a child ends, spread from 0 to 600 ms over its first
/// in-process compile (the library's load, its first pipeline, LLVM's code
/// generation), for each way of ending; `SHEAF_JIT_TEST_FIRST_COMPILE_ENDS`
/// overrides their number.
const FIRST_COMPILE_ENDS: u64 = 12;

/// The statics of `libIREECompiler.so` that a process's first compile
/// constructs register their destructors after the exit handler that
/// waits for compiles, so they ran first, under the compile: 3 of 20 of
/// these children died of SIGSEGV before the main thread's exit guard
/// (`iree-safe/src/process_exit.rs`), 11 of 12 in the probe. Each
/// child has a disk cache of its own (so the exit hook waits for its
/// compile) and, after its first call queued its first compile, its test
/// returns or panics, and libtest's main thread then ends the process
/// (status 0 or 101) from `main`, which the guard covers.
#[test]
fn ending_main_during_the_first_in_process_compile_exits_with_its_own_status() {
    first_compile_ends(
        "ending_main_during_the_first_in_process_compile_exits_with_its_own_status",
        &[End::Return, End::Panic],
    );
}

/// The same children calling `exit(17)` on the thread of their test, not
/// the main thread: not covered, and it cannot be (see
/// `iree-safe/src/compiler/exit_gate.rs`). Kept to measure it.
#[test]
#[ignore = "exit() on a thread other than main's during the process's first in-process compile \
            is not covered (iree-safe's compiler/exit_gate.rs says why): 7 of 80 such children \
            died of SIGSEGV or SIGABRT in LLVM on 2026-12-03; run with --ignored to measure"]
fn exit_on_another_thread_during_the_first_in_process_compile_exits_with_its_own_status() {
    first_compile_ends(
        "exit_on_another_thread_during_the_first_in_process_compile_exits_with_its_own_status",
        &[End::Exit],
    );
}

/// Runs `test` in children that end during their first in-process compile
/// in each of `ends` at each of the points, two at a time (the load of
/// the compiler library is slower under load, when more of the window is
/// hit); the child's part when [`FIRST_COMPILE_CHILD`] is set.
fn first_compile_ends(test: &str, ends: &[End]) {
    if !cfg!(all(feature = "in-process-compiler", feature = "disk-cache")) {
        println!("skipped: needs the in-process compiler and the disk cache");
        return;
    }
    if let Ok(case) = std::env::var(FIRST_COMPILE_CHILD) {
        run_first_compile_child(&case);
        return;
    }
    let points = std::env::var("SHEAF_JIT_TEST_FIRST_COMPILE_ENDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(FIRST_COMPILE_ENDS);
    let mut cases = Vec::new();
    let mut disks = Vec::new();
    for &end in ends {
        for i in 0..points {
            let delay = i * 600 / points.saturating_sub(1).max(1);
            let disk = tempfile::tempdir().unwrap();
            cases.push((
                format!("{} {delay} {}", end.name(), disk.path().display()),
                end,
            ));
            disks.push(disk);
        }
    }
    let failures = run_children(test, FIRST_COMPILE_CHILD, &cases, 2);
    println!(
        "{} children ended during their first in-process compile: {} with their own status",
        cases.len(),
        cases.len() - failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A child of [`first_compile_ends`]: a disk cache of its own (the
/// case's folder, fresh for each child) and the in-process compiler; ends
/// as its case says.
fn run_first_compile_child(case: &str) {
    let (end, rest) = case.split_once(' ').unwrap();
    let (delay, dir) = rest.split_once(' ').unwrap();
    let (end, delay) = (End::parse(end), delay.parse::<u64>().unwrap());
    let dir = std::path::PathBuf::from(dir);
    let config = JitConfig::builder()
        .compile(|compile| {
            compile.mode = CompileMode::Background;
            compile.compiler = sheaf_integration::compiler::CompilerPreference::InProcess;
        })
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir))
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let mlp = reference::mlp_layer();
    let x = Value::host(ArrayD::<f32>::ones(IxDyn(&[8, 64])));
    let w = Value::host(ArrayD::<f32>::ones(IxDyn(&[64, 32])));
    let b = Value::host(ArrayD::<f32>::zeros(IxDyn(&[32])));
    jit.call(&mlp, &[x, w, b], &[], |args, _, _| {
        reference::interpret_mlp_layer(args)
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(delay));
    match end {
        End::Return => {}
        End::Exit => std::process::exit(17),
        End::Panic => panic!("the child panics on purpose"),
    }
}
