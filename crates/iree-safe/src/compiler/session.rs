//! Safe wrappers over one compilation's embedding-API objects: a session,
//! the source it parses, the invocation that compiles it, the in-memory
//! output, and the sink that collects diagnostics.
//!
//! Lifetimes encode what the C API requires to stay alive: a [`Source`]
//! borrows its session and its text; an [`Invocation`] borrows its session,
//! its source and the [`DiagnosticSink`] its callback writes to. So the
//! borrow checker enforces the destruction order output, invocation,
//! source, session.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::{Mutex, PoisonError};

use super::diagnostics::{Diagnostic, Severity};
use super::embedding_api::{
    Api, Owned, RawInvocation, RawOutput, RawSession, RawSource, PIPELINE_STD,
};

/// `iree_compiler_session_t`: an MLIR context plus session-scoped options.
///
/// Not thread-safe in IREE (running a pipeline updates the session's
/// options), and not `Send`/`Sync` here: one session per compilation, on
/// the compiling thread.
#[derive(Debug)]
pub(crate) struct Session {
    raw: Owned<'static, RawSession>,
}

impl Session {
    /// `ireeCompilerSessionCreate`, one thread at a time.
    ///
    /// Creating a session is not thread-safe in IREE 3.13: it binds the
    /// LLVM CPU target's options, which calls `LLVMInitialize<Target>*()`
    /// for every CPU target (`LLVMCPUTargetCLOptions::bindOptions`), and
    /// LLVM's target registration is an unsynchronized linked-list insert.
    /// Two first sessions created at once can link a target to itself (every
    /// later target lookup spins forever) or crash; eight threads compiling
    /// right after loading did so in 3 runs out of 12. Creation takes well
    /// under a millisecond, so it is serialized process-wide; everything
    /// after it runs concurrently.
    ///
    /// # Safety
    ///
    /// `ireeCompilerGlobalInitialize` has returned for `api`'s library (the
    /// API aborts the process otherwise).
    pub(crate) unsafe fn new(api: &'static Api) -> Result<Self, String> {
        static CREATING: Mutex<()> = Mutex::new(());
        let serialized = CREATING.lock().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: the library is initialized (caller); no other thread is
        // creating a session (`CREATING`); creation takes no arguments and
        // returns a new session that we own.
        let raw = unsafe { Owned::adopt(api, (api.session_create)()) };
        drop(serialized);
        raw.map(|raw| Session { raw })
            .ok_or_else(|| "ireeCompilerSessionCreate returned null".to_owned())
    }

    /// `ireeCompilerSessionSetFlags`: the compiler's message when it refuses
    /// a flag.
    pub(crate) fn set_flags(&mut self, flags: &[CString]) -> Result<(), String> {
        let argv: Vec<*const c_char> = flags.iter().map(|flag| flag.as_ptr()).collect();
        let argc = c_int::try_from(argv.len()).map_err(|_| "too many flags".to_owned())?;
        let api = self.raw.api();
        // SAFETY: the session is live and used by this thread only; `argv`
        // holds `argc` pointers to NUL-terminated strings that outlive the
        // call (the API copies what it keeps). The returned error is ours.
        unsafe {
            api.take_error((api.session_set_flags)(
                self.raw.as_ptr(),
                argc,
                argv.as_ptr(),
            ))
        }
    }

    /// `ireeCompilerSourceWrapBuffer` over `text`, which must end with its
    /// NUL terminator (the API requires one for text and counts it in the
    /// length). The source borrows `text` without copying it.
    pub(crate) fn wrap_source<'a>(
        &'a self,
        name: &CStr,
        text: &'a [u8],
    ) -> Result<Source<'a>, String> {
        if text.last() != Some(&0) {
            return Err("internal error: source text without NUL terminator".to_owned());
        }
        let api = self.raw.api();
        let mut raw: *mut RawSource = std::ptr::null_mut();
        // SAFETY: the session is live; `name` is NUL-terminated and copied
        // by the API; `text` is `text.len()` readable bytes ending in NUL and
        // lives for 'a, as long as the source (the API keeps pointing at
        // it). The API stores a new source in `raw` even when it returns an
        // error, so we adopt it before looking at the error.
        let (source, error) = unsafe {
            let error = (api.source_wrap_buffer)(
                self.raw.as_ptr(),
                name.as_ptr(),
                text.as_ptr().cast(),
                text.len(),
                true,
                &mut raw,
            );
            (Owned::adopt(api, raw), error)
        };
        // SAFETY: `error` was just returned to us and nothing else owns it.
        unsafe { api.take_error(error) }?;
        source
            .map(|raw| Source { raw })
            .ok_or_else(|| "ireeCompilerSourceWrapBuffer returned no source".to_owned())
    }

    /// `ireeCompilerInvocationCreate`, with diagnostics delivered to `sink`
    /// (`ireeCompilerInvocationEnableCallbackDiagnostics`).
    pub(crate) fn invocation<'a>(
        &'a self,
        sink: &'a DiagnosticSink,
    ) -> Result<Invocation<'a>, String> {
        let api = self.raw.api();
        // SAFETY: the session is live and outlives the invocation ('a).
        let raw = unsafe { Owned::adopt(api, (api.invocation_create)(self.raw.as_ptr())) }
            .ok_or_else(|| "ireeCompilerInvocationCreate returned null".to_owned())?;
        let user_data = std::ptr::from_ref(sink).cast_mut().cast::<c_void>();
        // SAFETY: the invocation is live. The callback may run on any thread
        // until the invocation is destroyed; `sink` outlives the invocation
        // ('a) and is `Sync` (a mutex), and `on_diagnostic` only reads it
        // through a shared reference. Flags must be 0.
        unsafe {
            (api.invocation_enable_callback_diagnostics)(
                raw.as_ptr(),
                0,
                Some(on_diagnostic),
                user_data,
            )
        };
        Ok(Invocation { raw })
    }
}

/// `iree_compiler_source_t` over a borrowed text buffer.
#[derive(Debug)]
pub(crate) struct Source<'a> {
    raw: Owned<'a, RawSource>,
}

/// `iree_compiler_invocation_t`: one run of the compiler in a session.
#[derive(Debug)]
pub(crate) struct Invocation<'a> {
    raw: Owned<'a, RawInvocation>,
}

impl<'a> Invocation<'a> {
    /// `ireeCompilerInvocationParseSource`; false when the compiler
    /// reported errors (to the sink). The source must stay alive as long as
    /// the invocation, which `&'a` ensures.
    pub(crate) fn parse_source(&mut self, source: &'a Source<'a>) -> bool {
        let api = self.raw.api();
        // SAFETY: both objects are live, belong to the same session, and the
        // source outlives the invocation ('a).
        unsafe { (api.invocation_parse_source)(self.raw.as_ptr(), source.raw.as_ptr()) }
    }

    /// `ireeCompilerInvocationPipeline(IREE_COMPILER_PIPELINE_STD)`; false
    /// when the compiler reported errors (to the sink).
    pub(crate) fn run_std_pipeline(&mut self) -> bool {
        let api = self.raw.api();
        // SAFETY: the invocation is live and has parsed a source.
        unsafe { (api.invocation_pipeline)(self.raw.as_ptr(), PIPELINE_STD) }
    }

    /// `ireeCompilerInvocationOutputVMBytecode` into `output`.
    pub(crate) fn output_vm_bytecode(&mut self, output: &mut Output) -> Result<(), String> {
        let api = self.raw.api();
        // SAFETY: both objects are live; the returned error is ours.
        unsafe {
            api.take_error((api.invocation_output_vm_bytecode)(
                self.raw.as_ptr(),
                output.raw.as_ptr(),
            ))
        }
    }
}

/// `iree_compiler_output_t` writing to memory.
#[derive(Debug)]
pub(crate) struct Output {
    raw: Owned<'static, RawOutput>,
}

impl Output {
    /// `ireeCompilerOutputOpenMembuffer`.
    pub(crate) fn membuffer(api: &'static Api) -> Result<Self, String> {
        let mut raw: *mut RawOutput = std::ptr::null_mut();
        // SAFETY: an output is not tied to a session. The API stores a new
        // output in `raw` even when it returns an error, so we adopt it
        // first; the error is ours.
        let (output, error) = unsafe {
            let error = (api.output_open_membuffer)(&mut raw);
            (Owned::adopt(api, raw), error)
        };
        // SAFETY: `error` was just returned to us and nothing else owns it.
        unsafe { api.take_error(error) }?;
        output
            .map(|raw| Output { raw })
            .ok_or_else(|| "ireeCompilerOutputOpenMembuffer returned no output".to_owned())
    }

    /// A copy of everything written so far (`ireeCompilerOutputMapMemory`).
    pub(crate) fn contents(&mut self) -> Result<Vec<u8>, String> {
        let api = self.raw.api();
        let mut data: *mut c_void = std::ptr::null_mut();
        let mut size: u64 = 0;
        // SAFETY: the output is live and was opened as a membuffer; the
        // returned error is ours.
        unsafe {
            api.take_error((api.output_map_memory)(
                self.raw.as_ptr(),
                &mut data,
                &mut size,
            ))
        }?;
        let size = usize::try_from(size).map_err(|_| "output larger than memory".to_owned())?;
        if size == 0 {
            return Ok(Vec::new());
        }
        if data.is_null() {
            return Err("ireeCompilerOutputMapMemory returned no data".to_owned());
        }
        // SAFETY: the API maps `size` readable bytes at `data`, valid until
        // the output is destroyed or written again; we copy them now, while
        // `&mut self` keeps both from happening.
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) }.to_vec())
    }
}

/// Collects the diagnostics of one invocation. The compiler may call back
/// from any of its threads, hence the mutex.
#[derive(Debug, Default)]
pub(crate) struct DiagnosticSink {
    diagnostics: Mutex<Vec<Diagnostic>>,
}

impl DiagnosticSink {
    pub(crate) fn push(&self, diagnostic: Diagnostic) {
        self.diagnostics
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(diagnostic);
    }

    /// Everything collected so far.
    pub(crate) fn take(&self) -> Vec<Diagnostic> {
        std::mem::take(
            &mut *self
                .diagnostics
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }
}

/// The [`DiagnosticCallback`](super::embedding_api::DiagnosticCallback)
/// registered for every invocation: records the message in the
/// [`DiagnosticSink`] passed as `user_data`.
unsafe extern "C" fn on_diagnostic(
    severity: c_uint,
    message: *const c_char,
    message_size: usize,
    user_data: *mut c_void,
) {
    let text = if message.is_null() || message_size == 0 {
        String::new()
    } else {
        // SAFETY: the API passes `message_size` readable bytes at `message`,
        // valid for the duration of this call.
        let bytes = unsafe { std::slice::from_raw_parts(message.cast::<u8>(), message_size) };
        String::from_utf8_lossy(bytes).into_owned()
    };
    // SAFETY: `user_data` is the `&DiagnosticSink` given in
    // `Session::invocation`, which outlives the invocation and so every
    // call of this callback; it is only read through a shared reference.
    let sink = unsafe { &*user_data.cast_const().cast::<DiagnosticSink>() };
    sink.push(Diagnostic::from_callback(Severity::from_c(severity), &text));
}
