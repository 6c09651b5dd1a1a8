//! VM lists: the argument and result vectors of an invocation, and the
//! pool that keeps emptied ones for the next invocation.

use std::sync::Mutex;

use crate::error::{check, Error, Result};
use crate::handle::Handle;
use crate::sys;
use crate::tensor::Tensor;
use crate::value::{Argument, VmValue};

/// A variant VM list used by one invocation at a time (never shared: not
/// `Sync`), or kept empty in a [`ListPool`] between invocations.
#[derive(Debug)]
pub(crate) struct List {
    raw: Handle<sys::iree_vm_list_t>,
}

// SAFETY: an `iree_vm_list_t` is a heap object with an atomic reference
// count and no tie to the thread that made it (`iree/vm/list.c` keeps no
// thread-local state); IREE's lists are not thread-safe, which `List` keeps
// by not being `Sync` and by never being shared: one owner uses it at a time.
unsafe impl Send for List {}

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

    /// Releases every element (`iree_vm_list_clear`); the list keeps its
    /// storage.
    pub(crate) fn clear(&mut self) {
        // SAFETY: the list is live and this thread's alone (`&mut`).
        unsafe { sys::iree_vm_list_clear(self.as_ptr()) }
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

/// Emptied lists kept for the next invocation of a module's functions: an
/// invocation takes two (its arguments and its results), and creating each
/// costs IREE a heap allocation and its release a free, about a tenth of a
/// small call's instructions; a kept list keeps its storage.
///
/// Never blocks: a pool another thread is using at the moment is passed by
/// (a list is made, or freed), and it keeps at most [`ListPool::KEPT`]
/// lists, each empty, so it holds no tensor alive.
#[derive(Debug, Default)]
pub(crate) struct ListPool {
    spare: Mutex<Vec<List>>,
}

impl ListPool {
    /// The most lists a pool keeps: two per invocation in flight at once
    /// on one module's context, which serializes them.
    pub(crate) const KEPT: usize = 4;

    /// An empty list: a kept one, or a new one with room for `capacity`
    /// elements.
    pub(crate) fn take(&self, capacity: usize) -> Result<List> {
        if let Some(list) = self.spare.try_lock().ok().and_then(|mut spare| spare.pop()) {
            return Ok(list);
        }
        List::with_capacity(capacity)
    }

    /// Empties `list` (releasing what it holds at once) and keeps it, unless
    /// the pool is full or in use.
    pub(crate) fn give_back(&self, mut list: List) {
        list.clear();
        if let Ok(mut spare) = self.spare.try_lock() {
            if spare.len() < Self::KEPT {
                spare.push(list);
            }
        }
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

#[cfg(all(test, iree_mock))]
mod tests {
    use super::ListPool;
    use crate::mock::{live_objects, program};
    use crate::{Runtime, Tensor};

    #[test]
    fn calls_reuse_their_lists_and_keep_nothing_alive_between_calls() {
        let _serial = crate::mock::serial();
        let before = live_objects().total_excluding_instance();
        {
            let runtime = Runtime::new("local-sync").unwrap();
            let module = runtime.load(program("add").unwrap().vmfb()).unwrap();
            let add = module.function("add").unwrap();
            let views = || live_objects().buffer_views;
            let a = Tensor::from_slice(runtime.device(), &[4], &[1.0f32; 4]).unwrap();
            let b = Tensor::from_slice(runtime.device(), &[4], &[2.0f32; 4]).unwrap();
            let lists = live_objects().lists;
            for _ in 0..3 {
                let sum = add.call_borrowed(&[&a, &b]).unwrap().next().unwrap();
                assert_eq!(
                    sum.unwrap().into_tensor().unwrap().to_vec::<f32>().unwrap(),
                    [3.0; 4]
                );
            }
            // The one call's two lists, kept for the next.
            assert_eq!(live_objects().lists, lists + 2);
            let (with_inputs, kept) = (views(), live_objects().lists);
            // Results never read go with their iterator; a failed call
            // (shapes that do not match) keeps nothing either.
            drop(add.call_borrowed(&[&a, &b]).unwrap());
            let c = Tensor::from_slice(runtime.device(), &[3], &[1.0f32; 3]).unwrap();
            add.call_borrowed(&[&a, &c]).unwrap_err();
            drop(c);
            assert_eq!((views(), live_objects().lists), (with_inputs, kept));
            // The kept lists hold no argument: dropping them frees them.
            drop((a.clone(), b.clone()));
            drop(b);
            assert_eq!(views(), with_inputs - 1);
            // Calls on two threads at once each use lists of their own (the
            // mock panics when one list is used by two threads at once), and
            // the pool keeps no more than its bound.
            std::thread::scope(|scope| {
                for _ in 0..2 {
                    scope.spawn(|| {
                        for _ in 0..3 {
                            drop(add.call_borrowed(&[&a, &a]).unwrap().next());
                        }
                    });
                }
            });
            assert!(live_objects().lists <= lists + ListPool::KEPT);
        }
        assert_eq!(live_objects().total_excluding_instance(), before);
    }
}
