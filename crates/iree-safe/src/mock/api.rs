//! The C API as the crate sees it under the mock: IREE's own types,
//! constants and inline helpers (`iree_sys::*`), with every function the
//! crate calls replaced by the mock's, under the same name and signature
//! (the explicit imports below shadow the glob).
//!
//! The functions are Rust-ABI `unsafe fn`s rather than `extern "C"`, so a
//! failed check panics and unwinds into the test instead of aborting.
//! `iree_allocator_system` stays iree-sys' inline helper: the crate passes
//! it as the host allocator, and the mock never allocates through it.

pub use iree_sys::*;

pub use super::context::{
    iree_hal_module_register_all_types, iree_vm_context_create_with_modules,
    iree_vm_context_release, iree_vm_context_retain, iree_vm_instance_create,
    iree_vm_instance_release, iree_vm_instance_retain, iree_vm_invoke,
};
pub use super::hal::{
    iree_async_frontier_tracker_create, iree_async_frontier_tracker_release,
    iree_async_proactor_pool_create, iree_async_proactor_pool_options_default,
    iree_async_proactor_pool_release, iree_hal_buffer_view_allocate_buffer_copy,
    iree_hal_buffer_view_buffer, iree_hal_buffer_view_byte_length,
    iree_hal_buffer_view_check_deref, iree_hal_buffer_view_element_type,
    iree_hal_buffer_view_release, iree_hal_buffer_view_retain, iree_hal_buffer_view_retain_ref,
    iree_hal_buffer_view_shape_dims, iree_hal_buffer_view_shape_rank, iree_hal_create_device,
    iree_hal_device_allocator, iree_hal_device_group_create_from_device,
    iree_hal_device_group_release, iree_hal_device_group_retain, iree_hal_device_release,
    iree_hal_device_retain, iree_hal_device_transfer_d2h, iree_hal_driver_registry_default,
    iree_hal_register_all_available_drivers, iree_numa_node_count,
};
pub use super::list::{
    iree_vm_list_create, iree_vm_list_get_ref_assign, iree_vm_list_get_value,
    iree_vm_list_push_ref_move, iree_vm_list_push_value, iree_vm_list_release, iree_vm_list_retain,
    iree_vm_list_size,
};
pub use super::module::{
    iree_hal_module_create, iree_hal_module_debug_sink_null, iree_hal_module_device_policy_default,
    iree_vm_bytecode_module_create, iree_vm_function_lookup_attr_by_name, iree_vm_function_name,
    iree_vm_function_signature, iree_vm_module_lookup_function_by_name,
    iree_vm_module_lookup_function_by_ordinal, iree_vm_module_name, iree_vm_module_release,
    iree_vm_module_retain, iree_vm_module_signature,
};
pub use super::status::{iree_status_format, iree_status_free};
