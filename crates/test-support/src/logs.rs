//! Capturing the `tracing` events a test's own thread logs.
//!
//! A process-global subscriber (at `DEBUG`, the most any test reads) writes
//! each thread's events to that thread's buffer, keeping those at or below
//! the level the running capture asked for. Scoped subscribers
//! (`with_default`) are avoided on purpose: tracing caches per-callsite
//! interest process-wide, and a callsite first reached by a test without a
//! subscriber can stay disabled for a test with one. So a test binary that
//! checks logs must capture around every call of the code under test, in
//! every test, and sits in a `tests/*.rs` file of its own (the subscriber
//! is the process's).

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::Once;

use tracing::Metadata;
use tracing_subscriber::fmt::MakeWriter;

pub use tracing::Level;

/// Runs `f` and returns its result with the events up to `level` (`INFO`:
/// info, warnings and errors; `DEBUG`: those and debug) that this thread
/// logged meanwhile, one formatted line each, without time or colour.
///
/// # Panics
///
/// When another global subscriber was installed first, or `level` is
/// `TRACE` (the subscriber stops at `DEBUG`).
pub fn capture_logs<R>(level: Level, f: impl FnOnce() -> R) -> (R, String) {
    assert!(
        level <= Level::DEBUG,
        "capture_logs reads up to DEBUG, not {level}"
    );
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(Level::DEBUG)
            .with_writer(ThreadBuffers)
            .with_ansi(false)
            .without_time()
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("no other global subscriber");
    });
    LOGS.with(|logs| logs.borrow_mut().clear());
    let outer = LEVEL.with(|current| current.replace(Some(level)));
    let result = f();
    LEVEL.with(|current| current.set(outer));
    let bytes = LOGS.with(|logs| std::mem::take(&mut *logs.borrow_mut()));
    (result, String::from_utf8(bytes).expect("logs are UTF-8"))
}

thread_local! {
    /// What this thread captured so far.
    static LOGS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// The level of the capture running on this thread, if any.
    static LEVEL: Cell<Option<Level>> = const { Cell::new(None) };
}

/// Makes a writer per event: this thread's buffer when the event is within
/// the level of this thread's capture, else nowhere.
struct ThreadBuffers;

impl<'a> MakeWriter<'a> for ThreadBuffers {
    type Writer = ThreadBuffer;

    fn make_writer(&'a self) -> ThreadBuffer {
        ThreadBuffer { keep: false }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> ThreadBuffer {
        let keep = LEVEL
            .with(Cell::get)
            .is_some_and(|level| *meta.level() <= level);
        ThreadBuffer { keep }
    }
}

/// This thread's buffer, or a sink.
struct ThreadBuffer {
    keep: bool,
}

impl io::Write for ThreadBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.keep {
            LOGS.with(|logs| logs.borrow_mut().extend_from_slice(bytes));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_keeps_its_threads_events_up_to_its_level() {
        let ((), info) = capture_logs(Level::INFO, || {
            tracing::warn!("kept warning");
            tracing::debug!("dropped debug");
            std::thread::spawn(|| tracing::warn!("another thread's"))
                .join()
                .unwrap();
        });
        assert!(info.contains("kept warning"), "{info}");
        assert!(!info.contains("dropped debug"), "{info}");
        assert!(!info.contains("another thread's"), "{info}");
        let ((), debug) = capture_logs(Level::DEBUG, || tracing::debug!("kept debug"));
        assert!(
            debug.contains("kept debug") && !debug.contains("warning"),
            "{debug}"
        );
    }
}
