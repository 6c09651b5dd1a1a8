//! Tests against the real IREE runtime and compiler: numerics, every element
//! type, scalar arguments, and IREE's own error messages.

#![cfg(not(iree_mock))]

use iree_safe::{ElementType, Error, Runtime, SlotKind, StatusCode, Tensor, VmValue};
use test_support::iree::{load_function, program, DRIVER};

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

#[test]
fn sigmoid_matches_the_formula() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let module = runtime.load(program("sigmoid").vmfb()).unwrap();
    assert_eq!(module.name(), "sigmoid");
    assert!(module.function_names().contains(&"sigmoid".to_owned()));
    let f = module.function("sigmoid").unwrap();
    assert_eq!(
        f.calling_convention().arguments(),
        Some(&[SlotKind::Ref][..])
    );
    assert_eq!(f.calling_convention().results(), Some(&[SlotKind::Ref][..]));
    let input = [-3.0f32, -0.5, 0.0, 2.0];
    let x = Tensor::from_slice(runtime.device(), &[4], &input).unwrap();
    let out = f.call(&[x.into()]).unwrap();
    let y = out[0].as_tensor().unwrap();
    assert_eq!(y.shape(), &[4]);
    assert_eq!(y.element_type(), ElementType::F32);
    for (x, y) in input.iter().zip(y.to_vec::<f32>().unwrap()) {
        assert!((y - sigmoid(*x)).abs() < 1e-6, "sigmoid({x}) = {y}");
    }
}

#[test]
fn reflection_exposes_the_abi_declaration() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let f = load_function(&runtime, "add");
    assert_eq!(f.calling_convention().as_str(), "0rr_r");
    let declaration = f
        .reflection_attr("iree.abi.declaration")
        .expect("IREE emits an ABI declaration");
    assert!(declaration.contains("add"), "{declaration}");
    assert_eq!(f.reflection_attr("no.such.attribute"), None);
}

#[test]
fn scalar_arguments_and_results() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let module = runtime.load(program("scalars").vmfb()).unwrap();
    let x = Tensor::from_slice(runtime.device(), &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let scaled = module
        .function("scale")
        .unwrap()
        .call(&[x.into(), VmValue::F32(2.5)])
        .unwrap();
    assert_eq!(
        scaled[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
        vec![2.5, 5.0, 7.5, 10.0]
    );
    let sum = module
        .function("add_i32")
        .unwrap()
        .call(&[VmValue::I32(40), VmValue::I32(2)])
        .unwrap();
    assert!(matches!(sum[..], [VmValue::I32(42)]), "{sum:?}");
    let product = module
        .function("mul_i64")
        .unwrap()
        .call(&[VmValue::I64(1 << 40), VmValue::I64(3)])
        .unwrap();
    assert!(
        matches!(product[..], [VmValue::I64(v)] if v == 3 << 40),
        "{product:?}"
    );
    let half = module
        .function("half_f64")
        .unwrap()
        .call(&[VmValue::F64(1e300)])
        .unwrap();
    assert!(
        matches!(half[..], [VmValue::F64(v)] if v == 5e299),
        "{half:?}"
    );
}

#[test]
fn every_element_type_round_trips_through_a_call() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let module = runtime.load(program("identity").vmfb()).unwrap();
    let call = |name: &str, tensor: Tensor| -> Tensor {
        module
            .function(name)
            .unwrap()
            .call(&[tensor.into()])
            .unwrap()
            .remove(0)
            .into_tensor()
            .unwrap()
    };

    let y = call(
        "neg_f64",
        Tensor::from_slice(runtime.device(), &[3], &[1.5f64, -2.0, 1e300]).unwrap(),
    );
    assert_eq!(y.to_vec::<f64>().unwrap(), vec![-1.5, 2.0, -1e300]);
    let y = call(
        "neg_i8",
        Tensor::from_slice(runtime.device(), &[3], &[1i8, -2, 127]).unwrap(),
    );
    assert_eq!(y.to_vec::<i8>().unwrap(), vec![-1, 2, -127]);
    let y = call(
        "neg_i32",
        Tensor::from_slice(runtime.device(), &[3], &[1i32, -2, 1 << 30]).unwrap(),
    );
    assert_eq!(y.to_vec::<i32>().unwrap(), vec![-1, 2, -(1 << 30)]);
    let y = call(
        "neg_i64",
        Tensor::from_slice(runtime.device(), &[3], &[1i64, -2, 1 << 60]).unwrap(),
    );
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![-1, 2, -(1 << 60)]);
    let y = call(
        "not_i1",
        Tensor::from_slice(runtime.device(), &[3], &[true, false, true]).unwrap(),
    );
    assert_eq!(y.element_type(), ElementType::Bool);
    assert_eq!(y.to_vec::<bool>().unwrap(), vec![false, true, false]);

    // Half types go through bytes: flipping the sign bit negates.
    for (name, ty) in [
        ("neg_f16", ElementType::F16),
        ("neg_bf16", ElementType::BF16),
    ] {
        let bytes = [0x00, 0x3c, 0x00, 0x40, 0x00, 0x00];
        let y = call(
            name,
            Tensor::from_bytes(runtime.device(), &[3], ty, &bytes).unwrap(),
        );
        assert_eq!(y.element_type(), ty);
        assert_eq!(
            y.to_bytes().unwrap(),
            vec![0x00, 0xbc, 0x00, 0xc0, 0x00, 0x80],
            "{name}"
        );
    }
}

#[test]
fn wrong_shape_is_an_error_carrying_iree_message() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let f = runtime
        .load(program("sigmoid").vmfb())
        .unwrap()
        .function("sigmoid")
        .unwrap();
    let x = Tensor::from_slice(runtime.device(), &[5], &[0.0f32; 5]).unwrap();
    let error = f.call(&[x.into()]).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    let text = error.to_string();
    assert!(
        text.contains("mismatch") && text.contains('4') && text.contains('5'),
        "{text}"
    );
    assert!(
        text.contains("sigmoid.sigmoid"),
        "the error names the function: {text}"
    );
}

#[test]
fn wrong_dtype_is_an_error_carrying_iree_message() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let f = runtime
        .load(program("sigmoid").vmfb())
        .unwrap()
        .function("sigmoid")
        .unwrap();
    let x = Tensor::from_slice(runtime.device(), &[4], &[1i32, 2, 3, 4]).unwrap();
    let error = f.call(&[x.into()]).unwrap_err();
    assert!(
        matches!(
            error,
            Error::Iree {
                code: StatusCode::InvalidArgument,
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("element type"), "{error}");
}

#[test]
fn unknown_function_lists_the_exports() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let module = runtime.load(program("add").vmfb()).unwrap();
    let error = module.function("mul").unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound);
    assert!(error.to_string().contains("exports: add"), "{error}");
}

#[test]
fn local_task_runs_the_same_module() {
    let runtime = Runtime::new("local-task").unwrap();
    let f = load_function(&runtime, "add");
    let a = Tensor::from_slice(runtime.device(), &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let b = Tensor::from_slice(runtime.device(), &[4], &[10.0f32, 20.0, 30.0, 40.0]).unwrap();
    let out = f.call(&[a.into(), b.into()]).unwrap();
    assert_eq!(
        out[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
        vec![11.0, 22.0, 33.0, 44.0]
    );
}

#[test]
fn unknown_driver_is_not_found() {
    let error = Runtime::new("no-such-driver").unwrap_err();
    assert!(error.to_string().contains("no-such-driver"), "{error}");
}
