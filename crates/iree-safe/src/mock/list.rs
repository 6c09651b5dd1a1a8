//! VM lists (`iree_vm_list_t`): variant lists of scalars and buffer view
//! references.
//!
//! As in IREE, a list owns a reference to each buffer view it holds:
//! `push_ref_move` hands the caller's reference to the list, and
//! `get_ref_assign` lends one without retaining it.

use std::sync::{Mutex, MutexGuard, TryLockError};

use super::api::*;
use super::hal::{BufferView, BUFFER_VIEW_TYPE};
use super::registry::{self, Kind, Object, Owned};
use super::status::{return_object, to_status, Failure, MockResult};

/// A scalar element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar {
    I32(i32),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl Scalar {
    fn from_vm(value: &iree_vm_value_t) -> MockResult<Scalar> {
        // SAFETY: each arm reads the union member that the tag names.
        unsafe {
            Ok(match value.type_ {
                IREE_VM_VALUE_TYPE_I32 => Scalar::I32(value.__bindgen_anon_1.i32_),
                IREE_VM_VALUE_TYPE_I64 => Scalar::I64(value.__bindgen_anon_1.i64_),
                IREE_VM_VALUE_TYPE_F32 => Scalar::F32(value.__bindgen_anon_1.f32_),
                IREE_VM_VALUE_TYPE_F64 => Scalar::F64(value.__bindgen_anon_1.f64_),
                other => {
                    return Err(Failure::new(
                        IREE_STATUS_UNIMPLEMENTED,
                        format!(
                        "the mock stores i32, i64, f32 and f64 values, not VM value type {other}"
                    ),
                    ))
                }
            })
        }
    }

    fn to_vm(self) -> iree_vm_value_t {
        match self {
            Scalar::I32(v) => iree_vm_value_make_i32(v),
            Scalar::I64(v) => iree_vm_value_make_i64(v),
            Scalar::F32(v) => iree_vm_value_make_f32(v),
            Scalar::F64(v) => iree_vm_value_make_f64(v),
        }
    }
}

/// One element of a list.
#[derive(Debug)]
pub(crate) enum Slot {
    Value(Scalar),
    /// A buffer view reference (or a null ref).
    Ref(Option<Owned<BufferView>>),
}

/// A variant list.
#[derive(Debug)]
pub(crate) struct List {
    items: Mutex<Vec<Slot>>,
}

impl Object for List {
    fn kind(&self) -> Kind {
        Kind::List
    }
}

impl List {
    /// The elements. Panics when another thread is using the list: IREE's
    /// lists are not thread-safe.
    pub(crate) fn items(&self) -> MutexGuard<'_, Vec<Slot>> {
        match self.items.try_lock() {
            Ok(items) => items,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                panic!("mock IREE: a VM list was used from two threads at once (lists are not thread-safe)")
            }
        }
    }
}

/// Borrows a live list.
///
/// # Safety
/// `list` came from the mock and the caller holds a reference for `'a`.
pub(crate) unsafe fn list<'a>(list: *const iree_vm_list_t) -> &'a List {
    // SAFETY: forwarded from this function's contract.
    unsafe { registry::get(list.cast::<List>()) }
}

/// `iree_vm_list_create`: only variant lists (the undefined element type).
///
/// # Safety
/// `out_list` is valid for writes.
pub(crate) unsafe fn iree_vm_list_create(
    element_type: iree_vm_type_def_t,
    initial_capacity: iree_host_size_t,
    _allocator: iree_allocator_t,
    out_list: *mut *mut iree_vm_list_t,
) -> iree_status_t {
    let result = if element_type.value_type_bits() != 0 || element_type.ref_type_bits() != 0 {
        Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            "the mock only creates variant lists (iree_vm_make_undefined_type_def)",
        ))
    } else {
        Ok(Owned::new(List {
            items: Mutex::new(Vec::with_capacity(initial_capacity)),
        }))
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_list, result) }
}

/// `iree_vm_list_size`.
///
/// # Safety
/// `list` is live.
pub(crate) unsafe fn iree_vm_list_size(list_ptr: *const iree_vm_list_t) -> iree_host_size_t {
    // SAFETY: forwarded from this function's contract.
    unsafe { list(list_ptr) }.items().len()
}

/// `iree_vm_list_clear`: releases every element, keeping the list.
///
/// # Safety
/// `list` is live.
pub(crate) unsafe fn iree_vm_list_clear(list_ptr: *mut iree_vm_list_t) {
    // SAFETY: forwarded from this function's contract.
    unsafe { list(list_ptr) }.items().clear();
}

/// `iree_vm_list_push_value`.
///
/// # Safety
/// `list` is live and `value` readable.
pub(crate) unsafe fn iree_vm_list_push_value(
    list_ptr: *mut iree_vm_list_t,
    value: *const iree_vm_value_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let (list, value) = unsafe { (list(list_ptr), &*value) };
    to_status(Scalar::from_vm(value).map(|scalar| list.items().push(Slot::Value(scalar))))
}

/// `iree_vm_list_push_ref_move`: the list takes the caller's reference and
/// the caller's ref is reset to null.
///
/// # Safety
/// `list` is live; `value` is valid and, if not null, owns a reference to a
/// live buffer view.
pub(crate) unsafe fn iree_vm_list_push_ref_move(
    list_ptr: *mut iree_vm_list_t,
    value: *mut iree_vm_ref_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let (list, reference) = unsafe { (list(list_ptr), *value) };
    let slot = match std::ptr::NonNull::new(reference.ptr) {
        None => Slot::Ref(None),
        Some(ptr) if reference.type_ == BUFFER_VIEW_TYPE => {
            // SAFETY: the caller gives up the reference `value` owns.
            Slot::Ref(Some(unsafe { Owned::adopt(ptr.cast()) }))
        }
        Some(_) => {
            return Failure::new(
                IREE_STATUS_UNIMPLEMENTED,
                format!(
                    "the mock only stores buffer view refs, not type {:#x}",
                    reference.type_
                ),
            )
            .into_status()
        }
    };
    list.items().push(slot);
    // SAFETY: as above; the reference moved into the list.
    unsafe { *value = iree_vm_ref_t::default() };
    std::ptr::null_mut()
}

fn out_of_range(i: usize, count: usize) -> Failure {
    Failure::new(
        IREE_STATUS_OUT_OF_RANGE,
        format!("index {i} out of bounds ({count})"),
    )
}

/// `iree_vm_list_get_value`: FAILED_PRECONDITION for a ref element.
///
/// # Safety
/// `list` is live and `out_value` valid for writes.
pub(crate) unsafe fn iree_vm_list_get_value(
    list_ptr: *const iree_vm_list_t,
    i: iree_host_size_t,
    out_value: *mut iree_vm_value_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let items = unsafe { list(list_ptr) }.items();
    let value = match items.get(i) {
        Some(Slot::Value(scalar)) => Ok(scalar.to_vm()),
        Some(Slot::Ref(_)) => Err(Failure::new(
            IREE_STATUS_FAILED_PRECONDITION,
            format!("variant at index {i} is not a value type"),
        )),
        None => Err(out_of_range(i, items.len())),
    };
    to_status(value.map(|value| {
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { *out_value = value }
    }))
}

/// `iree_vm_list_get_ref_assign`: the element's reference, not retained
/// (valid while the list holds it). FAILED_PRECONDITION for a value.
///
/// # Safety
/// `list` is live and `out_value` valid for writes.
pub(crate) unsafe fn iree_vm_list_get_ref_assign(
    list_ptr: *const iree_vm_list_t,
    i: iree_host_size_t,
    out_value: *mut iree_vm_ref_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let items = unsafe { list(list_ptr) }.items();
    let reference = match items.get(i) {
        Some(Slot::Ref(Some(view))) => Ok(iree_vm_ref_t {
            ptr: view.as_ptr().cast(),
            type_: BUFFER_VIEW_TYPE,
        }),
        Some(Slot::Ref(None)) => Ok(iree_vm_ref_t::default()),
        Some(Slot::Value(_)) => Err(Failure::new(
            IREE_STATUS_FAILED_PRECONDITION,
            format!("variant at index {i} is not a ref type"),
        )),
        None => Err(out_of_range(i, items.len())),
    };
    to_status(reference.map(|reference| {
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { *out_value = reference }
    }))
}

registry::refcount_functions! {
    iree_vm_list_t => List: iree_vm_list_release, iree_vm_list_retain;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::hal::test_device;
    use crate::mock::live_objects;

    #[test]
    fn lists_own_their_refs_and_lend_them_without_retaining() {
        let _serial = crate::mock::serial();
        let before = live_objects();
        let device = test_device();
        let view = BufferView::new(&device, &[1], IREE_HAL_ELEMENT_TYPE_INT_8, vec![7])
            .expect("the test device keeps its buffers in the mock's memory")
            .into_raw();
        let mut list_ptr = std::ptr::null_mut();
        // SAFETY: every pointer below comes from the mock and is used while
        // live; each reference is given back once.
        unsafe {
            let status = iree_vm_list_create(
                iree_vm_type_def_t::default(),
                2,
                iree_allocator_null(),
                &mut list_ptr,
            );
            assert!(status.is_null());
            let mut reference = iree_hal_buffer_view_retain_ref(view.cast());
            assert!(iree_vm_list_push_ref_move(list_ptr, &mut reference).is_null());
            assert!(reference.ptr.is_null(), "the ref moved into the list");
            assert!(iree_vm_list_push_value(list_ptr, &iree_vm_value_make_i64(-1)).is_null());
            assert_eq!(iree_vm_list_size(list_ptr), 2);

            // Our reference goes; the list's keeps the view alive.
            registry::release(view);
            let mut lent = iree_vm_ref_t::default();
            assert!(iree_vm_list_get_ref_assign(list_ptr, 0, &mut lent).is_null());
            assert_eq!(lent.ptr, view.cast());
            assert_eq!(live_objects().buffer_views, before.buffer_views + 1);

            let mut value = iree_vm_value_t::default();
            assert!(iree_vm_list_get_value(list_ptr, 1, &mut value).is_null());
            assert_eq!(value.__bindgen_anon_1.i64_, -1);
            for status in [
                iree_vm_list_get_value(list_ptr, 0, &mut value),
                iree_vm_list_get_ref_assign(list_ptr, 1, &mut lent),
                iree_vm_list_get_value(list_ptr, 2, &mut value),
            ] {
                assert!(!status.is_null());
                iree_status_free(status);
            }
            // Releasing the list releases the view it owned.
            iree_vm_list_release(list_ptr);
        }
        drop(device);
        assert_eq!(live_objects(), before);
    }
}
