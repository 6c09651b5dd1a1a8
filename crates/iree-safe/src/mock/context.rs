//! VM instances, contexts and invocation.
//!
//! As in IREE, a context retains its instance and its modules; invocation
//! reads arguments from the input list without retaining them and replaces
//! the output list's contents with the results, whose buffer views the list
//! owns.

use std::borrow::Cow;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use super::api::*;
use super::hal::{BufferView, Device};
use super::list::{list, Scalar, Slot};
use super::module::Module;
use super::ops::{self, Value};
use super::registry::{self, Kind, Object, Owned};
use super::status::{return_object, to_status, Failure, MockResult};

/// A VM instance.
#[derive(Debug)]
pub(crate) struct Instance {
    hal_types: AtomicBool,
}

impl Object for Instance {
    fn kind(&self) -> Kind {
        Kind::Instance
    }
}

impl Instance {
    /// Whether `iree_hal_module_register_all_types` ran on this instance.
    pub(crate) fn hal_types_registered(&self) -> bool {
        self.hal_types.load(Ordering::Acquire)
    }
}

/// `iree_vm_instance_create`.
///
/// # Safety
/// `out_instance` is valid for writes.
pub(crate) unsafe fn iree_vm_instance_create(
    _type_capacity: iree_host_size_t,
    _allocator: iree_allocator_t,
    out_instance: *mut *mut iree_vm_instance_t,
) -> iree_status_t {
    let instance = Owned::new(Instance {
        hal_types: AtomicBool::new(false),
    });
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_instance, Ok(instance)) }
}

/// `iree_hal_module_register_all_types`: marks the instance, which
/// `iree_hal_module_create` requires.
///
/// # Safety
/// `instance` is live.
pub(crate) unsafe fn iree_hal_module_register_all_types(
    instance: *mut iree_vm_instance_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let instance = unsafe { registry::get(instance.cast_const().cast::<Instance>()) };
    instance.hal_types.store(true, Ordering::Release);
    std::ptr::null_mut()
}

/// A VM context: an instance and the modules registered in it.
#[derive(Debug)]
pub(crate) struct Context {
    /// Retained for the context's life, as IREE's contexts do.
    _instance: Owned<Instance>,
    modules: Vec<Owned<Module>>,
    /// Set while an invocation runs: contexts are thread-compatible.
    busy: AtomicBool,
}

impl Object for Context {
    fn kind(&self) -> Kind {
        Kind::Context
    }
}

impl Context {
    /// The device of the context's HAL module.
    fn device(&self) -> Option<&Device> {
        self.modules.iter().find_map(|m| match &**m {
            Module::Hal(hal) => Some(hal.group().device()),
            Module::Bytecode(_) => None,
        })
    }
}

/// Marks a context busy for one invocation.
struct Busy<'a>(&'a AtomicBool);

impl<'a> Busy<'a> {
    fn enter(flag: &'a AtomicBool) -> Busy<'a> {
        assert!(
            !flag.swap(true, Ordering::Acquire),
            "mock IREE: a VM context was entered from two threads at once \
             (contexts are thread-compatible: calls must be serialized)"
        );
        Busy(flag)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// `iree_vm_context_create_with_modules`: retains the instance and the
/// modules. NOT_FOUND when a bytecode module comes before any HAL module
/// (its `hal.*` imports cannot resolve), as in IREE.
///
/// # Safety
/// `instance` is live; `modules` holds `module_count` live modules;
/// `out_context` is valid for writes.
pub(crate) unsafe fn iree_vm_context_create_with_modules(
    instance: *mut iree_vm_instance_t,
    _flags: iree_vm_context_flags_t,
    module_count: iree_host_size_t,
    modules: *mut *mut iree_vm_module_t,
    _allocator: iree_allocator_t,
    out_context: *mut *mut iree_vm_context_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let result = unsafe { create_context(instance, module_count, modules) };
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { return_object(out_context, result) }
}

/// # Safety
/// As for [`iree_vm_context_create_with_modules`].
unsafe fn create_context(
    instance: *mut iree_vm_instance_t,
    module_count: usize,
    modules: *mut *mut iree_vm_module_t,
) -> MockResult<Owned<Context>> {
    let instance = NonNull::new(instance)
        .ok_or_else(|| Failure::new(IREE_STATUS_INVALID_ARGUMENT, "no instance"))?;
    let modules: &[*mut iree_vm_module_t] = if module_count == 0 {
        &[]
    } else {
        // SAFETY: the caller passes `module_count` module pointers.
        unsafe { std::slice::from_raw_parts(modules, module_count) }
    };
    let mut hal_seen = false;
    let mut retained = Vec::with_capacity(modules.len());
    for &module in modules {
        let module = NonNull::new(module)
            .ok_or_else(|| Failure::new(IREE_STATUS_INVALID_ARGUMENT, "null module"))?;
        // SAFETY: the caller passes live modules from the mock.
        let module = unsafe { Owned::retain(module.cast::<Module>()) };
        match &*module {
            Module::Hal(_) => hal_seen = true,
            Module::Bytecode(bytecode) if !hal_seen => {
                return Err(Failure::new(
                    IREE_STATUS_NOT_FOUND,
                    format!(
                        "module `{}` imports from `hal`, which is not registered before it in the context",
                        bytecode.name()
                    ),
                ))
            }
            Module::Bytecode(_) => {}
        }
        retained.push(module);
    }
    Ok(Owned::new(Context {
        // SAFETY: the caller passes a live instance from the mock.
        _instance: unsafe { Owned::retain(instance.cast()) },
        modules: retained,
        busy: AtomicBool::new(false),
    }))
}

/// `iree_vm_invoke`: checks the inputs against the function's calling
/// convention, runs its op on the context's device, and replaces the
/// outputs' contents with the results. Panics when the context is already
/// in use on another thread.
///
/// # Safety
/// `context` is live; `function` was looked up on a live module; `inputs`
/// and `outputs` are null or live lists.
pub(crate) unsafe fn iree_vm_invoke(
    context: *mut iree_vm_context_t,
    function: iree_vm_function_t,
    _flags: iree_vm_invocation_flags_t,
    _policy: *const iree_vm_invocation_policy_t,
    inputs: *const iree_vm_list_t,
    outputs: *mut iree_vm_list_t,
    _host_allocator: iree_allocator_t,
) -> iree_status_t {
    // SAFETY: forwarded from this function's contract.
    let context = unsafe { registry::get(context.cast_const().cast::<Context>()) };
    let _busy = Busy::enter(&context.busy);
    // SAFETY: forwarded from this function's contract.
    to_status(unsafe { invoke(context, &function, inputs, outputs) })
}

/// # Safety
/// As for [`iree_vm_invoke`].
unsafe fn invoke(
    context: &Context,
    function: &iree_vm_function_t,
    inputs: *const iree_vm_list_t,
    outputs: *mut iree_vm_list_t,
) -> MockResult {
    let invalid = |message: String| Failure::new(IREE_STATUS_INVALID_ARGUMENT, message);
    let Some(Module::Bytecode(bytecode)) = context
        .modules
        .iter()
        .find(|m| m.as_ptr().cast_const().cast() == function.module)
        .map(|m| &**m)
    else {
        return Err(invalid(
            "the function's module is not a bytecode module of this context".into(),
        ));
    };
    let def = bytecode.function(function).ok_or_else(|| {
        invalid(format!(
            "no exported function at ordinal {}",
            function.ordinal
        ))
    })?;
    let device = context
        .device()
        .expect("context creation puts a HAL module before every bytecode module");
    let (argument_types, result_types) = def.op.signature();
    if !inputs.is_null() && inputs == outputs.cast_const() {
        return Err(invalid("the input list is also the output list".into()));
    }
    // SAFETY: the caller passes null or a live list.
    let input_items = (!inputs.is_null()).then(|| unsafe { list(inputs) }.items());
    let items: &[Slot] = input_items.as_deref().map_or(&[], Vec::as_slice);
    if items.len() != argument_types.len() {
        return Err(invalid(if input_items.is_none() {
            "no input provided to a function that has inputs".into()
        } else {
            format!(
                "input list and function mismatch; expected {} arguments but passed {}",
                argument_types.len(),
                items.len()
            )
        }));
    }
    let mut arguments = Vec::with_capacity(items.len());
    for (index, (slot, &ty)) in items.iter().zip(argument_types).enumerate() {
        let argument = match slot {
            Slot::Value(scalar) => match *scalar {
                Scalar::I32(v) => Value::I32(v),
                Scalar::I64(v) => Value::I64(v),
                Scalar::F32(v) => Value::F32(v),
                Scalar::F64(v) => Value::F64(v),
            },
            Slot::Ref(Some(view)) if view.is_readable_on(device) => Value::Tensor(ops::Tensor {
                shape: Cow::Borrowed(view.shape()),
                element_type: view.element_type(),
                bytes: Cow::Borrowed(view.bytes()),
            }),
            Slot::Ref(Some(_)) => {
                return Err(invalid(format!(
                    "input {index} is a buffer of another device than the context's"
                )))
            }
            Slot::Ref(None) => return Err(invalid(format!("input {index} is a null ref"))),
        };
        if !argument.fits(ty) {
            return Err(Failure::new(
                IREE_STATUS_FAILED_PRECONDITION,
                format!("input {index} is not a {ty:?} (variant type mismatch)"),
            ));
        }
        arguments.push(argument);
    }
    let results = def.op.run(&arguments)?;
    debug_assert!(results.len() == result_types.len());
    if outputs.is_null() {
        return if results.is_empty() {
            Ok(())
        } else {
            Err(invalid(
                "no output list for a function that has results".into(),
            ))
        };
    }
    // SAFETY: the caller passes a live list.
    let mut output_items = unsafe { list(outputs) }.items();
    output_items.clear();
    let slots = results
        .into_iter()
        .map(|result| {
            Ok(match result {
                Value::Tensor(t) => Slot::Ref(Some(BufferView::new(
                    device,
                    &t.shape,
                    t.element_type,
                    t.bytes.into_owned(),
                )?)),
                Value::I32(v) => Slot::Value(Scalar::I32(v)),
                Value::I64(v) => Slot::Value(Scalar::I64(v)),
                Value::F32(v) => Slot::Value(Scalar::F32(v)),
                Value::F64(v) => Slot::Value(Scalar::F64(v)),
            })
        })
        .collect::<MockResult<Vec<Slot>>>()?;
    output_items.extend(slots);
    Ok(())
}

registry::refcount_functions! {
    iree_vm_instance_t => Instance: iree_vm_instance_release, iree_vm_instance_retain;
    iree_vm_context_t => Context: iree_vm_context_release, iree_vm_context_retain;
}

#[cfg(test)]
mod tests {
    use crate::mock::{live_objects, program};
    use crate::{Runtime, Tensor, VmValue};

    #[test]
    fn scalar_arguments_and_results_round_trip() {
        let _serial = crate::mock::serial();
        let before = live_objects().total_excluding_instance();
        {
            let runtime = Runtime::new("local-sync").unwrap();
            let module = runtime.load(program("scalars").unwrap().vmfb()).unwrap();
            assert_eq!(module.name(), "scalars");
            assert_eq!(
                module.function_names(),
                ["scale", "add_i32", "mul_i64", "half_f64", "__init"]
            );
            let call = |name: &str, arguments: &[VmValue]| {
                module.function(name).unwrap().call(arguments).unwrap()
            };
            let sum = call("add_i32", &[VmValue::I32(i32::MAX), VmValue::I32(2)]);
            assert!(matches!(sum[..], [VmValue::I32(v)] if v == i32::MIN + 1));
            let product = call("mul_i64", &[VmValue::I64(-3), VmValue::I64(1 << 40)]);
            assert!(matches!(product[..], [VmValue::I64(v)] if v == -3 << 40));
            let half = call("half_f64", &[VmValue::F64(3.0)]);
            assert!(matches!(half[..], [VmValue::F64(v)] if v == 1.5));
            let x =
                Tensor::from_slice(runtime.device(), &[2, 2], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
            let scaled = call("scale", &[x.into(), VmValue::F32(0.5)]);
            let scaled = scaled[0].as_tensor().unwrap();
            assert_eq!(scaled.shape(), &[2, 2]);
            assert_eq!(scaled.to_vec::<f32>().unwrap(), [0.5, 1.0, 1.5, 2.0]);
            assert!(call("__init", &[]).is_empty());
            let scale = module.function("scale").unwrap();
            assert_eq!(scale.calling_convention().as_str(), "0rf_r");
            assert_eq!(
                scale.reflection_attr("iree.abi.declaration").unwrap(),
                "sync func @scale(%input0: tensor<?xf32>, %input1: f32) -> (%output0: tensor<?xf32>)"
            );
            assert_eq!(scale.reflection_attr("iree.abi.model"), None);
            assert_eq!(
                module
                    .function("__init")
                    .unwrap()
                    .reflection_attr("iree.abi.declaration"),
                None
            );
        }
        assert_eq!(live_objects().total_excluding_instance(), before);
    }

    #[test]
    fn iree_errors_carry_code_and_message() {
        let _serial = crate::mock::serial();
        let before = live_objects().total_excluding_instance();
        {
            let runtime = Runtime::new("local-sync").unwrap();
            let module = runtime.load(program("add").unwrap().vmfb()).unwrap();
            let error = module.function("sub").unwrap_err();
            assert_eq!(error.code(), crate::StatusCode::NotFound);
            assert!(
                error.to_string().contains("exports: add, __init"),
                "{error}"
            );
            let add = module.function("add").unwrap();
            let a = Tensor::from_slice(runtime.device(), &[4], &[1.0f32; 4]).unwrap();
            let b = Tensor::from_slice(runtime.device(), &[3], &[1.0f32; 3]).unwrap();
            let error = add.call(&[a.clone().into(), b.into()]).unwrap_err();
            assert_eq!(error.code(), crate::StatusCode::InvalidArgument);
            assert!(
                error
                    .to_string()
                    .contains("calling `add.add`: INVALID_ARGUMENT; input shape mismatch"),
                "{error}"
            );
            let i = Tensor::from_slice(runtime.device(), &[4], &[1i32; 4]).unwrap();
            let error = add.call(&[a.into(), i.into()]).unwrap_err();
            assert!(
                error.to_string().contains("input 1 element type mismatch"),
                "{error}"
            );
            let error = Runtime::new("cuda").unwrap_err();
            assert_eq!(error.code(), crate::StatusCode::NotFound);
            assert!(
                error.to_string().contains("cannot open device `cuda`"),
                "{error}"
            );
        }
        assert_eq!(live_objects().total_excluding_instance(), before);
    }
}
