//! Work that runs when the process exits: hooks added with [`at_exit`],
//! then one last function that the crate's own modules hand over (the
//! in-process compiler's exit gate, which waits for the compiles in
//! flight).
//!
//! A process exits when `main` returns or a thread calls `exit`; `exit`
//! then calls the functions registered with `atexit` in the reverse order
//! of their registration (C11 7.22.4.4), C++ static destructors among them
//! (the Itanium C++ ABI registers each with `__cxa_atexit` when its object
//! is constructed). This module registers one C handler, [`on_exit`]:
//! when the first hook is added, when the in-process compiler is loaded,
//! and again after each in-process compile (see `compiler/exit_gate.rs`
//! for why), so that at exit it runs before the destructors of the
//! compiler library's statics that the finished compiles constructed. The
//! handler runs the hooks once, in the order they were added, on the
//! exiting thread, then the last function handed over (the compiler's: it
//! closes its gate and waits for the compiles still in flight). This
//! module knows nothing of the compiler, which hands its function over
//! with [`register_handler_then`].
//!
//! Rust runs no destructor of its own at exit: a hook is how a library
//! that lives in a `static` finishes its work (a JIT runtime kept in a
//! `static`, say).
//!
//! An `atexit` handler cannot run before the destructors of statics that
//! are first constructed after its last registration: those of the
//! compiler library that a process's first in-process compile constructs
//! while `main` returns ran first, under the compile (SIGSEGV in LLVM). So
//! on Linux with glibc the same work also runs earlier, when the **main
//! thread's** thread-locals are destroyed: glibc's `exit` destroys the
//! exiting thread's thread-locals (`__call_tls_dtors`) before it calls
//! any `atexit` handler (glibc `stdlib/exit.c`, `__run_exit_handlers`),
//! and returning from `main`, `exit` on the main thread and a panic that
//! ends `main` all exit there. A thread-local of the main thread, made at
//! load time (`.init_array`, `main_thread` below), runs `on_exit` from its
//! destructor, on a thread of its own that it joins (the main thread's
//! other thread-locals, a `tracing` subscriber's buffer among them, may be
//! gone by then). `exit` called on another thread still relies on the
//! `atexit` order above (what that leaves uncovered: `compiler/exit_gate.rs`). (A main thread that ends with `pthread_exit`
//! while the process goes on would run the exit work early: later
//! in-process compiles are then refused as at exit.)

#[cfg(not(iree_mock))]
use std::ffi::c_int;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Registrations of the handler at most: each costs the C library a few
/// dozen bytes until exit.
const MOST_REGISTRATIONS: usize = 1024;

/// Registrations of the handler so far.
static REGISTERED: AtomicUsize = AtomicUsize::new(0);

/// The hooks, in the order they were added.
static HOOKS: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

/// What the handler runs after the hooks, once a module of this crate has
/// handed it over ([`register_handler_then`]).
static LAST: OnceLock<fn()> = OnceLock::new();

/// Whether the hooks ran (the handler is registered many times; only its
/// first run runs them).
static HOOKS_RAN: AtomicBool = AtomicBool::new(false);

#[cfg(not(iree_mock))]
extern "C" {
    /// C11 7.22.4.2: registers `callback` to run at `exit`.
    fn atexit(callback: extern "C" fn()) -> c_int;
}

/// Why [`at_exit`] could not register its handler.
#[derive(Debug, thiserror::Error)]
#[error("cannot register a function to run at process exit (the C library's `atexit` failed)")]
pub struct AtExitError(());

/// Runs `hook` when the process exits (`main` returns, or a thread calls
/// `exit`): after the hooks added before it, on the exiting thread, before
/// the in-process compiler's statics are destroyed, while compiles may
/// still run. A hook that panics is caught (the panic hook prints its
/// message) and the next one runs. A hook added once exit has begun never
/// runs. Under the mock C API (miri) hooks are kept and never run.
///
/// ```
/// fn goodbye() {
///     eprintln!("the process exits");
/// }
/// iree_safe::at_exit(goodbye)?;
/// # Ok::<(), iree_safe::AtExitError>(())
/// ```
///
/// # Errors
///
/// [`AtExitError`] when the C library cannot register the handler (out of
/// memory); the hook is not kept then.
pub fn at_exit(hook: fn()) -> Result<(), AtExitError> {
    let mut hooks = HOOKS.lock().unwrap_or_else(PoisonError::into_inner);
    if hooks.is_empty() {
        register_handler()?;
    }
    hooks.push(hook);
    Ok(())
}

/// Registers the handler (again), so that it runs at exit before whatever
/// registers after its previous registration; past [`MOST_REGISTRATIONS`]
/// it does nothing.
fn register_handler() -> Result<(), AtExitError> {
    if REGISTERED.fetch_add(1, Ordering::Relaxed) >= MOST_REGISTRATIONS {
        return Ok(());
    }
    register()
}

/// Registers the handler (again), as [`register_handler`] does, and sets
/// it to run `last` after the hooks on every run. Only the first `last`
/// handed over is kept: the in-process compiler's exit gate is the only
/// caller.
#[cfg(feature = "in-process-compiler")]
pub(crate) fn register_handler_then(last: fn()) -> Result<(), AtExitError> {
    LAST.get_or_init(|| last);
    register_handler()
}

#[cfg(not(iree_mock))]
fn register() -> Result<(), AtExitError> {
    // SAFETY: `atexit` only stores the function pointer; `on_exit` takes no
    // arguments, never unwinds (hooks run under `catch_unwind`, poisoned
    // locks are recovered) and touches only statics, which live until the
    // process ends.
    match unsafe { atexit(on_exit) } {
        0 => Ok(()),
        _ => Err(AtExitError(())),
    }
}

/// Miri cannot register `atexit` handlers: hooks are kept and never run.
#[cfg(iree_mock)]
fn register() -> Result<(), AtExitError> {
    Ok(())
}

/// The exit work, run first when the main thread exits (see the module's
/// docs); the `atexit` handler, registered as before, finds it done.
#[cfg(all(target_os = "linux", target_env = "gnu", not(iree_mock)))]
mod main_thread {
    /// Runs [`on_exit`](super::on_exit) when dropped.
    struct ExitGuard;

    impl Drop for ExitGuard {
        /// Runs the exit work on a thread of its own (this thread's other
        /// thread-locals may be gone), or here if none can be started.
        fn drop(&mut self) {
            match std::thread::Builder::new()
                .name("exit hooks".into())
                .spawn(|| super::on_exit())
            {
                Ok(thread) => drop(thread.join()),
                Err(_) => super::on_exit(),
            }
        }
    }

    std::thread_local! {
        static GUARD: ExitGuard = const { ExitGuard };
    }

    /// Makes the main thread's guard, so that its destructor is
    /// registered (glibc's `__cxa_thread_atexit_impl`): run at load time
    /// by the dynamic loader, on the thread that loads the program (or
    /// this library), which is the main thread when its id is the
    /// process's. Uses no `std::thread` state, which `main` sets up later.
    extern "C" fn arm() {
        if rustix::thread::gettid() == rustix::process::getpid() {
            GUARD.with(|_| ());
        }
    }

    // SAFETY: not `unsafe` code, but code run before `main`: an
    // `.init_array` entry is called once by the dynamic loader after the
    // C library is initialized (System V gABI, "Initialization and
    // Termination Functions"); `arm` only reads two ids and makes a
    // thread-local with a `const` initializer.
    #[used]
    #[link_section = ".init_array"]
    static ARM: extern "C" fn() = arm;
}

/// Runs the exit work now (the hooks, if they have not run, then the
/// function handed over), as an exit would: the signal handlers of
/// `signals.rs` do before the signal ends the process.
#[cfg(all(target_os = "linux", not(iree_mock)))]
pub(crate) fn run_exit_work() {
    on_exit();
}

/// The `atexit` handler: the hooks (first run only), then the function
/// handed over with [`register_handler_then`], if any. Also run by the
/// main thread's exit guard (`main_thread`), before it.
#[cfg_attr(
    iree_mock,
    allow(dead_code, reason = "the mock registers no atexit handler")
)]
extern "C" fn on_exit() {
    if !HOOKS_RAN.swap(true, Ordering::AcqRel) {
        let hooks = std::mem::take(&mut *HOOKS.lock().unwrap_or_else(PoisonError::into_inner));
        for hook in hooks {
            // The panic hook has printed the message; the next hook runs.
            let _ = panic::catch_unwind(AssertUnwindSafe(hook));
        }
    }
    if let Some(last) = LAST.get() {
        last();
    }
}
