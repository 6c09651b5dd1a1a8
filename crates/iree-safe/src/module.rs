//! Loaded modules: one compiled artifact, with its own VM context over the
//! runtime's shared HAL module.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::artifact::AlignedArtifact;
use crate::error::{check, Result};
use crate::handle::Handle;
use crate::list::ListPool;
use crate::runtime::Runtime;
use crate::vmfb::TrustedVmfb;
use crate::{strings, sys};

/// A compiled artifact loaded into a [`Runtime`]. Cheap to clone (reference
/// counted); dropping the last clone (and the last
/// [`Function`](crate::Function) looked up on it) releases its context and
/// module, which frees the artifact.
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
    /// Emptied argument and result lists for the next call of a function.
    lists: ListPool,
}

/// A [`Module`] handle that does not keep it loaded
/// ([`Module::downgrade`]).
#[derive(Debug, Clone)]
pub struct WeakModule {
    inner: Weak<ModuleInner>,
}

impl WeakModule {
    /// The module, if it is still loaded.
    pub fn upgrade(&self) -> Option<Module> {
        self.inner.upgrade().map(|inner| Module { inner })
    }

    /// Whether the module is still loaded.
    pub fn is_loaded(&self) -> bool {
        self.inner.strong_count() > 0
    }
}

// SAFETY: bytecode modules are thread-safe once created (iree/vm/module.h:
// "Module implementations must be thread-safe as lookups and executions may
// occur in any order from any thread"); the thread-compatible context
// (iree/vm/context.h) is only reached through its mutex.
unsafe impl Send for ModuleInner {}
// SAFETY: as above.
unsafe impl Sync for ModuleInner {}

impl Runtime {
    /// Loads a compiled `.vmfb` artifact as a new module with its own
    /// context. The bytes are copied into 64-byte aligned storage that IREE
    /// frees with the module (see `artifact.rs`). Loading runs the
    /// artifact's code, so it takes a [`TrustedVmfb`]: the compiler's output,
    /// or bytes a caller vouched for.
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree) when IREE refuses the artifact
    /// (not a `.vmfb`, compiled for another device or runtime version), and
    /// [`Error::HostAllocation`](crate::Error::HostAllocation) when its copy
    /// cannot be allocated, and
    /// [`Error::UnsupportedCpu`](crate::Error::UnsupportedCpu) when its CPU
    /// code needs a feature this machine's CPU lacks (it would die of
    /// SIGILL; checked before anything is handed to IREE).
    #[doc(alias = "iree_vm_bytecode_module_create")]
    pub fn load(&self, vmfb: TrustedVmfb<'_>) -> Result<Module> {
        if let Some(unsupported) = crate::cpu_features::unsupported(vmfb.as_bytes()) {
            return Err(crate::Error::UnsupportedCpu {
                cpu: unsupported.cpu,
                missing: unsupported.missing,
            });
        }
        let artifact = AlignedArtifact::copy_of(vmfb.as_bytes())?;
        let allocator = sys::iree_allocator_system();
        let instance = self.instance().as_ptr();
        // SAFETY: the span points at `artifact`'s live storage. On success
        // IREE owns that storage and frees it through `deallocator()` when
        // the module dies, so it is handed over right below; on failure no
        // module adopted it (iree/vm/bytecode/module.c) and `artifact` frees
        // it when the `?` drops it. One module reference is ours on success.
        let bytecode = unsafe {
            Handle::create(|out| {
                sys::iree_vm_bytecode_module_create(
                    instance,
                    sys::IREE_VM_BYTECODE_MODULE_FLAG_NONE,
                    artifact.span(),
                    artifact.deallocator(),
                    allocator,
                    out,
                )
            })
        }?;
        artifact.into_iree();
        let mut modules = [self.hal_module_ptr(), bytecode.as_ptr()];
        // SAFETY: both modules are live; the context retains them; the array
        // is valid for the call. On success one context reference is ours.
        let context = unsafe {
            Handle::create(|out| {
                sys::iree_vm_context_create_with_modules(
                    instance,
                    sys::IREE_VM_CONTEXT_FLAG_NONE,
                    modules.len(),
                    modules.as_mut_ptr(),
                    allocator,
                    out,
                )
            })
        }?;
        // SAFETY: the module is live; the name view points into it and is
        // copied before the module can go away.
        let name = unsafe { strings::to_string(sys::iree_vm_module_name(bytecode.as_ptr())) };
        Ok(Module {
            inner: Arc::new(ModuleInner {
                context: Mutex::new(context),
                bytecode,
                runtime: self.clone(),
                name,
                artifact_bytes: vmfb.as_bytes().len(),
                lists: ListPool::default(),
            }),
        })
    }
}

impl Module {
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

    /// Names of the exported functions.
    #[doc(alias = "iree_vm_module_signature")]
    pub fn function_names(&self) -> Vec<String> {
        let module = self.as_ptr();
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
                Some(unsafe { strings::to_string(sys::iree_vm_function_name(&function)) })
            })
            .collect()
    }

    /// True when both handles share one loaded module.
    pub fn same_module(&self, other: &Module) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// A handle that does not keep the module loaded: to tell when the
    /// last [`Module`] and [`Function`](crate::Function) of it are gone.
    pub fn downgrade(&self) -> WeakModule {
        WeakModule {
            inner: Arc::downgrade(&self.inner),
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_vm_module_t {
        self.inner.bytecode.as_ptr()
    }

    /// The lists the calls of this module's functions reuse.
    pub(crate) fn lists(&self) -> &ListPool {
        &self.inner.lists
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
}
