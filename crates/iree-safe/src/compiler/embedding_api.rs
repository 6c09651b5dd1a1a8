//! The raw C embedding API of `libIREECompiler.so` (`embedding_api.h`,
//! API 1.4), resolved at run time, and the one owning handle over its
//! objects.
//!
//! Only the functions the driver calls are declared. Their signatures are
//! those of `compiler/bindings/c/iree/compiler/embedding_api.h` in IREE 3.13;
//! C enums are passed as `c_uint`, their size on every supported ABI.
//!
//! Ownership, in one place (every `*Create`/`*Open*` result is destroyed by
//! exactly one call of the matching function):
//!
//! | object | created by | destroyed by |
//! | --- | --- | --- |
//! | session | `ireeCompilerSessionCreate` | `ireeCompilerSessionDestroy` |
//! | invocation | `ireeCompilerInvocationCreate` | `ireeCompilerInvocationDestroy` |
//! | source | `ireeCompilerSourceWrapBuffer` | `ireeCompilerSourceDestroy` |
//! | output | `ireeCompilerOutputOpenMembuffer` | `ireeCompilerOutputDestroy` |
//! | error | any function returning `iree_compiler_error_t*` | `ireeCompilerErrorDestroy` |

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::marker::{PhantomData, PhantomPinned};
use std::ptr::NonNull;

macro_rules! opaque {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[repr(C)]
        pub(crate) struct $name {
            _data: [u8; 0],
            // Neither Send, Sync nor Unpin: only ever handled behind pointers.
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}

opaque! {
    /// `iree_compiler_error_t`
    RawError;
    /// `iree_compiler_session_t`
    RawSession;
    /// `iree_compiler_invocation_t`
    RawInvocation;
    /// `iree_compiler_source_t`
    RawSource;
    /// `iree_compiler_output_t`
    RawOutput;
}

/// `IREE_COMPILER_PIPELINE_STD`: IREE's full compilation pipeline.
pub(crate) const PIPELINE_STD: c_uint = 0;

/// The diagnostic callback of `ireeCompilerInvocationEnableCallbackDiagnostics`.
pub(crate) type DiagnosticCallback = unsafe extern "C" fn(
    severity: c_uint,
    message: *const c_char,
    message_size: usize,
    user_data: *mut c_void,
);

/// The entry points the driver uses, resolved from one loaded library that
/// is never unloaded.
#[derive(Debug)]
pub(crate) struct Api {
    pub(crate) error_destroy: unsafe extern "C" fn(*mut RawError),
    pub(crate) error_get_message: unsafe extern "C" fn(*mut RawError) -> *const c_char,
    pub(crate) get_api_version: unsafe extern "C" fn() -> c_int,
    pub(crate) global_initialize: unsafe extern "C" fn(),
    pub(crate) get_revision: unsafe extern "C" fn() -> *const c_char,
    pub(crate) session_create: unsafe extern "C" fn() -> *mut RawSession,
    pub(crate) session_destroy: unsafe extern "C" fn(*mut RawSession),
    pub(crate) session_set_flags:
        unsafe extern "C" fn(*mut RawSession, c_int, *const *const c_char) -> *mut RawError,
    pub(crate) invocation_create: unsafe extern "C" fn(*mut RawSession) -> *mut RawInvocation,
    pub(crate) invocation_destroy: unsafe extern "C" fn(*mut RawInvocation),
    pub(crate) invocation_enable_callback_diagnostics:
        unsafe extern "C" fn(*mut RawInvocation, c_int, Option<DiagnosticCallback>, *mut c_void),
    pub(crate) invocation_parse_source:
        unsafe extern "C" fn(*mut RawInvocation, *mut RawSource) -> bool,
    pub(crate) invocation_pipeline: unsafe extern "C" fn(*mut RawInvocation, c_uint) -> bool,
    pub(crate) invocation_output_vm_bytecode:
        unsafe extern "C" fn(*mut RawInvocation, *mut RawOutput) -> *mut RawError,
    pub(crate) source_wrap_buffer: unsafe extern "C" fn(
        *mut RawSession,
        *const c_char,
        *const c_char,
        usize,
        bool,
        *mut *mut RawSource,
    ) -> *mut RawError,
    pub(crate) source_destroy: unsafe extern "C" fn(*mut RawSource),
    pub(crate) output_open_membuffer: unsafe extern "C" fn(*mut *mut RawOutput) -> *mut RawError,
    pub(crate) output_map_memory:
        unsafe extern "C" fn(*mut RawOutput, *mut *mut c_void, *mut u64) -> *mut RawError,
    pub(crate) output_destroy: unsafe extern "C" fn(*mut RawOutput),
}

impl Api {
    /// Resolves every entry point from `library`.
    ///
    /// # Safety
    ///
    /// `library` must be IREE's compiler library, so that each exported
    /// `ireeCompiler*` symbol has the signature declared in [`Api`].
    pub(crate) unsafe fn resolve(library: &'static libloading::Library) -> Result<Api, String> {
        macro_rules! symbols {
            ($($field:ident = $name:literal),* $(,)?) => {
                Api {$(
                    $field: {
                        // SAFETY: the caller guarantees that the library is
                        // IREE's compiler, whose `$name` has the type of
                        // this field (embedding_api.h). The library is never
                        // unloaded (`&'static`), so the copied function
                        // pointer stays valid for the rest of the process.
                        let symbol = unsafe { library.get(concat!($name, "\0").as_bytes()) }
                            .map_err(|e| format!("missing symbol {}: {e}", $name))?;
                        *symbol
                    },
                )*}
            };
        }
        Ok(symbols! {
            error_destroy = "ireeCompilerErrorDestroy",
            error_get_message = "ireeCompilerErrorGetMessage",
            get_api_version = "ireeCompilerGetAPIVersion",
            global_initialize = "ireeCompilerGlobalInitialize",
            get_revision = "ireeCompilerGetRevision",
            session_create = "ireeCompilerSessionCreate",
            session_destroy = "ireeCompilerSessionDestroy",
            session_set_flags = "ireeCompilerSessionSetFlags",
            invocation_create = "ireeCompilerInvocationCreate",
            invocation_destroy = "ireeCompilerInvocationDestroy",
            invocation_enable_callback_diagnostics =
                "ireeCompilerInvocationEnableCallbackDiagnostics",
            invocation_parse_source = "ireeCompilerInvocationParseSource",
            invocation_pipeline = "ireeCompilerInvocationPipeline",
            invocation_output_vm_bytecode = "ireeCompilerInvocationOutputVMBytecode",
            source_wrap_buffer = "ireeCompilerSourceWrapBuffer",
            source_destroy = "ireeCompilerSourceDestroy",
            output_open_membuffer = "ireeCompilerOutputOpenMembuffer",
            output_map_memory = "ireeCompilerOutputMapMemory",
            output_destroy = "ireeCompilerOutputDestroy",
        })
    }

    /// Reads and destroys an error returned by the API: `Ok` for null,
    /// otherwise its message. Every non-null error passes through here
    /// exactly once.
    ///
    /// # Safety
    ///
    /// `error` is null or an error just returned by this API that nothing
    /// else owns.
    pub(crate) unsafe fn take_error(&self, error: *mut RawError) -> Result<(), String> {
        if error.is_null() {
            Ok(())
        } else {
            // SAFETY: forwarded from the caller.
            Err(unsafe { self.error_message_and_destroy(error) })
        }
    }

    /// # Safety
    ///
    /// `error` is a non-null error that nothing else owns.
    #[cold]
    unsafe fn error_message_and_destroy(&self, error: *mut RawError) -> String {
        // SAFETY: `error` is a live error; the returned C string stays valid
        // until the error is destroyed, and is copied before that.
        let message = unsafe {
            let message = (self.error_get_message)(error);
            if message.is_null() {
                "(the compiler gave no message)".to_owned()
            } else {
                CStr::from_ptr(message).to_string_lossy().into_owned()
            }
        };
        // SAFETY: `error` is owned by us and destroyed exactly once, here.
        unsafe { (self.error_destroy)(error) };
        message
    }
}

/// An embedding-API object kind and the function that destroys it.
pub(crate) trait Object {
    /// Destroys `object`.
    ///
    /// # Safety
    ///
    /// `object` was created through `api` and is destroyed exactly once.
    unsafe fn destroy(api: &Api, object: *mut Self);
}

impl Object for RawSession {
    unsafe fn destroy(api: &Api, object: *mut Self) {
        // SAFETY: forwarded from the caller.
        unsafe { (api.session_destroy)(object) }
    }
}

impl Object for RawInvocation {
    unsafe fn destroy(api: &Api, object: *mut Self) {
        // SAFETY: forwarded from the caller.
        unsafe { (api.invocation_destroy)(object) }
    }
}

impl Object for RawSource {
    unsafe fn destroy(api: &Api, object: *mut Self) {
        // SAFETY: forwarded from the caller.
        unsafe { (api.source_destroy)(object) }
    }
}

impl Object for RawOutput {
    unsafe fn destroy(api: &Api, object: *mut Self) {
        // SAFETY: forwarded from the caller.
        unsafe { (api.output_destroy)(object) }
    }
}

/// Owns one embedding-API object and destroys it on drop. `'a` is the
/// lifetime of whatever the object borrows (its session, its source
/// buffer, its diagnostic sink), so it cannot outlive them.
///
/// Neither `Send` nor `Sync`: a compilation's objects are created, used and
/// destroyed on the calling thread.
pub(crate) struct Owned<'a, T: Object> {
    api: &'static Api,
    object: NonNull<T>,
    _borrows: PhantomData<&'a ()>,
}

impl<'a, T: Object> Owned<'a, T> {
    /// Takes ownership of `object`; `None` when it is null.
    ///
    /// # Safety
    ///
    /// `object` is null or was just created through `api`, nothing else owns
    /// it, and everything it refers to lives for `'a`.
    pub(crate) unsafe fn adopt(api: &'static Api, object: *mut T) -> Option<Self> {
        NonNull::new(object).map(|object| Owned {
            api,
            object,
            _borrows: PhantomData,
        })
    }

    pub(crate) fn api(&self) -> &'static Api {
        self.api
    }

    pub(crate) fn as_ptr(&self) -> *mut T {
        self.object.as_ptr()
    }
}

impl<T: Object> Drop for Owned<'_, T> {
    fn drop(&mut self) {
        // SAFETY: `adopt` made us the only owner of this live object, and
        // drop runs once.
        unsafe { T::destroy(self.api, self.object.as_ptr()) }
    }
}

impl<T: Object> std::fmt::Debug for Owned<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({:p})", std::any::type_name::<T>(), self.object)
    }
}
