//! VM lists: the argument and result vectors of an invocation.

use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::sys;
use crate::tensor::Tensor;
use crate::value::{Argument, VmValue};

/// A variant VM list owned by one invocation (never shared: not Send).
#[derive(Debug)]
pub(crate) struct List {
    raw: Handle<sys::iree_vm_list_t>,
}

impl List {
    /// `iree_vm_list_create` with the variant element type.
    pub(crate) fn with_capacity(capacity: usize) -> Result<List> {
        let undefined = sys::iree_vm_type_def_t::default();
        // SAFETY: an all-zero type def is `iree_vm_make_undefined_type_def()`
        // (a variant list); `iree_vm_list_create` returns a status and, on
        // success, a list whose one reference is ours (`Handle::create`'s
        // contract).
        let raw = unsafe {
            Handle::create(|out| {
                sys::iree_vm_list_create(undefined, capacity, sys::iree_allocator_system(), out)
            })
        }?;
        Ok(List { raw })
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::iree_vm_list_t {
        self.raw.as_ptr()
    }

    /// Appends a value; tensors are retained by the list.
    pub(crate) fn push(&mut self, argument: Argument<'_>) -> Result<()> {
        let list = self.as_ptr();
        let status = match argument {
            Argument::Tensor(tensor) => {
                // SAFETY: the buffer view is live; `retain_ref` adds the
                // reference that `push_ref_move` then hands to the list. A
                // push that fails (growing the list) has not taken it, so it
                // is given back here.
                unsafe {
                    let mut reference = sys::iree_hal_buffer_view_retain_ref(tensor.as_ptr());
                    let status = sys::iree_vm_list_push_ref_move(list, &mut reference);
                    if !sys::iree_status_is_ok(status) {
                        sys::iree_vm_ref_release(&mut reference);
                    }
                    status
                }
            }
            Argument::Scalar(scalar) => {
                let raw = scalar_to_vm(scalar);
                // SAFETY: the list is live and `raw` a valid value.
                unsafe { sys::iree_vm_list_push_value(list, &raw) }
            }
        };
        // SAFETY: `status` came from IREE and is freed by `check`.
        unsafe { check(status) }
    }

    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        // SAFETY: the list is live.
        unsafe { sys::iree_vm_list_size(self.as_ptr()) }
    }

    /// Reads element `index` as a tensor of `device`.
    pub(crate) fn get_tensor(&self, index: usize, device: &crate::Device) -> Result<Tensor> {
        let mut reference = sys::iree_vm_ref_t::default();
        // SAFETY: `get_ref_assign` borrows the element's reference without
        // retaining; we only use it while the list (which owns it) is alive.
        unsafe {
            check(sys::iree_vm_list_get_ref_assign(
                self.as_ptr(),
                index,
                &mut reference,
            ))
        }?;
        let mut view = std::ptr::null_mut();
        // SAFETY: `check_deref` validates the reference's type before
        // writing the buffer view pointer.
        unsafe { check(sys::iree_hal_buffer_view_check_deref(reference, &mut view)) }.map_err(
            |e| {
                Error::Unsupported(format!(
                    "result {index} is a reference but not a tensor: {e}"
                ))
            },
        )?;
        let view = std::ptr::NonNull::new(view)
            .ok_or_else(|| Error::Unsupported(format!("result {index} is a null reference")))?;
        // SAFETY: the list keeps the view alive for this call; the tensor
        // takes its own reference. It was produced on `device`.
        unsafe { Tensor::retain_borrowed(view, device.clone()) }
    }

    /// Reads element `index` as a scalar.
    pub(crate) fn get_scalar(&self, index: usize) -> Result<VmValue> {
        let mut raw = sys::iree_vm_value_t::default();
        // SAFETY: the list is live; valid out-pointer.
        unsafe { check(sys::iree_vm_list_get_value(self.as_ptr(), index, &mut raw)) }?;
        // SAFETY: the union member read matches the tag IREE wrote.
        let value = unsafe {
            match raw.type_ {
                sys::IREE_VM_VALUE_TYPE_I32 => VmValue::I32(raw.__bindgen_anon_1.i32_),
                sys::IREE_VM_VALUE_TYPE_I64 => VmValue::I64(raw.__bindgen_anon_1.i64_),
                sys::IREE_VM_VALUE_TYPE_F32 => VmValue::F32(raw.__bindgen_anon_1.f32_),
                sys::IREE_VM_VALUE_TYPE_F64 => VmValue::F64(raw.__bindgen_anon_1.f64_),
                other => {
                    return Err(Error::Unsupported(format!(
                        "result {index} has VM value type {other}"
                    )))
                }
            }
        };
        Ok(value)
    }
}

fn scalar_to_vm(value: &VmValue) -> sys::iree_vm_value_t {
    match *value {
        VmValue::I32(v) => sys::iree_vm_value_make_i32(v),
        VmValue::I64(v) => sys::iree_vm_value_make_i64(v),
        VmValue::F32(v) => sys::iree_vm_value_make_f32(v),
        VmValue::F64(v) => sys::iree_vm_value_make_f64(v),
        VmValue::Tensor(_) => unreachable!("tensors are pushed as references"),
    }
}
