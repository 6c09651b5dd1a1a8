//! `Device::memory_statistics`: the device allocator's bytes in use and
//! peak follow the tensors and call results alive on it, on the real
//! runtime and, under miri, on the mock (whose allocator counts the bytes
//! of the buffers it allocates and frees, as IREE's heap allocator does).

use iree_safe::{MemoryStatistics, Runtime, Tensor, VmValue};
use test_support::iree::{load_function, LeakCheck, DRIVER};

/// Elements of the test tensors: 4 KiB of f32 natively, less under miri.
const ELEMENTS: usize = if cfg!(miri) { 64 } else { 1024 };
const BYTES: u64 = (ELEMENTS * std::mem::size_of::<f32>()) as u64;

/// Snapshots of one device, checking that the peaks never decrease and
/// never fall below what is in use.
struct Watch<'a> {
    runtime: &'a Runtime,
    last: MemoryStatistics,
}

impl<'a> Watch<'a> {
    fn new(runtime: &'a Runtime) -> Self {
        let last = runtime.device().memory_statistics().unwrap();
        Watch { runtime, last }
    }

    fn now(&mut self) -> MemoryStatistics {
        let now = self.runtime.device().memory_statistics().unwrap();
        assert!(
            now.device_bytes_peak >= self.last.device_bytes_peak
                && now.host_bytes_peak >= self.last.host_bytes_peak,
            "a peak decreased: {:?} then {now:?}",
            self.last
        );
        assert!(now.device_bytes_peak >= now.device_bytes_in_use, "{now:?}");
        assert!(now.host_bytes_peak >= now.host_bytes_in_use, "{now:?}");
        self.last = now;
        now
    }
}

fn ramp(runtime: &Runtime, scale: f32) -> Tensor {
    let data: Vec<f32> = (0..ELEMENTS).map(|i| i as f32 * scale).collect();
    Tensor::from_slice(runtime.device(), &[ELEMENTS], &data).unwrap()
}

/// The inputs of `add` (`tests/data/add.mlir`: two f32[4]), 16 bytes each.
const ADD_BYTES: u64 = 16;

fn add_input(runtime: &Runtime, scale: f32) -> VmValue {
    Tensor::from_slice(
        runtime.device(),
        &[4],
        &[1.0f32, 2.0, 3.0, 4.0].map(|x| x * scale),
    )
    .unwrap()
    .into()
}

#[test]
fn a_tensor_is_counted_while_it_lives() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let mut watch = Watch::new(&runtime);
    let start = watch.now();

    let x = ramp(&runtime, 1.0);
    let with_x = watch.now();
    assert!(
        with_x.device_bytes_in_use >= start.device_bytes_in_use + BYTES,
        "a {BYTES}-byte tensor: {start:?} then {with_x:?}"
    );
    assert!(with_x.device_bytes_peak >= with_x.device_bytes_in_use);

    // A clone shares the buffer: nothing more is allocated.
    let clone = x.clone();
    assert_eq!(watch.now().device_bytes_in_use, with_x.device_bytes_in_use);
    drop(clone);
    assert_eq!(watch.now().device_bytes_in_use, with_x.device_bytes_in_use);

    drop(x);
    let after = watch.now();
    assert_eq!(after.device_bytes_in_use, start.device_bytes_in_use);
    assert_eq!(after.device_bytes_peak, with_x.device_bytes_peak);
}

#[test]
fn call_results_are_counted_until_dropped() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let add = load_function(&runtime, "add");
    let mut watch = Watch::new(&runtime);
    let inputs = [add_input(&runtime, 1.0), add_input(&runtime, 2.0)];
    let with_inputs = watch.now();

    let outputs = add.call(&inputs).unwrap();
    let with_result = watch.now();
    assert!(
        with_result.device_bytes_in_use >= with_inputs.device_bytes_in_use + ADD_BYTES,
        "a {ADD_BYTES}-byte result: {with_inputs:?} then {with_result:?}"
    );
    drop(outputs);
    assert_eq!(
        watch.now().device_bytes_in_use,
        with_inputs.device_bytes_in_use
    );
    drop(inputs);
    let end = watch.now();
    assert!(
        end.device_bytes_in_use + 2 * ADD_BYTES <= with_inputs.device_bytes_in_use,
        "{with_inputs:?} then {end:?}"
    );
}

#[test]
fn each_device_counts_its_own_buffers() {
    let _check = LeakCheck::start();
    let first = Runtime::new(DRIVER).unwrap();
    let second = Runtime::new(DRIVER).unwrap();
    let before = second.device().memory_statistics().unwrap();
    let x = ramp(&first, 1.0);
    assert_eq!(second.device().memory_statistics().unwrap(), before);
    assert!(
        first
            .device()
            .memory_statistics()
            .unwrap()
            .device_bytes_in_use
            >= BYTES
    );
    drop(x);
}
