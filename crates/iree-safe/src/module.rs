//! Loaded modules: one compiled artifact, with its own VM context over the
//! runtime's shared HAL module.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::artifact::AlignedArtifact;
use crate::error::{check, Error, Result};
use crate::function::Function;
use crate::handle::Handle;
use crate::runtime::Runtime;
use crate::sys;

/// A compiled artifact loaded into a [`Runtime`]. Cheap to clone (reference
/// counted); dropping the last clone (and the last [`Function`] looked up on
/// it) releases its context and module, which frees the artifact.
///
/// Corresponds to `iree_vm_bytecode_module_create` plus
/// `iree_vm_context_create_with_modules(hal_module, bytecode_module)`.
///
/// VM contexts are thread-compatible, not thread-safe, so the context sits
/// behind a mutex: calls into one module from several threads are
/// serialized, while calls into different modules run in parallel.
#[doc(alias = "iree_vm_module_t")]
#[doc(alias = "iree_vm_context_t")]
#[derive(Debug, Clone)]
pub struct Module {
    inner: Arc<ModuleInner>,
}

#[derive(Debug)]
struct ModuleInner {
    // Field order is drop order: the context retains the bytecode module and
    // the HAL module; the runtime keeps the device alive past both.
    context: Mutex<Handle<sys::iree_vm_context_t>>,
    bytecode: Handle<sys::iree_vm_module_t>,
    runtime: Runtime,
    name: String,
    artifact_bytes: usize,
}

// SAFETY: the bytecode module is thread-safe (DESIGN.md section 2); the
// thread-compatible context is only reached through its mutex.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Module {
    pub(crate) fn load(runtime: &Runtime, vmfb: &[u8]) -> Result<Module> {
        let artifact = AlignedArtifact::copy_of(vmfb)
            .ok_or_else(|| Error::InvalidArgument("cannot load an empty .vmfb artifact".into()))?;
        let allocator = sys::iree_allocator_system();
        let mut raw = std::ptr::null_mut();
        // SAFETY: the span points at `artifact`'s live storage; on success
        // IREE owns it and frees it through `deallocator()` (so we forget it
        // below), on failure it is still ours and `artifact` frees it on drop.
        unsafe {
            check(sys::iree_vm_bytecode_module_create(
                runtime.instance().as_ptr(),
                sys::IREE_VM_BYTECODE_MODULE_FLAG_NONE,
                artifact.span(),
                artifact.deallocator(),
                allocator,
                &mut raw,
            ))
        }?;
        artifact.into_iree();
        // SAFETY: a successful create returned a live module we own.
        let bytecode =
            unsafe { Handle::adopt(raw) }.expect("bytecode module create returned OK and null");

        let mut modules = [runtime.hal_module_ptr(), bytecode.as_ptr()];
        let mut context = std::ptr::null_mut();
        // SAFETY: both modules are live; the context retains them; the array
        // and out-pointer are valid for the call.
        unsafe {
            check(sys::iree_vm_context_create_with_modules(
                runtime.instance().as_ptr(),
                sys::IREE_VM_CONTEXT_FLAG_NONE,
                modules.len(),
                modules.as_mut_ptr(),
                allocator,
                &mut context,
            ))
        }?;
        // SAFETY: a successful create returned a live context we own.
        let context =
            unsafe { Handle::adopt(context) }.expect("context create returned OK and null");
        // SAFETY: the module is live; the name view points into it and is
        // copied before the module can go away.
        let name = unsafe { string_from_view(sys::iree_vm_module_name(bytecode.as_ptr())) };
        Ok(Module {
            inner: Arc::new(ModuleInner {
                context: Mutex::new(context),
                bytecode,
                runtime: runtime.clone(),
                name,
                artifact_bytes: vmfb.len(),
            }),
        })
    }

    /// The module's name (`module @name` in the source; `module` by default).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Bytes of the `.vmfb` artifact this module holds (the dominant part of
    /// its memory; the context adds about 24 KB, see the crate README).
    pub fn artifact_bytes(&self) -> usize {
        self.inner.artifact_bytes
    }

    /// The runtime this module was loaded into.
    pub fn runtime(&self) -> &Runtime {
        &self.inner.runtime
    }

    /// Looks up an exported function once; keep the [`Function`] and call it
    /// as often as needed (lookups by name are linear in the export count).
    #[doc(alias = "iree_vm_module_lookup_function_by_name")]
    pub fn function(&self, name: &str) -> Result<Function> {
        let mut raw = sys::iree_vm_function_t::default();
        // SAFETY: the module is live; `name` outlives the call; `raw` is a
        // valid out-pointer.
        let status = unsafe {
            sys::iree_vm_module_lookup_function_by_name(
                self.inner.bytecode.as_ptr(),
                sys::IREE_VM_FUNCTION_LINKAGE_EXPORT,
                sys::iree_make_string_view(name.as_ptr().cast(), name.len()),
                &mut raw,
            )
        };
        // SAFETY: `status` came from IREE and is freed by `check`.
        unsafe { check(status) }.map_err(|e| match e {
            Error::Iree { code, message } => Error::Iree {
                code,
                message: format!(
                    "module `{}` has no exported function `{name}` (exports: {}): {message}",
                    self.name(),
                    self.function_names().join(", ")
                ),
            },
            other => other,
        })?;
        Ok(Function::new(self.clone(), raw))
    }

    /// Names of the exported functions.
    #[doc(alias = "iree_vm_module_signature")]
    pub fn function_names(&self) -> Vec<String> {
        let module = self.inner.bytecode.as_ptr();
        // SAFETY: the module is live.
        let count = unsafe { sys::iree_vm_module_signature(module) }.export_function_count;
        (0..count)
            .filter_map(|ordinal| {
                let mut function = sys::iree_vm_function_t::default();
                // SAFETY: ordinal < export count; valid out-pointer.
                let status = unsafe {
                    sys::iree_vm_module_lookup_function_by_ordinal(
                        module,
                        sys::IREE_VM_FUNCTION_LINKAGE_EXPORT,
                        ordinal,
                        &mut function,
                    )
                };
                // SAFETY: `status` came from IREE and is freed by `check`.
                unsafe { check(status) }.ok()?;
                // SAFETY: the function belongs to the live module.
                Some(unsafe { string_from_view(sys::iree_vm_function_name(&function)) })
            })
            .collect()
    }

    /// Locks the context for one invocation.
    pub(crate) fn lock_context(&self) -> MutexGuard<'_, Handle<sys::iree_vm_context_t>> {
        // A panic while holding the lock cannot leave the context in a state
        // Rust cares about; IREE reports its own errors through statuses.
        self.inner
            .context
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// True when both handles share one loaded module.
    pub fn same_module(&self, other: &Module) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

/// Copies an IREE string view.
///
/// # Safety
/// The view must point at `size` readable bytes (or be empty).
pub(crate) unsafe fn string_from_view(view: sys::iree_string_view_t) -> String {
    if view.data.is_null() || view.size == 0 {
        return String::new();
    }
    // SAFETY: forwarded from this function's contract.
    let bytes = unsafe { std::slice::from_raw_parts(view.data.cast::<u8>(), view.size) };
    String::from_utf8_lossy(bytes).into_owned()
}
