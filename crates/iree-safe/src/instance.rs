//! The process-wide VM instance.
//!
//! IREE's HAL types register globally, and several VM instances in one
//! process race on them ("ref type mismatch"), so this crate creates exactly
//! one, on first use, and keeps it for the life of the process
//! (docs/architecture.md, "One runtime per process").

use std::sync::OnceLock;

use crate::error::{check, Result, StatusCode};
use crate::handle::Handle;
use crate::sys;

/// The one VM instance of the process, with the HAL types registered and the
/// local-sync and local-task drivers (plus any other compiled in) available.
///
/// Corresponds to `iree_vm_instance_create`,
/// `iree_hal_module_register_all_types` and
/// `iree_hal_register_all_available_drivers`.
#[doc(alias = "iree_vm_instance_t")]
#[derive(Debug)]
pub struct Instance {
    vm: Handle<sys::iree_vm_instance_t>,
}

// SAFETY: IREE documents VM instances as thread-safe (iree/vm/instance.h:
// "Thread-safe"); the handle only holds a reference, counted atomically.
unsafe impl Send for Instance {}
// SAFETY: as above; every operation on an instance is internally synchronized.
unsafe impl Sync for Instance {}

static INSTANCE: OnceLock<std::result::Result<Instance, crate::Error>> = OnceLock::new();

impl Instance {
    /// The process-wide instance, created on the first call. Later calls
    /// return the same instance (or the same creation error).
    ///
    /// # Errors
    ///
    /// [`Error::Iree`](crate::Error::Iree) when IREE cannot create the
    /// instance (the same error on every later call).
    #[doc(alias = "iree_vm_instance_create")]
    pub fn global() -> Result<&'static Instance> {
        INSTANCE
            .get_or_init(Instance::create)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn create() -> Result<Instance> {
        // A runtime built with tracing starts its provider first (a no-op
        // otherwise).
        sys::iree_trace_app_enter();
        // SAFETY: `iree_vm_instance_create` stores one new instance reference
        // in its out-parameter on success.
        let vm = unsafe {
            Handle::create(|out| {
                sys::iree_vm_instance_create(
                    sys::IREE_VM_TYPE_CAPACITY_DEFAULT as usize,
                    sys::iree_allocator_system(),
                    out,
                )
            })
        }?;
        // SAFETY: `vm` is live; registering types has no other precondition.
        unsafe { check(sys::iree_hal_module_register_all_types(vm.as_ptr())) }?;
        // SAFETY: the default registry is a process-lifetime static. A driver
        // registered earlier (e.g. by IREE's runtime API) reports
        // ALREADY_EXISTS, which is harmless.
        match unsafe {
            check(sys::iree_hal_register_all_available_drivers(
                sys::iree_hal_driver_registry_default(),
            ))
        } {
            Err(e) if e.code() == StatusCode::AlreadyExists => {}
            other => other?,
        }
        Ok(Instance { vm })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_vm_instance_t {
        self.vm.as_ptr()
    }
}
