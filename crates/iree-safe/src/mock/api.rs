//! The C API as the crate sees it under the mock, item by item: IREE's own
//! types, constants and inline helpers from `iree-sys` (data and pure Rust,
//! the same in both worlds), and every function the crate calls, from the
//! mock under the same name and signature.
//!
//! Nothing is glob-imported from `iree-sys`: a call to an IREE function that
//! the mock does not provide fails to compile under miri, and the tidy test
//! of `xtask` checks that each `sys::iree_*` call of the crate is listed
//! here.
//!
//! The functions are Rust-ABI `unsafe fn`s rather than `extern "C"`, so a
//! failed check panics and unwinds into the test instead of aborting.
//! `iree_allocator_system` stays iree-sys' inline helper: the crate passes
//! it as the host allocator of most objects, and the mock never calls it
//! (what IREE would allocate with it, the mock allocates itself and
//! `iree_allocator_free` takes back, `allocator.rs`); devices get the
//! crate's buffer pool, which the mock's local devices call.

// Types.
pub(crate) use iree_sys::{
    iree_allocator_alloc_params_t, iree_allocator_command_t, iree_allocator_t,
    iree_async_frontier_tracker_options_t, iree_async_frontier_tracker_t,
    iree_async_proactor_pool_options_t, iree_async_proactor_pool_t, iree_const_byte_span_t,
    iree_device_size_t, iree_flags_parse_mode_t, iree_hal_allocator_statistics_t,
    iree_hal_allocator_t, iree_hal_buffer_params_t, iree_hal_buffer_release_callback_t,
    iree_hal_buffer_t, iree_hal_buffer_view_t, iree_hal_device_create_params_t,
    iree_hal_device_group_t, iree_hal_device_id_t, iree_hal_device_info_t, iree_hal_device_t,
    iree_hal_dim_t, iree_hal_driver_registry_t, iree_hal_driver_t, iree_hal_element_type_t,
    iree_hal_encoding_type_t, iree_hal_external_buffer_t, iree_hal_memory_access_t,
    iree_hal_module_debug_sink_t, iree_hal_module_device_policy_t, iree_hal_module_flags_t,
    iree_hal_transfer_buffer_flags_t, iree_host_size_t, iree_status_code_t, iree_status_handle_t,
    iree_status_t, iree_string_builder_t, iree_string_view_t, iree_timeout_t,
    iree_vm_bytecode_module_flags_t, iree_vm_context_flags_t, iree_vm_context_t,
    iree_vm_function_linkage_t, iree_vm_function_signature_t, iree_vm_function_t,
    iree_vm_instance_t, iree_vm_invocation_flags_t, iree_vm_invocation_policy_t, iree_vm_list_t,
    iree_vm_module_signature_t, iree_vm_module_t, iree_vm_ref_t, iree_vm_ref_type_t,
    iree_vm_type_def_t, iree_vm_value_t,
};

// Constants.
pub(crate) use iree_sys::{
    IREE_ALLOCATOR_COMMAND_CALLOC, IREE_ALLOCATOR_COMMAND_FREE, IREE_ALLOCATOR_COMMAND_MALLOC,
    IREE_ALLOCATOR_COMMAND_REALLOC, IREE_FLAGS_PARSE_MODE_DEFAULT, IREE_HAL_BUFFER_USAGE_DEFAULT,
    IREE_HAL_ELEMENT_TYPE_BFLOAT_16, IREE_HAL_ELEMENT_TYPE_BOOL_8, IREE_HAL_ELEMENT_TYPE_FLOAT_16,
    IREE_HAL_ELEMENT_TYPE_FLOAT_32, IREE_HAL_ELEMENT_TYPE_FLOAT_64, IREE_HAL_ELEMENT_TYPE_INT_32,
    IREE_HAL_ELEMENT_TYPE_INT_64, IREE_HAL_ELEMENT_TYPE_INT_8, IREE_HAL_ELEMENT_TYPE_SINT_32,
    IREE_HAL_ELEMENT_TYPE_SINT_64, IREE_HAL_ELEMENT_TYPE_SINT_8,
    IREE_HAL_ENCODING_TYPE_DENSE_ROW_MAJOR, IREE_HAL_EXTERNAL_BUFFER_TYPE_HOST_ALLOCATION,
    IREE_HAL_MEMORY_ACCESS_READ, IREE_HAL_MEMORY_ACCESS_UNALIGNED,
    IREE_HAL_MEMORY_TYPE_DEVICE_LOCAL, IREE_HAL_MODULE_FLAG_NONE,
    IREE_HAL_TRANSFER_BUFFER_FLAG_DEFAULT, IREE_STATUS_ABORTED, IREE_STATUS_ALREADY_EXISTS,
    IREE_STATUS_CANCELLED, IREE_STATUS_CODE_MASK, IREE_STATUS_DATA_LOSS,
    IREE_STATUS_DEADLINE_EXCEEDED, IREE_STATUS_DEFERRED, IREE_STATUS_FAILED_PRECONDITION,
    IREE_STATUS_INCOMPATIBLE, IREE_STATUS_INTERNAL, IREE_STATUS_INVALID_ARGUMENT,
    IREE_STATUS_NOT_FOUND, IREE_STATUS_OK, IREE_STATUS_OUT_OF_RANGE, IREE_STATUS_PERMISSION_DENIED,
    IREE_STATUS_RESOURCE_EXHAUSTED, IREE_STATUS_UNAUTHENTICATED, IREE_STATUS_UNAVAILABLE,
    IREE_STATUS_UNIMPLEMENTED, IREE_STATUS_UNKNOWN, IREE_VM_BYTECODE_MODULE_FLAG_NONE,
    IREE_VM_CONTEXT_FLAG_NONE, IREE_VM_FUNCTION_LINKAGE_EXPORT, IREE_VM_INVOCATION_FLAG_NONE,
    IREE_VM_TYPE_CAPACITY_DEFAULT, IREE_VM_VALUE_TYPE_F32, IREE_VM_VALUE_TYPE_F64,
    IREE_VM_VALUE_TYPE_I32, IREE_VM_VALUE_TYPE_I64,
};

// Inline helpers: pure Rust in iree-sys, nothing to mock.
pub(crate) use iree_sys::{
    iree_allocator_system, iree_async_frontier_tracker_options_default,
    iree_hal_device_create_params_default, iree_hal_element_bit_count,
    iree_hal_element_dense_byte_count, iree_infinite_timeout, iree_make_const_byte_span,
    iree_make_string_view, iree_status_code, iree_status_is_ok, iree_trace_app_enter,
    iree_vm_value_make_f32, iree_vm_value_make_f64, iree_vm_value_make_i32, iree_vm_value_make_i64,
};

// The mock's own unit tests pass a null allocator where IREE takes one.
#[cfg(test)]
pub(crate) use iree_sys::iree_allocator_null;

// Functions, from the mock.
pub(crate) use super::allocator::iree_allocator_free;
pub(crate) use super::context::{
    iree_hal_module_register_all_types, iree_vm_context_create_with_modules,
    iree_vm_context_release, iree_vm_context_retain, iree_vm_instance_create,
    iree_vm_instance_release, iree_vm_instance_retain, iree_vm_invoke,
};
pub(crate) use super::driver::{
    iree_hal_driver_dump_device_info, iree_hal_driver_query_available_devices,
    iree_hal_driver_registry_try_create, iree_hal_driver_release, iree_hal_driver_retain,
};
pub(crate) use super::flags::iree_flags_parse;
pub(crate) use super::hal::{
    iree_async_frontier_tracker_create, iree_async_frontier_tracker_release,
    iree_async_frontier_tracker_retain, iree_async_proactor_pool_create,
    iree_async_proactor_pool_options_default, iree_async_proactor_pool_release,
    iree_async_proactor_pool_retain, iree_hal_allocator_import_buffer,
    iree_hal_allocator_query_statistics, iree_hal_buffer_release, iree_hal_buffer_retain,
    iree_hal_buffer_view_allocate_buffer_copy, iree_hal_buffer_view_buffer,
    iree_hal_buffer_view_byte_length, iree_hal_buffer_view_check_deref,
    iree_hal_buffer_view_create, iree_hal_buffer_view_element_type, iree_hal_buffer_view_release,
    iree_hal_buffer_view_retain, iree_hal_buffer_view_retain_ref, iree_hal_buffer_view_shape_dims,
    iree_hal_buffer_view_shape_rank, iree_hal_create_device, iree_hal_device_allocator,
    iree_hal_device_group_create_from_device, iree_hal_device_group_release,
    iree_hal_device_group_retain, iree_hal_device_query_i64, iree_hal_device_release,
    iree_hal_device_retain, iree_hal_device_transfer_d2h, iree_hal_driver_registry_default,
    iree_hal_register_all_available_drivers, iree_numa_node_count, iree_vm_ref_release,
};
pub(crate) use super::list::{
    iree_vm_list_clear, iree_vm_list_create, iree_vm_list_get_ref_assign, iree_vm_list_get_value,
    iree_vm_list_push_ref_move, iree_vm_list_push_value, iree_vm_list_release, iree_vm_list_retain,
    iree_vm_list_size,
};
pub(crate) use super::module::{
    iree_hal_module_create, iree_hal_module_debug_sink_null, iree_hal_module_device_policy_default,
    iree_vm_bytecode_module_create, iree_vm_function_lookup_attr_by_name, iree_vm_function_name,
    iree_vm_function_signature, iree_vm_module_lookup_function_by_name,
    iree_vm_module_lookup_function_by_ordinal, iree_vm_module_name, iree_vm_module_release,
    iree_vm_module_retain, iree_vm_module_signature,
};
pub(crate) use super::status::{iree_status_format, iree_status_free};
pub(crate) use super::string_builder::{
    iree_string_builder_deinitialize, iree_string_builder_initialize, iree_string_builder_view,
};
