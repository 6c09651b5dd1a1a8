//! Rust equivalents of IREE's static-inline helpers and function-like
//! macros, which bindgen cannot see. Each mirrors the C definition named in
//! its doc; the tests at the bottom check them against IREE's own behaviour.

use core::ffi::c_char;

use crate::*;

/// `iree_allocator_system()`: the libc allocator IREE was built with
/// (`IREE_ALLOCATOR_SYSTEM=libc`, the default).
pub fn iree_allocator_system() -> iree_allocator_t {
    iree_allocator_t {
        self_: core::ptr::null_mut(),
        ctl: Some(iree_allocator_libc_ctl),
    }
}

/// `IREE_TRACE_APP_ENTER()`: starts the tracing provider of a runtime built
/// with tracing (`cargo xtask build-iree --tracing`, docs/profiling.md),
/// which IREE's tools do first in `main`: the console provider writes to a
/// null stream until then. Does nothing for a runtime without tracing (the
/// build script sets cfg `iree_sys_tracing` from the install's manifest).
/// Idempotent; call it before any other IREE function.
pub fn iree_trace_app_enter() {
    #[cfg(iree_sys_tracing = "console")]
    {
        extern "C" {
            // iree/base/tracing/console.h
            fn iree_tracing_console_initialize();
        }
        // SAFETY: sets the provider's output stream (stderr) once; a later
        // call returns at once (`console.c`, `iree_tracing_console_initialize`).
        unsafe { iree_tracing_console_initialize() }
    }
    #[cfg(iree_sys_tracing = "tracy")]
    {
        extern "C" {
            // iree/base/tracing/tracy.h
            fn iree_tracing_tracy_initialize();
        }
        // SAFETY: registers IREE's source-file callback with Tracy's
        // profiler, which starts with the process (`tracy.cc`,
        // `iree_tracing_tracy_initialize`); registering again replaces it
        // with the same callback.
        unsafe { iree_tracing_tracy_initialize() }
    }
}

/// `iree_allocator_null()`: an allocator that fails every request. Passed as
/// a buffer's "deallocator" it means "borrowed, never freed by IREE".
pub const fn iree_allocator_null() -> iree_allocator_t {
    iree_allocator_t {
        self_: core::ptr::null_mut(),
        ctl: None,
    }
}

/// `iree_status_is_ok(status)`: OK statuses are the null pointer.
pub fn iree_status_is_ok(status: iree_status_t) -> bool {
    status.is_null()
}

/// `iree_status_code(status)`: the code lives in the low bits of the pointer.
pub fn iree_status_code(status: iree_status_t) -> iree_status_code_t {
    (status as usize & IREE_STATUS_CODE_MASK as usize) as iree_status_code_t
}

/// `iree_make_string_view(data, size)`.
pub const fn iree_make_string_view(data: *const c_char, size: usize) -> iree_string_view_t {
    iree_string_view_t { data, size }
}

/// `iree_make_const_byte_span(data, length)`.
pub const fn iree_make_const_byte_span(
    data: *const u8,
    data_length: usize,
) -> iree_const_byte_span_t {
    iree_const_byte_span_t { data, data_length }
}

/// `iree_make_byte_span(data, length)`.
pub const fn iree_make_byte_span(data: *mut u8, data_length: usize) -> iree_byte_span_t {
    iree_byte_span_t { data, data_length }
}

/// `iree_infinite_timeout()`: wait however long is needed.
pub const fn iree_infinite_timeout() -> iree_timeout_t {
    iree_timeout_t {
        type_: IREE_TIMEOUT_ABSOLUTE,
        nanos: i64::MAX,
    }
}

/// `iree_immediate_timeout()`: never wait.
pub const fn iree_immediate_timeout() -> iree_timeout_t {
    iree_timeout_t {
        type_: IREE_TIMEOUT_ABSOLUTE,
        nanos: i64::MIN,
    }
}

/// `iree_hal_element_bit_count(element_type)`.
pub const fn iree_hal_element_bit_count(element_type: iree_hal_element_type_t) -> usize {
    (element_type & 0xFF) as usize
}

/// `iree_hal_element_dense_byte_count(element_type)`.
pub const fn iree_hal_element_dense_byte_count(element_type: iree_hal_element_type_t) -> usize {
    iree_hal_element_bit_count(element_type).div_ceil(8)
}

/// `iree_async_frontier_tracker_options_default()`.
pub const fn iree_async_frontier_tracker_options_default() -> iree_async_frontier_tracker_options_t
{
    iree_async_frontier_tracker_options_t {
        axis_table_capacity: 256,
        session_epoch: 1,
        machine_index: 0,
    }
}

/// `iree_hal_device_create_params_default()`: all zeros. Callers must still
/// set `proactor_pool`.
pub const fn iree_hal_device_create_params_default() -> iree_hal_device_create_params_t {
    iree_hal_device_create_params_t {
        next: core::ptr::null(),
        proactor_pool: core::ptr::null_mut(),
    }
}

macro_rules! value_constructors {
    ($($(#[$doc:meta])* $name:ident($ty:ty) => $tag:ident . $field:ident;)*) => {$(
        $(#[$doc])*
        pub fn $name(value: $ty) -> iree_vm_value_t {
            iree_vm_value_t { type_: $tag, __bindgen_anon_1: iree_vm_value_t__bindgen_ty_1 { $field: value } }
        }
    )*};
}

value_constructors! {
    /// `iree_vm_value_make_i32(value)`.
    iree_vm_value_make_i32(i32) => IREE_VM_VALUE_TYPE_I32.i32_;
    /// `iree_vm_value_make_i64(value)`.
    iree_vm_value_make_i64(i64) => IREE_VM_VALUE_TYPE_I64.i64_;
    /// `iree_vm_value_make_f32(value)`.
    iree_vm_value_make_f32(f32) => IREE_VM_VALUE_TYPE_F32.f32_;
    /// `iree_vm_value_make_f64(value)`.
    iree_vm_value_make_f64(f64) => IREE_VM_VALUE_TYPE_F64.f64_;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_status_is_null_and_has_code_ok() {
        let ok: iree_status_t = core::ptr::null_mut();
        assert!(iree_status_is_ok(ok));
        assert_eq!(iree_status_code(ok), IREE_STATUS_OK);
    }

    #[test]
    fn status_code_reads_the_low_bits() {
        // IREE allocates status storage aligned so that the low 5 bits hold
        // the code; a bare code cast to a pointer is a valid status too.
        let status = IREE_STATUS_NOT_FOUND as usize as iree_status_t;
        assert!(!iree_status_is_ok(status));
        assert_eq!(iree_status_code(status), IREE_STATUS_NOT_FOUND);
        let with_payload = (0x1000 | IREE_STATUS_INVALID_ARGUMENT as usize) as iree_status_t;
        assert_eq!(iree_status_code(with_payload), IREE_STATUS_INVALID_ARGUMENT);
    }

    #[test]
    fn element_sizes_come_from_the_type_encoding() {
        assert_eq!(
            iree_hal_element_dense_byte_count(IREE_HAL_ELEMENT_TYPE_FLOAT_32),
            4
        );
        assert_eq!(
            iree_hal_element_dense_byte_count(IREE_HAL_ELEMENT_TYPE_BFLOAT_16),
            2
        );
        assert_eq!(
            iree_hal_element_dense_byte_count(IREE_HAL_ELEMENT_TYPE_INT_64),
            8
        );
        assert_eq!(
            iree_hal_element_dense_byte_count(IREE_HAL_ELEMENT_TYPE_BOOL_8),
            1
        );
        assert_eq!(iree_hal_element_bit_count(IREE_HAL_ELEMENT_TYPE_INT_4), 4);
        assert_eq!(
            iree_hal_element_dense_byte_count(IREE_HAL_ELEMENT_TYPE_INT_4),
            1
        );
    }

    #[test]
    fn element_type_values_match_the_design_notes() {
        assert_eq!(IREE_HAL_ELEMENT_TYPE_FLOAT_32, 0x2100_0020);
        assert_eq!(IREE_HAL_ELEMENT_TYPE_BFLOAT_16, 0x2200_0010);
        assert_eq!(IREE_HAL_ELEMENT_TYPE_INT_32, 0x1000_0020);
        assert_eq!(IREE_HAL_ELEMENT_TYPE_BOOL_8, 0x1300_0008);
    }

    #[test]
    fn values_carry_their_tag_and_payload() {
        let v = iree_vm_value_make_f32(1.5);
        assert_eq!(v.type_, IREE_VM_VALUE_TYPE_F32);
        // SAFETY: the constructor wrote the f32 member of the union.
        assert_eq!(unsafe { v.__bindgen_anon_1.f32_ }, 1.5);
        let v = iree_vm_value_make_i64(-7);
        assert_eq!(v.type_, IREE_VM_VALUE_TYPE_I64);
        // SAFETY: the constructor wrote the i64 member of the union.
        assert_eq!(unsafe { v.__bindgen_anon_1.i64_ }, -7);
    }

    #[test]
    fn timeouts_are_absolute_extremes() {
        assert_eq!(iree_infinite_timeout().nanos, i64::MAX);
        assert_eq!(iree_immediate_timeout().nanos, i64::MIN);
        assert_eq!(iree_infinite_timeout().type_, IREE_TIMEOUT_ABSOLUTE);
    }

    #[test]
    fn frontier_tracker_defaults_match_the_header() {
        let options = iree_async_frontier_tracker_options_default();
        assert_eq!(
            (
                options.axis_table_capacity,
                options.session_epoch,
                options.machine_index
            ),
            (256, 1, 0)
        );
        let params = iree_hal_device_create_params_default();
        assert!(params.next.is_null() && params.proactor_pool.is_null());
    }

    #[test]
    fn null_allocator_has_no_control_function() {
        assert!(iree_allocator_null().ctl.is_none());
        assert!(iree_allocator_system().ctl.is_some());
    }
}
