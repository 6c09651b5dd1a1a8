//! Ownership and error tests that run both against the real runtime and,
//! under miri, against the mock C API (where `LeakCheck` also proves that
//! every object created was released exactly once).

use iree_safe::{Error, Runtime, StatusCode, Tensor, TrustedVmfb, VmValue};
use test_support::iree::{load_function, program, LeakCheck, DRIVER};

fn add_inputs(runtime: &Runtime) -> [VmValue; 2] {
    [
        Tensor::from_slice(runtime.device(), &[4], &[1.0f32, 2.0, 3.0, 4.0])
            .unwrap()
            .into(),
        Tensor::from_slice(runtime.device(), &[4], &[10.0f32, 20.0, 30.0, 40.0])
            .unwrap()
            .into(),
    ]
}

fn values(outputs: &[VmValue]) -> Vec<f32> {
    outputs[0]
        .as_tensor()
        .expect("a tensor result")
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn load_call_drop() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    let module = runtime.load(bytes.vmfb()).unwrap();
    assert_eq!(module.artifact_bytes(), bytes.len());
    let add = module.function("add").unwrap();
    assert_eq!(add.name(), "add");
    assert_eq!(
        values(&add.call(&add_inputs(&runtime)).unwrap()),
        vec![11.0, 22.0, 33.0, 44.0]
    );
}

#[test]
fn handles_can_be_dropped_in_any_order() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let module = runtime.load(program("add").vmfb()).unwrap();
    let add = module.function("add").unwrap();
    let inputs = add_inputs(&runtime);
    // The runtime and the module go first: the function and the tensors keep
    // what they need alive.
    drop(runtime);
    drop(module);
    let out = add.call(&inputs).unwrap();
    drop(add);
    drop(inputs);
    assert_eq!(values(&out), vec![11.0, 22.0, 33.0, 44.0]);
    // A result outlives everything that produced it.
    let tensor = out.into_iter().next().unwrap().into_tensor().unwrap();
    assert_eq!(
        tensor.to_vec::<f32>().unwrap(),
        vec![11.0, 22.0, 33.0, 44.0]
    );
}

#[test]
fn device_tensors_chain_without_a_host_round_trip() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    let [a, b] = add_inputs(&runtime);
    let once = add.call(&[a.clone(), b]).unwrap().remove(0);
    let twice = add.call(&[once, a]).unwrap();
    assert_eq!(values(&twice), vec![12.0, 24.0, 36.0, 48.0]);
}

#[test]
fn borrowed_arguments_and_results_read_one_at_a_time() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    let [a, b] = add_inputs(&runtime).map(|value| value.into_tensor().unwrap());
    let mut results = add.call_borrowed(&[&a, &b]).unwrap();
    assert_eq!(results.len(), 1);
    let sum = results.next().unwrap().unwrap().into_tensor().unwrap();
    assert!(results.next().is_none());
    // The result took its own reference: it outlives the list it was read
    // from, and chains into the next call as a borrow.
    drop(results);
    let twice = add.call_borrowed(&[&sum, &a]).unwrap();
    let twice: Vec<VmValue> = twice.collect::<Result<_, _>>().unwrap();
    assert_eq!(values(&twice), vec![12.0, 24.0, 36.0, 48.0]);
    // Results never read are released with the iterator.
    drop(add.call_borrowed(&[&a, &b]).unwrap());
    let error = add.call_borrowed(&[&a]).unwrap_err();
    assert!(
        matches!(&error, Error::InvalidArgument(m) if m.contains("takes 2 arguments")),
        "{error}"
    );
}

#[test]
fn clones_share_one_module() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    let first = runtime.load(bytes.vmfb()).unwrap();
    let second = runtime.load(bytes.vmfb()).unwrap();
    assert!(first.same_module(&first.clone()));
    assert!(!first.same_module(&second), "each load is its own module");
    assert!(first.function("add").unwrap().module().same_module(&first));
}

/// Bytes that are not a compiler's output, on purpose.
fn untrusted(bytes: &[u8]) -> TrustedVmfb<'_> {
    // SAFETY: breaks the contract on purpose, with inputs fixed in this
    // file: empty, truncated and random archives, which IREE's size and
    // flatbuffer checks (iree/vm/bytecode/archive.c, module.c) reject before
    // any of their code runs. Arbitrary mutations are not safe to load: the
    // disk cache authenticates its entries instead (jit-cache `store`).
    unsafe { TrustedVmfb::new_unchecked(bytes) }
}

#[test]
fn empty_truncated_and_random_artifacts_are_errors() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    assert!(matches!(
        runtime.load(untrusted(&[])),
        Err(Error::InvalidArgument(_))
    ));
    // (A .vmfb ends with a zip directory IREE does not read, so cuts stay
    // inside the module proper.)
    for cut in [
        1,
        8,
        16,
        bytes.len() / 4,
        bytes.len() / 2,
        bytes.len() * 3 / 4,
    ] {
        let error = runtime.load(untrusted(&bytes[..cut])).unwrap_err();
        assert!(
            matches!(error, Error::Iree { .. }),
            "truncated to {cut}: {error}"
        );
    }
    // Deterministic noise, plus noise behind a valid header.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    };
    for len in [1, 7, 64, 4096] {
        assert!(
            runtime.load(untrusted(&noise(len))).is_err(),
            "{len} random bytes loaded"
        );
    }
    let mut corrupted = bytes.as_bytes().to_vec();
    let middle = corrupted.len() / 2;
    corrupted[middle..].copy_from_slice(&noise(bytes.len() - middle));
    assert!(
        runtime.load(untrusted(&corrupted)).is_err(),
        "a corrupted body loaded"
    );
}

#[test]
fn misaligned_bytes_are_copied_into_aligned_storage() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    // The allocator (and miri's, which randomises it) may return any
    // address: pick the start that lands one byte past an 8-byte boundary.
    let mut buffer = vec![0u8; bytes.len() + 8];
    let start = (9 - buffer.as_ptr() as usize % 8) % 8;
    buffer[start..start + bytes.len()].copy_from_slice(&bytes);
    let misaligned = &buffer[start..start + bytes.len()];
    assert_eq!(misaligned.as_ptr() as usize % 8, 1);
    // SAFETY: a copy of the compiler's output.
    let vmfb = unsafe { TrustedVmfb::new_unchecked(misaligned) };
    let add = runtime.load(vmfb).unwrap().function("add").unwrap();
    assert_eq!(
        values(&add.call(&add_inputs(&runtime)).unwrap()),
        vec![11.0, 22.0, 33.0, 44.0]
    );
    let error = runtime
        .load(untrusted(&misaligned[..misaligned.len() / 2]))
        .unwrap_err();
    assert!(matches!(error, Error::Iree { .. }), "{error}");
}

#[test]
fn wrong_argument_count_and_kind_are_caught_before_iree() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    let [a, _] = add_inputs(&runtime);
    let error = add.call(std::slice::from_ref(&a)).unwrap_err();
    assert!(
        matches!(&error, Error::InvalidArgument(m) if m.contains("takes 2 arguments")),
        "{error}"
    );
    let error = add.call(&[a, VmValue::F32(1.0)]).unwrap_err();
    assert!(
        matches!(&error, Error::InvalidArgument(m) if m.contains("argument 1") && m.contains("tensor")),
        "{error}"
    );
}

#[test]
fn tensors_from_another_device_are_refused() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let other = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    let error = add.call(&add_inputs(&other)).unwrap_err();
    assert!(
        matches!(&error, Error::InvalidArgument(m) if m.contains("another device")),
        "{error}"
    );
}

#[test]
fn tensor_checks_its_byte_length_and_read_type() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let error = Tensor::from_bytes(
        runtime.device(),
        &[1, 5],
        iree_safe::ElementType::F32,
        &[0; 16],
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid argument: f32[1,5] needs 20 bytes, got 16"
    );
    assert!(Tensor::from_slice(runtime.device(), &[usize::MAX, 2], &[0f32]).is_err());
    let t = Tensor::from_slice(runtime.device(), &[2], &[1i32, 2]).unwrap();
    assert_eq!(t.describe(), "i32[2]");
    let error = t.to_vec::<f32>().unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument);
    let scalar = Tensor::from_slice(runtime.device(), &[], &[7i64]).unwrap();
    assert_eq!(scalar.shape(), &[] as &[usize]);
    assert_eq!(scalar.to_vec::<i64>().unwrap(), vec![7]);
}

#[test]
fn devices_answer_configuration_queries() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let device = runtime.device();
    assert_eq!(device.query_i64("hal.device.id", DRIVER).unwrap(), 1);
    assert_eq!(device.query_i64("hal.device.id", "cuda").unwrap(), 0);
    let error = device
        .query_i64("cuda.device", "compute_capability_major")
        .unwrap_err();
    assert_eq!(error.code(), StatusCode::NotFound, "{error}");
    assert!(error.to_string().contains("cuda.device"), "{error}");
}
