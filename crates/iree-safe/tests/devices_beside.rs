//! `Device::open_beside`: a `local-task` device beside a local one takes
//! its tensors and gives its own back without a copy, and every device of
//! the family stays open while a tensor of any of them lives (under miri,
//! against the mock, `LeakCheck` proves all of them are freed after).

use std::num::NonZeroUsize;

use iree_safe::{Device, Runtime, StatusCode, Tensor};
use test_support::iree::{load_function, LeakCheck};

const TWO: NonZeroUsize = NonZeroUsize::MIN.saturating_add(1);

#[test]
fn calls_on_either_device_take_the_others_tensors() {
    let _check = LeakCheck::start();
    let small = Device::open("local-sync").unwrap();
    let large = small.open_beside(TWO).unwrap();
    assert_eq!(large.uri(), "local-task");
    assert!(large.shares_memory_with(&small) && small.shares_memory_with(&large));
    assert!(!large.same_device(&small));
    let (y, z) = {
        let on_small = Runtime::with_device(small.clone()).unwrap();
        let on_large = Runtime::with_device(large.clone()).unwrap();
        let (add_small, add_large) = (
            load_function(&on_small, "add"),
            load_function(&on_large, "add"),
        );
        let x = Tensor::from_slice(&small, &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let y = add_large
            .call(&[x.clone().into(), x.clone().into()])
            .unwrap();
        let y = y[0].as_tensor().unwrap().clone();
        assert!(y.device().same_device(&large));
        let z = add_small.call(&[y.clone().into(), x.into()]).unwrap();
        (y, z[0].as_tensor().unwrap().clone())
    };
    // The runtimes, modules and device handles are gone; the tensors keep
    // both devices open.
    drop((small, large));
    assert_eq!(y.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    assert_eq!(z.to_vec::<f32>().unwrap(), [3.0, 6.0, 9.0, 12.0]);
}

#[test]
fn devices_opened_apart_still_refuse_each_others_tensors() {
    let _check = LeakCheck::start();
    let small = Device::open("local-sync").unwrap();
    let _beside = small.open_beside(TWO).unwrap();
    let other = Runtime::new("local-task").unwrap();
    assert!(!other.device().shares_memory_with(&small));
    let add = load_function(&other, "add");
    let x = Tensor::from_slice(&small, &[4], &[1.0f32; 4]).unwrap();
    let error = add.call(&[x.clone().into(), x.into()]).unwrap_err();
    assert_eq!(error.code(), StatusCode::InvalidArgument, "{error}");
    assert!(error.to_string().contains("another device"), "{error}");
}

/// A result that is an argument's own buffer (of the other device) keeps
/// that device open once the runtimes and handles are gone.
#[test]
#[cfg(not(iree_mock))]
fn a_result_that_is_the_other_devices_buffer_keeps_it_open() {
    let small = Device::open("local-sync").unwrap();
    let large = small.open_beside(TWO).unwrap();
    let y = {
        let on_large = Runtime::with_device(large.clone()).unwrap();
        let pass = load_function(&on_large, "pass");
        let x = Tensor::from_slice(&small, &[4], &[5.0f32, 6.0, 7.0, 8.0]).unwrap();
        let y = pass.call(&[x.into()]).unwrap();
        y[0].as_tensor().unwrap().clone()
    };
    drop((small, large));
    assert_eq!(y.to_vec::<f32>().unwrap(), [5.0, 6.0, 7.0, 8.0]);
}

/// The mock's software GPU, or the real runtime's Vulkan driver, which
/// CI runs on Mesa's lavapipe (`IREE_SAFE_TEST_DEVICES=vulkan`).
#[cfg(iree_mock)]
const GPU: &str = iree_safe::mock::SOFTWARE_DRIVER;
#[cfg(not(iree_mock))]
const GPU: &str = "vulkan";

#[test]
fn only_a_local_device_has_one_beside() {
    let _check = LeakCheck::start();
    let gpu = match Device::open(GPU) {
        Ok(gpu) => gpu,
        Err(error) => {
            let required = std::env::var("IREE_SAFE_TEST_DEVICES").unwrap_or_default();
            assert!(!required.contains(GPU), "{GPU} must open here: {error}");
            eprintln!("skipped: no `{GPU}` device ({error})");
            return;
        }
    };
    let error = gpu.open_beside(TWO).unwrap_err();
    assert_eq!(error.code(), StatusCode::Unimplemented, "{error}");
    assert!(error.to_string().contains("local CPU device"), "{error}");
}
