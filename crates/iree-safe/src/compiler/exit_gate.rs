//! In-process compiles and process exit.
//!
//! The compiler library is C++: the static destructors it registers tear
//! down LLVM's and MLIR's global state (pass and target registries, option
//! tables, library-function maps) when the process exits (`exit`, or
//! returning from `main`). A compile still running on another thread then
//! reads freed memory: a program that returned from `main` while a
//! background compile ran died of SIGSEGV in `llvm::PassRegistry` and
//! `llvm::TargetLibraryInfoImpl`. So every in-process compile, and the
//! loading of the library (its initializers construct statics and register
//! their destructors; `ireeCompilerGlobalInitialize` then reads them),
//! holds a [`Pass`] through the gate, and an `atexit` handler closes the
//! gate and waits for the passes held; a compile or a load asked for once
//! the gate is closed is refused ([`CompileError::Exiting`]).
//!
//! The handler that closes the gate is the one of `process_exit.rs`,
//! registered again after each compile: `exit` calls its handlers in the
//! reverse order of their registration, C++ destructors included, and the
//! library constructs many of its statics lazily, during compiles, so a
//! handler registered once at load would run after their destructors. At
//! exit the latest registration runs before the destructors of every
//! static that the compiles before it constructed. A static first
//! constructed by a compile still running at exit is covered by the main
//! thread's exit guard of `process_exit.rs` (glibc's Linux), which runs
//! the same handler before any `atexit` handler when the main thread
//! exits (returning from `main`, `exit` on the main thread, a panic that
//! ends `main`).
//!
//! `exit` called on **another** thread while the library loads or while
//! one of the process's first compiles runs is not covered, and cannot be:
//! only the exiting thread's thread-locals are destroyed before the
//! `atexit` handlers, and a destructor that a running compile registers
//! after the handler's latest registration runs before it (C11
//! 7.22.4.4). C++ itself leaves that case undefined: a thread that uses
//! a static after `exit` has destroyed it (the C++ standard, section
//! basic.start.term). A program that calls `exit` from a thread other
//! than `main`'s while compiles may run uses the subprocess compiler (the
//! default), whose statics live in another process.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::error::CompileError;

/// The compiles in flight, and whether exit has begun.
struct Gate {
    running: usize,
    closed: bool,
}

static GATE: Mutex<Gate> = Mutex::new(Gate {
    running: 0,
    closed: false,
});

/// Notified when the last compile in flight ends.
static DRAINED: Condvar = Condvar::new();

/// How long exit waits for the compiles in flight: far longer than a
/// compile takes; past it the process exits anyway rather than hang.
const EXIT_WAIT: Duration = Duration::from_secs(120);

fn gate() -> MutexGuard<'static, Gate> {
    // The counts stay consistent whatever panicked while the lock was held:
    // each change is one statement.
    GATE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A compile or a load of the library in flight: the process's exit waits
/// until it is dropped.
#[derive(Debug)]
pub(crate) struct Pass(());

impl Pass {
    /// Enters the gate, unless exit has begun ([`CompileError::Exiting`]).
    pub(crate) fn enter() -> Result<Pass, CompileError> {
        let mut gate = gate();
        if gate.closed {
            return Err(CompileError::Exiting);
        }
        gate.running += 1;
        Ok(Pass(()))
    }
}

impl Drop for Pass {
    /// Leaves the gate; then, unless exit has begun, registers the exit
    /// handler again, after whatever this compile constructed.
    fn drop(&mut self) {
        let closed = {
            let mut gate = gate();
            gate.running -= 1;
            if gate.running == 0 {
                DRAINED.notify_all();
            }
            gate.closed
        };
        if !closed {
            // Registration fails only when the C library is out of memory:
            // exit is then covered by the earlier registrations.
            let _ = register_exit_handler();
        }
    }
}

/// Registers the exit handler of `process_exit.rs` (again), set to run
/// [`close_and_wait`] after the hooks.
pub(crate) fn register_exit_handler() -> Result<(), crate::process_exit::AtExitError> {
    crate::process_exit::register_handler_then(close_and_wait)
}

/// Called by the exit handler: no compile starts from now on; waits (at
/// most [`EXIT_WAIT`]) for those running. Its later runs (the handler is
/// registered many times) find nothing running.
fn close_and_wait() {
    let mut gate = gate();
    gate.closed = true;
    let _drained = DRAINED
        .wait_timeout_while(gate, EXIT_WAIT, |gate| gate.running > 0)
        .unwrap_or_else(PoisonError::into_inner);
}
