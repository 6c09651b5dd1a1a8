//! SIGTERM and SIGINT end a process without `exit`: no `atexit` handler
//! runs, so the exit hooks of [`at_exit`](crate::at_exit) (a JIT runtime's
//! queued compiles, its profile) were lost when a job scheduler stopped a
//! program or a user pressed Ctrl-C. [`exit_on_signals`] makes both run the
//! exit work first, then end the process by the same signal, with its
//! default action: the exit status stays the signal's (143 and 130 in a
//! shell), and whoever waits for the process sees it killed by SIGTERM or
//! SIGINT.
//!
//! How: a handler only writes the signal's number to a pipe (`write` is
//! async-signal-safe, POSIX.1-2017 2.4.3); a thread reads it, runs the
//! exit work of `process_exit.rs` (the hooks, then the in-process
//! compiler's gate, which waits for the compiles in flight), restores the
//! signal's default action and sends it to the process again. A second
//! signal while that runs ends the process at once, as the first would
//! have without the handler. A signal whose action is not the default (the
//! program's own handler, or `SIG_IGN` under `nohup`) is left alone.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use rustix::fd::{BorrowedFd, IntoRawFd};

/// Why [`exit_on_signals`] could not take the signals.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "cannot run the exit hooks on SIGTERM and SIGINT ({0}): those signals end the process \
     without them; free file descriptors or threads, or leave the signals to the program"
)]
pub struct SignalsError(String);

/// The signals taken, with their names.
const SIGNALS: [(c_int, &str); 2] = [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")];

/// The pipe's write end, for the handler (-1 before it exists).
static WRITE_END: AtomicI32 = AtomicI32::new(-1);

/// Whether a signal came: a second one ends the process at once.
static FIRED: AtomicBool = AtomicBool::new(false);

/// What the one installation gave.
static INSTALLED: OnceLock<Result<Vec<&'static str>, SignalsError>> = OnceLock::new();

/// Longest the process lives after it sent itself the signal again (it
/// is delivered at once; this only bounds a process whose every thread
/// blocks it).
const REDELIVERY: Duration = Duration::from_secs(1);

/// Makes SIGTERM and SIGINT run the exit hooks before they end the
/// process (see the module's docs), once per process; later calls return
/// the first one's answer. Returns the names of the signals taken: those
/// whose action was the default.
///
/// # Errors
///
/// [`SignalsError`] when the pipe, the thread or a handler cannot be made;
/// the signals keep their default action then.
pub fn exit_on_signals() -> Result<Vec<&'static str>, SignalsError> {
    INSTALLED.get_or_init(install).clone()
}

fn install() -> Result<Vec<&'static str>, SignalsError> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|error| SignalsError(format!("no pipe: {error}")))?;
    std::thread::Builder::new()
        .name("exit on signal".into())
        .spawn(move || {
            let mut byte = [0u8];
            loop {
                match rustix::io::read(&read, &mut byte) {
                    Ok(1) => end_by(c_int::from(byte[0])),
                    Err(rustix::io::Errno::INTR) => continue,
                    // The write end is never closed: nothing else comes.
                    _ => return,
                }
            }
        })
        .map_err(|error| SignalsError(format!("no thread: {error}")))?;
    // Kept open for the process's life: the handler writes to it.
    WRITE_END.store(write.into_raw_fd(), Ordering::Release);
    let mut taken = Vec::new();
    for (signal, name) in SIGNALS {
        if current_action(signal) != Some(libc::SIG_DFL) {
            continue;
        }
        // SAFETY: a zeroed `sigaction` is a valid value of the C struct
        // (all its fields are integers, pointers or a bit set).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = handler as extern "C" fn(c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `sa_mask` is a live `sigset_t` of `action`.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        // SAFETY: `handler` is an `extern "C" fn(c_int)` that makes only
        // async-signal-safe calls (see it), with an empty mask and
        // `SA_RESTART`: a valid action (sigaction(2), POSIX.1-2017).
        let set = unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) };
        if set != 0 {
            return Err(SignalsError(format!("cannot set the action of {name}")));
        }
        taken.push(name);
    }
    Ok(taken)
}

/// The handler `signal` has now (`None` if it cannot be read).
fn current_action(signal: c_int) -> Option<libc::sighandler_t> {
    // SAFETY: a zeroed `sigaction` is a valid value of the C struct.
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: with a null new action, sigaction(2) only writes the
    // current one into `old`, which lives for the call.
    let read = unsafe { libc::sigaction(signal, std::ptr::null(), &mut old) };
    (read == 0).then_some(old.sa_sigaction)
}

/// The signal handler: hands the signal to the thread that ends the
/// process, or, for a second signal, ends it now.
extern "C" fn handler(signal: c_int) {
    if FIRED.swap(true, Ordering::AcqRel) {
        // SAFETY: `signal` and `raise` are async-signal-safe (POSIX.1-2017
        // 2.4.3); the default action of SIGTERM and SIGINT ends the process.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
        return;
    }
    let fd = WRITE_END.load(Ordering::Acquire);
    if fd >= 0 {
        // SAFETY: the write end is open for the process's life (never
        // closed after it is stored). rustix's `write` is the system call
        // itself, async-signal-safe, and leaves `errno` as it was.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        // The number fits a byte (SIGTERM is 15, SIGINT 2); a full pipe
        // means a signal is already on its way.
        let _ = rustix::io::write(fd, &[signal as u8]);
    }
}

/// Runs the exit work, then ends the process by `signal`'s default action.
fn end_by(signal: c_int) {
    crate::process_exit::run_exit_work();
    // SAFETY: restores the default action (sigaction(2) through
    // `signal`), then sends the signal to the whole process: a thread that
    // does not block it takes it, and the default action ends the process.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
    std::thread::sleep(REDELIVERY);
    // Every thread blocks it: end the process with the status a shell
    // gives a process killed by it (128 + the signal's number).
    std::process::exit(128 + signal);
}
