//! VM modules (`iree_vm_module_t`): the HAL module and bytecode modules
//! loaded from mock archives, with their exported functions.
//!
//! As in IREE, the HAL module retains its device group, and a bytecode
//! module owns its archive from a successful create on: when the module is
//! destroyed it frees the archive through the archive allocator
//! (`iree_allocator_free`), and on a failed create the archive stays the
//! caller's. Names and calling conventions are views into the archive.

use std::ffi::c_void;
use std::ptr::NonNull;

use super::api::*;
use super::context::Instance;
use super::hal::DeviceGroup;
use super::program::{self, Program};
use super::registry::{self, Kind, Object, Owned};
use super::status::{return_object, Failure, MockResult};
use super::string_view::view_str;

/// Alignment the mock requires of archives: IREE's archive segment
/// alignment (`IREE_VM_ARCHIVE_SEGMENT_ALIGNMENT`), which iree-safe's aligned
/// copy provides. Real IREE reads unaligned archives too, so this is a check
/// that the copy happens.
const ARCHIVE_ALIGNMENT: usize = 64;

/// A module: the HAL module or a bytecode module.
#[derive(Debug)]
pub(crate) enum Module {
    Hal(HalModule),
    Bytecode(BytecodeModule),
}

impl Object for Module {
    fn kind(&self) -> Kind {
        match self {
            Module::Hal(_) => Kind::HalModule,
            Module::Bytecode(_) => Kind::BytecodeModule,
        }
    }
}

/// The HAL module of one device group.
#[derive(Debug)]
pub(crate) struct HalModule {
    group: Owned<DeviceGroup>,
}

impl HalModule {
    pub(crate) fn group(&self) -> &DeviceGroup {
        &self.group
    }
}

/// A module loaded from a mock archive.
#[derive(Debug)]
pub(crate) struct BytecodeModule {
    archive: Archive,
    program: Program,
    /// `iree.abi.declaration` of each function (none for `__init`).
    declarations: Vec<Option<Box<str>>>,
}

impl BytecodeModule {
    /// The exported function `function` names, if it is one of this module's.
    pub(crate) fn function(&self, function: &iree_vm_function_t) -> Option<&program::Function> {
        if function.linkage != IREE_VM_FUNCTION_LINKAGE_EXPORT as u16 {
            return None;
        }
        self.program.functions.get(usize::from(function.ordinal))
    }

    /// The name of the module as written in the archive.
    pub(crate) fn name(&self) -> &str {
        self.archive.str(&self.program.name)
    }

    /// The name of an exported function, from the archive.
    pub(crate) fn function_name(&self, function: &program::Function) -> &str {
        self.archive.str(&function.name)
    }
}

/// The archive a bytecode module was created from, freed with the module.
struct Archive {
    data: NonNull<u8>,
    len: usize,
    allocator: iree_allocator_t,
}

// SAFETY: the archive bytes are immutable while the module lives; freeing
// them goes through the archive allocator, which IREE calls from whichever
// thread releases the module last, so allocators must allow that.
unsafe impl Send for Archive {}
// SAFETY: as above; `&Archive` only reads the bytes.
unsafe impl Sync for Archive {}

impl Archive {
    fn bytes(&self) -> &[u8] {
        // SAFETY: `create` checked the span; the module owns the archive
        // until `drop`, so the bytes stay readable and unchanged.
        unsafe { std::slice::from_raw_parts(self.data.as_ptr(), self.len) }
    }

    /// Text that `program::parse` verified to be UTF-8.
    fn str(&self, range: &std::ops::Range<usize>) -> &str {
        std::str::from_utf8(&self.bytes()[range.clone()]).expect("verified UTF-8")
    }

    /// A view of `range` of the archive, valid while the module lives.
    fn view(&self, range: &std::ops::Range<usize>) -> iree_string_view_t {
        let text = self.str(range);
        iree_make_string_view(text.as_ptr().cast(), text.len())
    }
}

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Archive({:p}, {} bytes)", self.data, self.len)
    }
}

impl Drop for Archive {
    /// `iree_allocator_free(archive_allocator, data)`: calls the allocator's
    /// ctl with FREE unless it has none (`iree_allocator_null()`, a borrowed
    /// archive). IREE ignores the status; so does the mock, after freeing it.
    fn drop(&mut self) {
        let Some(ctl) = self.allocator.ctl else {
            return;
        };
        let mut ptr = self.data.as_ptr().cast::<c_void>();
        // SAFETY: the creator gave the archive and this allocator to the
        // module; freeing it once, when the module dies, is the contract.
        unsafe {
            let status = ctl(
                self.allocator.self_,
                IREE_ALLOCATOR_COMMAND_FREE,
                std::ptr::null(),
                &mut ptr,
            );
            super::status::iree_status_free(status);
        }
    }
}

/// `iree_hal_module_device_policy_default`.
///
/// # Safety
/// None; `unsafe` like the C function it stands for.
pub(crate) unsafe fn iree_hal_module_device_policy_default() -> iree_hal_module_device_policy_t {
    iree_hal_module_device_policy_t::default()
}

/// `iree_hal_module_debug_sink_null`.
///
/// # Safety
/// None; `unsafe` like the C function it stands for.
pub(crate) unsafe fn iree_hal_module_debug_sink_null() -> iree_hal_module_debug_sink_t {
    iree_hal_module_debug_sink_t::default()
}

/// `iree_hal_module_create`: the HAL module over `device_group`, which it
/// retains. FAILED_PRECONDITION unless the instance has the HAL types
/// registered.
///
/// # Safety
/// `instance` and `device_group` are live; `out_module` is valid for writes.
pub(crate) unsafe fn iree_hal_module_create(
    instance: *mut iree_vm_instance_t,
    _device_policy: iree_hal_module_device_policy_t,
    device_group: *mut iree_hal_device_group_t,
    _flags: iree_hal_module_flags_t,
    _debug_sink: iree_hal_module_debug_sink_t,
    _host_allocator: iree_allocator_t,
    out_module: *mut *mut iree_vm_module_t,
) -> iree_status_t {
    // SAFETY: the caller guarantees the instance is live; `get` checks it.
    let instance = unsafe { registry::get(instance.cast_const().cast::<Instance>()) };
    let result = if !instance.hal_types_registered() {
        Err(Failure::new(
            IREE_STATUS_FAILED_PRECONDITION,
            "HAL types are not registered with the instance (iree_hal_module_register_all_types)",
        ))
    } else if let Some(group) = NonNull::new(device_group) {
        // SAFETY: the group came from the mock (caller's contract).
        let group = unsafe { Owned::retain(group.cast::<DeviceGroup>()) };
        Ok(Owned::new(Module::Hal(HalModule { group })))
    } else {
        Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "no device group",
        ))
    };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_module, result) }
}

/// `iree_vm_bytecode_module_create`: parses and verifies a mock archive
/// (see [`program`]). On success the module owns the archive and frees it
/// through `archive_allocator` when destroyed; on failure nothing is freed.
///
/// # Safety
/// `instance` is live; `archive_contents` is readable and stays so until the
/// module frees it; `out_module` is valid for writes.
pub(crate) unsafe fn iree_vm_bytecode_module_create(
    instance: *mut iree_vm_instance_t,
    _flags: iree_vm_bytecode_module_flags_t,
    archive_contents: iree_const_byte_span_t,
    archive_allocator: iree_allocator_t,
    _allocator: iree_allocator_t,
    out_module: *mut *mut iree_vm_module_t,
) -> iree_status_t {
    // SAFETY: the caller guarantees the instance is live; `get` checks it.
    unsafe { registry::get(instance.cast_const().cast::<Instance>()) };
    // SAFETY: forwarded from this function's contract.
    let result = unsafe { load(archive_contents, archive_allocator) };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_module, result) }
}

/// # Safety
/// As for [`iree_vm_bytecode_module_create`].
unsafe fn load(
    contents: iree_const_byte_span_t,
    allocator: iree_allocator_t,
) -> MockResult<Owned<Module>> {
    let Some(data) = NonNull::new(contents.data.cast_mut()) else {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            "no archive data",
        ));
    };
    if data.as_ptr().addr() % ARCHIVE_ALIGNMENT != 0 {
        return Err(Failure::new(
            IREE_STATUS_INVALID_ARGUMENT,
            format!("archive data is not {ARCHIVE_ALIGNMENT}-byte aligned"),
        ));
    }
    // SAFETY: the caller passes `data_length` readable bytes.
    let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr(), contents.data_length) };
    let program = program::parse(bytes)?;
    let declarations = program
        .functions
        .iter()
        .map(|f| {
            let name = std::str::from_utf8(&bytes[f.name.clone()]).expect("verified UTF-8");
            f.op.declaration(name).map(Into::into)
        })
        .collect();
    // Only now does the module take the archive: a failure above leaves it
    // with the caller, as in IREE.
    let archive = Archive {
        data,
        len: contents.data_length,
        allocator,
    };
    Ok(Owned::new(Module::Bytecode(BytecodeModule {
        archive,
        program,
        declarations,
    })))
}

/// Borrows a live module.
///
/// # Safety
/// `module` came from the mock and the caller holds a reference for `'a`.
pub(crate) unsafe fn module<'a>(module: *const iree_vm_module_t) -> &'a Module {
    // SAFETY: forwarded from this function's contract.
    unsafe { registry::get(module.cast::<Module>()) }
}

/// `iree_vm_module_name`: `hal`, or the name in the archive.
///
/// # Safety
/// `module` is live; the view is valid while it lives.
pub(crate) unsafe fn iree_vm_module_name(
    module_ptr: *const iree_vm_module_t,
) -> iree_string_view_t {
    // SAFETY: forwarded from this function's contract.
    match unsafe { module(module_ptr) } {
        Module::Hal(_) => iree_make_string_view(c"hal".as_ptr(), 3),
        Module::Bytecode(bytecode) => bytecode.archive.view(&bytecode.program.name),
    }
}

/// `iree_vm_module_signature`: the export count (none for the mock HAL
/// module).
///
/// # Safety
/// `module` is live.
pub(crate) unsafe fn iree_vm_module_signature(
    module_ptr: *const iree_vm_module_t,
) -> iree_vm_module_signature_t {
    // SAFETY: forwarded from this function's contract.
    let export_function_count = match unsafe { module(module_ptr) } {
        Module::Hal(_) => 0,
        Module::Bytecode(bytecode) => bytecode.program.functions.len(),
    };
    iree_vm_module_signature_t {
        export_function_count,
        ..Default::default()
    }
}

/// The bytecode module behind `module`, for export lookups.
fn exports(
    module: &Module,
    linkage: iree_vm_function_linkage_t,
) -> MockResult<Option<&BytecodeModule>> {
    if linkage != IREE_VM_FUNCTION_LINKAGE_EXPORT {
        return Err(Failure::new(
            IREE_STATUS_UNIMPLEMENTED,
            format!("the mock only looks up exports, not linkage {linkage}"),
        ));
    }
    Ok(match module {
        Module::Hal(_) => None,
        Module::Bytecode(bytecode) => Some(bytecode),
    })
}

fn export(module: *const iree_vm_module_t, ordinal: usize) -> iree_vm_function_t {
    iree_vm_function_t {
        module: module.cast_mut(),
        linkage: IREE_VM_FUNCTION_LINKAGE_EXPORT as u16,
        ordinal: u16::try_from(ordinal).expect("parse limits functions to u16 ordinals"),
    }
}

/// `iree_vm_module_lookup_function_by_name`: NOT_FOUND when the module
/// exports no such function.
///
/// # Safety
/// `module` is live, `name` readable, `out_function` valid for writes.
pub(crate) unsafe fn iree_vm_module_lookup_function_by_name(
    module_ptr: *const iree_vm_module_t,
    linkage: iree_vm_function_linkage_t,
    name: iree_string_view_t,
    out_function: *mut iree_vm_function_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let (module, name) = unsafe { (module(module_ptr), view_str(name)) };
    let result = exports(module, linkage).and_then(|bytecode| {
        bytecode
            .and_then(|b| {
                b.program
                    .functions
                    .iter()
                    .position(|f| b.function_name(f) == name)
            })
            .ok_or_else(|| {
                Failure::new(
                    IREE_STATUS_NOT_FOUND,
                    format!("function `{name}` not exported by the module"),
                )
            })
    });
    write_function(out_function, module_ptr, result)
}

/// `iree_vm_module_lookup_function_by_ordinal`: INVALID_ARGUMENT past the
/// export count.
///
/// # Safety
/// `module` is live and `out_function` valid for writes.
pub(crate) unsafe fn iree_vm_module_lookup_function_by_ordinal(
    module_ptr: *const iree_vm_module_t,
    linkage: iree_vm_function_linkage_t,
    ordinal: iree_host_size_t,
    out_function: *mut iree_vm_function_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let module = unsafe { module(module_ptr) };
    let result = exports(module, linkage).and_then(|bytecode| {
        let count = bytecode.map_or(0, |b| b.program.functions.len());
        if ordinal < count {
            Ok(ordinal)
        } else {
            Err(Failure::new(
                IREE_STATUS_INVALID_ARGUMENT,
                format!("export ordinal {ordinal} out of range ({count} exports)"),
            ))
        }
    });
    write_function(out_function, module_ptr, result)
}

/// Writes the export at the looked-up ordinal (or a null function).
fn write_function(
    out: *mut iree_vm_function_t,
    module: *const iree_vm_module_t,
    result: MockResult<usize>,
) -> iree_status_t {
    let (function, status) = match result {
        Ok(ordinal) => (export(module, ordinal), std::ptr::null_mut()),
        Err(failure) => (iree_vm_function_t::default(), failure.into_status()),
    };
    // SAFETY: the lookup functions' callers pass a valid out-pointer.
    unsafe { *out = function };
    status
}

/// The bytecode module and function `function` names, if any.
///
/// # Safety
/// `function.module` is live for `'a`.
unsafe fn lookup<'a>(
    function: &iree_vm_function_t,
) -> Option<(&'a BytecodeModule, &'a program::Function, usize)> {
    // SAFETY: forwarded from this function's contract.
    match unsafe { module(function.module) } {
        Module::Hal(_) => None,
        Module::Bytecode(bytecode) => {
            let def = bytecode.function(function)?;
            Some((bytecode, def, usize::from(function.ordinal)))
        }
    }
}

/// `iree_vm_function_name`: a view into the archive (empty for an invalid
/// function, as in IREE).
///
/// # Safety
/// `function` is valid and its module live; the view is valid while the
/// module lives.
pub(crate) unsafe fn iree_vm_function_name(
    function: *const iree_vm_function_t,
) -> iree_string_view_t {
    // SAFETY: forwarded from this function's contract.
    match unsafe { lookup(&*function) } {
        Some((bytecode, def, _)) => bytecode.archive.view(&def.name),
        None => iree_string_view_t::default(),
    }
}

/// `iree_vm_function_signature`: the calling convention, a view into the
/// archive.
///
/// # Safety
/// As for [`iree_vm_function_name`].
pub(crate) unsafe fn iree_vm_function_signature(
    function: *const iree_vm_function_t,
) -> iree_vm_function_signature_t {
    // SAFETY: forwarded from this function's contract.
    let calling_convention = match unsafe { lookup(&*function) } {
        Some((bytecode, def, _)) => bytecode.archive.view(&def.calling_convention),
        None => iree_string_view_t::default(),
    };
    iree_vm_function_signature_t { calling_convention }
}

/// `iree_vm_function_lookup_attr_by_name`: `iree.abi.declaration` (owned by
/// the module); an empty view for any other key.
///
/// # Safety
/// As for [`iree_vm_function_name`]; `key` is readable.
pub(crate) unsafe fn iree_vm_function_lookup_attr_by_name(
    function: *const iree_vm_function_t,
    key: iree_string_view_t,
) -> iree_string_view_t {
    // SAFETY: forwarded from this function's contract.
    let (found, key) = unsafe { (lookup(&*function), view_str(key)) };
    let declaration = found
        .filter(|_| key == "iree.abi.declaration")
        .and_then(|(bytecode, _, ordinal)| bytecode.declarations[ordinal].as_deref());
    match declaration {
        Some(text) => iree_make_string_view(text.as_ptr().cast(), text.len()),
        None => iree_string_view_t::default(),
    }
}

registry::refcount_functions! {
    iree_vm_module_t => Module: iree_vm_module_release, iree_vm_module_retain;
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::mock::{live_objects, program};

    static FREED: AtomicUsize = AtomicUsize::new(0);

    /// An archive allocator that only counts FREE commands.
    unsafe extern "C" fn count_frees(
        _self: *mut c_void,
        command: iree_allocator_command_t,
        _params: *const c_void,
        inout_ptr: *mut *mut c_void,
    ) -> iree_status_t {
        if command == IREE_ALLOCATOR_COMMAND_FREE && !inout_ptr.is_null() {
            FREED.fetch_add(1, Ordering::SeqCst);
        }
        std::ptr::null_mut()
    }

    #[repr(C, align(64))]
    struct Aligned([u8; 256]);

    #[test]
    fn the_archive_is_freed_with_the_last_reference_and_never_on_failure() {
        let _serial = crate::mock::serial();
        let before = live_objects().total_excluding_instance();
        let bytes = program("add").unwrap();
        let mut storage = Aligned([0; 256]);
        storage.0[..bytes.len()].copy_from_slice(&bytes);
        let counting = iree_allocator_t {
            self_: std::ptr::null_mut(),
            ctl: Some(count_frees),
        };
        let mut instance = std::ptr::null_mut();
        let mut module_ptr = std::ptr::null_mut();
        // SAFETY: `storage` outlives every module created over it; each
        // reference is given back once; statuses are freed once.
        unsafe {
            assert!(iree_vm_instance_create(0, iree_allocator_null(), &mut instance).is_null());
            let create = |offset: usize, length: usize, out: &mut *mut iree_vm_module_t| {
                let span = iree_make_const_byte_span(storage.0.as_ptr().add(offset), length);
                iree_vm_bytecode_module_create(instance, 0, span, counting, counting, out)
            };
            for (offset, length, expected) in [
                (0, bytes.len() - 1, "length field"),
                (1, bytes.len(), "64-byte aligned"),
            ] {
                let status = create(offset, length, &mut module_ptr);
                assert!(module_ptr.is_null());
                let mut text = [0u8; 256];
                let mut len = 0;
                iree_status_format(status, text.len(), text.as_mut_ptr().cast(), &mut len);
                let text = std::str::from_utf8(&text[..len]).unwrap();
                assert!(text.contains(expected), "{text}");
                iree_status_free(status);
            }
            assert_eq!(
                FREED.load(Ordering::SeqCst),
                0,
                "a failed create frees nothing"
            );

            assert!(create(0, bytes.len(), &mut module_ptr).is_null());
            // Names are views into the archive, as in a real .vmfb.
            let name = iree_vm_module_name(module_ptr);
            let archive = storage.0.as_ptr_range();
            assert!(archive.contains(&name.data.cast()));
            assert_eq!(
                std::slice::from_raw_parts(name.data.cast::<u8>(), name.size),
                b"add"
            );
            iree_vm_module_retain(module_ptr);
            iree_vm_module_release(module_ptr);
            assert_eq!(FREED.load(Ordering::SeqCst), 0);
            iree_vm_module_release(module_ptr);
            assert_eq!(
                FREED.load(Ordering::SeqCst),
                1,
                "freed with the last reference"
            );
            iree_vm_instance_release(instance);
        }
        assert_eq!(live_objects().total_excluding_instance(), before);
    }
}
