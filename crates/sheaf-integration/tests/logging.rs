//! Where the JIT's events go: the library's stderr log (`SHEAF_JIT_LOG`,
//! and the deprecated `SHEAF_JIT_TRACE`), never over a program's own
//! `tracing` subscriber, and a `log` logger when the program has no
//! subscriber. Each test runs in a child process of its own, since a
//! subscriber and a logger are the process's.

mod support;

use std::fs;
use std::path::Path;
use std::process::Output;
use std::sync::Mutex;

use sheaf_integration::{settings::DiskCacheFolder, ErrorChain, JitError, JitRuntime};

const CHILD: &str = "SHEAF_JIT_LOGGING_CHILD";

fn runtime(dir: &Path) -> Result<JitRuntime, JitError> {
    JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
            .build()
            .unwrap(),
    )
}

/// Two calls of two shapes (a miss each, the second explained against the
/// first), then a process restart on a damaged entry (refused, rebuilt).
fn misses_and_a_damaged_entry() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime(dir.path()).unwrap();
    support::checked_sigmoid(&jit, &[2, 3], 5);
    drop(jit);
    let path = support::the_entry(dir.path());
    let mut bytes = fs::read(&path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(&path, bytes).unwrap();
    let jit = runtime(dir.path()).unwrap();
    support::checked_sigmoid(&jit, &[2, 3], 5);
}

/// Runs this test binary's `test` in a child with `env`.
fn child(test: &str, env: &[(&str, &str)]) -> Output {
    let output = test_support::child::rerun(test)
        .env(CHILD, "1")
        .env_remove("SHEAF_JIT_LOG")
        .env_remove("SHEAF_JIT_TRACE")
        .env_remove("RUST_LOG")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{test} failed:\n{stderr}");
    output
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

#[test]
fn sheaf_jit_log_prints_the_filtered_events_to_stderr() {
    const TEST: &str = "sheaf_jit_log_prints_the_filtered_events_to_stderr";
    if !in_child() {
        let output = child(TEST, &[("SHEAF_JIT_LOG", "warn,sheaf_jit=debug")]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        for wanted in [
            "logging the JIT's events to stderr (SHEAF_JIT_LOG=warn,sheaf_jit=debug)",
            "DEBUG sheaf_jit::recompiles",
            "miss #1",
            // The fields are printed.
            "entry=",
            // The compile span, around the disk cache's events.
            "compile{function=\"sigmoid\" signature=\"(f32[2,3])\" key=",
        ] {
            assert!(stderr.contains(wanted), "no `{wanted}` in:\n{stderr}");
        }
        let refused = stderr.lines().any(|line| {
            line.starts_with(" WARN")
                && line.contains("sheaf_jit::cache:")
                && line.contains("failed authentication")
        });
        assert!(refused, "no refused entry in:\n{stderr}");
        // The filter holds: iree-safe's debug events are not shown.
        assert!(!stderr.contains("DEBUG iree_safe"), "{stderr}");
        return;
    }
    misses_and_a_damaged_entry();
    assert!(tracing::enabled!(target: "iree_safe::compiler", tracing::Level::WARN));
    assert!(!tracing::enabled!(target: "iree_safe::compiler", tracing::Level::DEBUG));
}

#[test]
fn each_call_is_a_span_with_its_signature_and_outcome() {
    const TEST: &str = "each_call_is_a_span_with_its_signature_and_outcome";
    if !in_child() {
        let output = child(TEST, &[("SHEAF_JIT_LOG", "sheaf_jit::call=trace")]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let calls: Vec<_> = stderr
            .lines()
            .filter(|line| line.contains("call{function=\"sigmoid\" signature=(f32[2,3]) outcome="))
            .collect();
        // Two calls (compiled, then, after a restart on a damaged entry,
        // compiled again), each closed once with its outcome.
        assert_eq!(calls.len(), 2, "{stderr}");
        for line in &calls {
            assert!(line.contains("outcome=\"compiled (Compiled("), "{line}");
            assert!(line.ends_with("sheaf_jit::call: close"), "{line}");
        }
        // Nothing but the calls: the filter names their target alone.
        assert!(!stderr.contains("sheaf_jit::recompiles"), "{stderr}");
        return;
    }
    misses_and_a_damaged_entry();
}

#[test]
fn sheaf_jit_trace_is_still_the_debug_filter() {
    const TEST: &str = "sheaf_jit_trace_is_still_the_debug_filter";
    if !in_child() {
        let output = child(TEST, &[("SHEAF_JIT_TRACE", "1")]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("DEBUG sheaf_jit::recompiles"), "{stderr}");
        assert!(
            stderr.contains("SHEAF_JIT_LOG=warn,sheaf_jit=debug"),
            "{stderr}"
        );
        return;
    }
    misses_and_a_damaged_entry();
}

#[test]
fn without_sheaf_jit_log_the_library_prints_nothing() {
    const TEST: &str = "without_sheaf_jit_log_the_library_prints_nothing";
    if !in_child() {
        let output = child(TEST, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("sheaf_jit"), "{stderr}");
        return;
    }
    misses_and_a_damaged_entry();
    assert!(!sheaf_integration::logging::apply_env().unwrap());
}

#[test]
fn the_programs_subscriber_is_never_replaced() {
    const TEST: &str = "the_programs_subscriber_is_never_replaced";
    if !in_child() {
        let output = child(TEST, &[("SHEAF_JIT_LOG", "sheaf_jit=debug")]);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        // The program's subscriber (warnings, to stdout) got the note once,
        // and the warnings; its filter held (no debug line anywhere).
        let note =
            "SHEAF_JIT_LOG is not applied: this program installed its own tracing subscriber";
        assert_eq!(stdout.matches(note).count(), 1, "{stdout}");
        assert!(
            stdout.contains(
                "sheaf_jit::cache: refusing a disk-cache entry: it failed authentication"
            ),
            "{stdout}"
        );
        assert!(!stdout.contains("DEBUG"), "{stdout}");
        assert!(!stderr.contains("DEBUG"), "{stderr}");
        return;
    }
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stdout)
        .with_ansi(false)
        .without_time()
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    misses_and_a_damaged_entry();
}

#[test]
fn a_filter_that_does_not_parse_is_an_error_naming_the_variable() {
    const TEST: &str = "a_filter_that_does_not_parse_is_an_error_naming_the_variable";
    if !in_child() {
        child(TEST, &[("SHEAF_JIT_LOG", "sheaf_jit=loud")]);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let error = runtime(dir.path()).unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(
        message.contains("SHEAF_JIT_LOG=sheaf_jit=loud"),
        "{message}"
    );
    assert!(message.contains("RUST_LOG syntax"), "{message}");
}

/// The records a `log` logger received: target, level, message.
static RECORDS: Mutex<Vec<(String, log::Level, String)>> = Mutex::new(Vec::new());

/// A `log` logger as a log-based program has one (env_logger's place).
struct Collect;

impl log::Log for Collect {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("sheaf_jit")
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let entry = (
                record.target().to_owned(),
                record.level(),
                record.args().to_string(),
            );
            RECORDS.lock().unwrap().push(entry);
        }
    }

    fn flush(&self) {}
}

#[test]
fn a_log_logger_receives_the_events_without_a_tracing_subscriber() {
    const TEST: &str = "a_log_logger_receives_the_events_without_a_tracing_subscriber";
    if !in_child() {
        child(TEST, &[]);
        return;
    }
    log::set_logger(&Collect).unwrap();
    log::set_max_level(log::LevelFilter::Debug);
    misses_and_a_damaged_entry();
    let records = RECORDS.lock().unwrap();
    let has = |target: &str, level: log::Level, text: &str| {
        records
            .iter()
            .any(|(t, l, m)| t == target && *l == level && m.contains(text))
    };
    assert!(
        has("sheaf_jit::recompiles", log::Level::Debug, "miss #1"),
        "{records:#?}"
    );
    assert!(
        has("sheaf_jit::recompiles", log::Level::Debug, "compiled"),
        "{records:#?}"
    );
    assert!(
        has(
            "sheaf_jit::cache",
            log::Level::Warn,
            "failed authentication"
        ),
        "{records:#?}"
    );
}
