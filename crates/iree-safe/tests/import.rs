//! Host memory handed to compiled code without a copy
//! (`Tensor::import_shared`): the results equal the copying path's, the
//! owner is kept alive exactly as long as IREE uses the memory and released
//! exactly once, and memory IREE cannot import is refused (the caller
//! copies). Runs on the real runtime and, under miri, on the mock C API,
//! where a release too early would be a use after free and `LeakCheck`
//! proves every buffer was released.

use std::sync::Arc;

use iree_safe::{Runtime, Tensor, VmValue};
use test_support::iree::{load_function, LeakCheck, DRIVER};

/// Four f32s at a 64-byte-aligned address.
#[repr(C, align(64))]
struct Aligned([f32; 5]);

fn first_four(a: &Aligned) -> &[f32] {
    &a.0[..4]
}

fn sum(runtime: &Runtime, a: VmValue, b: VmValue) -> Vec<f32> {
    let add = load_function(runtime, "add");
    let out = add.call(&[a, b]).unwrap();
    out[0].as_tensor().unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn an_imported_tensor_computes_what_a_copied_one_does() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 99.0]));
    let imported = Tensor::import_shared(runtime.device(), &[4], Arc::clone(&owner), first_four)
        .unwrap()
        .expect("aligned memory on a CPU device is imported");
    assert_eq!(imported.shape(), [4]);
    let copied = Tensor::from_slice(runtime.device(), &[4], first_four(&owner)).unwrap();
    let other = Tensor::from_slice(runtime.device(), &[4], &[10.0f32, 20.0, 30.0, 40.0]).unwrap();
    let from_import = sum(&runtime, imported.clone().into(), other.clone().into());
    let from_copy = sum(&runtime, copied.into(), other.into());
    assert_eq!(from_import, from_copy);
    assert_eq!(from_import, [11.0, 22.0, 33.0, 44.0]);
    // Read back directly too: the bytes are the owner's.
    assert_eq!(imported.to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn the_owner_lives_until_the_last_use_and_is_released_once() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 0.0]));
    let imported = Tensor::import_shared(runtime.device(), &[4], Arc::clone(&owner), first_four)
        .unwrap()
        .unwrap();
    // The buffer holds one reference; a clone of the tensor shares it.
    assert_eq!(Arc::strong_count(&owner), 2);
    let clone = imported.clone();
    drop(imported);
    assert_eq!(
        Arc::strong_count(&owner),
        2,
        "a clone still uses the memory"
    );
    // While imported, the owner cannot be mutated.
    let mut mine = Arc::clone(&owner);
    assert!(Arc::get_mut(&mut mine).is_none());
    drop(mine);
    let y = sum(&runtime, clone.clone().into(), clone.clone().into());
    assert_eq!(y, [2.0, 4.0, 6.0, 8.0]);
    drop(clone);
    // The release callback ran exactly once: one reference less, not two
    // (a second release would have freed `owner` under us: miri reports it).
    assert_eq!(Arc::strong_count(&owner), 1);
    // The caller's reference alone keeps it now, and it is whole.
    assert_eq!(owner.0[..4], [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn the_owner_may_go_first() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let owner = Arc::new(Aligned([5.0, 6.0, 7.0, 8.0, 0.0]));
    let imported = Tensor::import_shared(runtime.device(), &[4], owner, first_four)
        .unwrap()
        .unwrap();
    // The caller's `Arc` is gone: the buffer's keeps the memory.
    let y = sum(&runtime, imported.clone().into(), imported.into());
    assert_eq!(y, [10.0, 12.0, 14.0, 16.0]);
}

#[test]
fn memory_that_cannot_be_imported_is_left_to_the_caller() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 5.0]));
    // 4 bytes past a 64-byte boundary: IREE requires 64.
    let unaligned =
        Tensor::import_shared(runtime.device(), &[4], Arc::clone(&owner), |a| &a.0[1..]).unwrap();
    assert!(unaligned.is_none());
    // Empty: nothing to import.
    let empty =
        Tensor::import_shared(runtime.device(), &[0], Arc::clone(&owner), |a| &a.0[..0]).unwrap();
    assert!(empty.is_none());
    // A length that is not the shape's is the caller's error.
    let error =
        Tensor::import_shared(runtime.device(), &[3], Arc::clone(&owner), first_four).unwrap_err();
    assert!(
        error.to_string().contains("needs 12 bytes, got 16"),
        "{error}"
    );
    // Nothing was kept.
    assert_eq!(Arc::strong_count(&owner), 1);
}

/// The mock's software device stands for a GPU: its memory is not the
/// host's, so nothing is imported there.
#[cfg(iree_mock)]
#[test]
fn a_device_whose_memory_is_not_the_hosts_imports_nothing() {
    let _check = LeakCheck::start();
    let device =
        iree_safe::Device::open(&format!("{}://", iree_safe::mock::SOFTWARE_DRIVER)).unwrap();
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 5.0]));
    assert!(!device.is_local());
    let none = Tensor::import_shared(&device, &[4], Arc::clone(&owner), first_four).unwrap();
    assert!(none.is_none());
    assert_eq!(Arc::strong_count(&owner), 1);
}

/// `pass` returns its argument: the result is the imported buffer itself,
/// and keeps the owner alive after the argument is gone.
#[cfg(not(iree_mock))]
#[test]
fn a_result_that_is_the_imported_buffer_keeps_the_owner() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let pass = load_function(&runtime, "pass");
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 0.0]));
    let imported = Tensor::import_shared(runtime.device(), &[4], Arc::clone(&owner), first_four)
        .unwrap()
        .unwrap();
    let out = pass.call(&[imported.into()]).unwrap();
    assert_eq!(Arc::strong_count(&owner), 2, "the result holds the buffer");
    assert_eq!(
        out[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
        [1.0, 2.0, 3.0, 4.0]
    );
    drop(out);
    assert_eq!(Arc::strong_count(&owner), 1);
}

#[test]
fn a_read_back_aligned_for_import_holds_the_values_at_a_boundary() {
    let _check = LeakCheck::start();
    let runtime = Runtime::new(DRIVER).unwrap();
    let values: Vec<f32> = (0..37).map(|i| i as f32 - 3.5).collect();
    let x = Tensor::from_slice(runtime.device(), &[37], &values).unwrap();
    let (host, offset) = x.to_vec_aligned::<f32>().unwrap();
    assert_eq!(host[offset..offset + 37], values[..]);
    assert_eq!(host[offset..].as_ptr().addr() % 64, 0);
    assert!(host[..offset]
        .iter()
        .chain(&host[offset + 37..])
        .all(|&v| v == 0.0));
    assert_eq!(x.to_vec::<f32>().unwrap(), values);
    // What was read back imports, and computes what the copy does.
    let host = Arc::new(host);
    let imported = Tensor::import_shared(runtime.device(), &[37], Arc::clone(&host), |h| {
        &h[offset..offset + 37]
    })
    .unwrap()
    .expect("aligned");
    assert_eq!(imported.to_vec::<f32>().unwrap(), values);
    let (flags, at) = Tensor::from_slice(runtime.device(), &[3], &[true, false, true])
        .unwrap()
        .to_vec_aligned::<bool>()
        .unwrap();
    assert_eq!(flags[at..at + 3], [true, false, true]);
    assert_eq!(flags[at..].as_ptr().addr() % 64, 0);
    assert!(x.to_vec_aligned::<i32>().is_err());
}

/// `local-task` runs the compiled code on worker threads: they read the
/// imported memory, and the owner is still released once, by whichever
/// thread drops the last reference.
#[cfg(not(iree_mock))]
#[test]
fn local_task_imports_too() {
    let runtime = Runtime::new("local-task").unwrap();
    let owner = Arc::new(Aligned([1.0, 2.0, 3.0, 4.0, 0.0]));
    let imported = Tensor::import_shared(runtime.device(), &[4], Arc::clone(&owner), first_four)
        .unwrap()
        .expect("local-task is a CPU device");
    let y = sum(&runtime, imported.clone().into(), imported.into());
    assert_eq!(y, [2.0, 4.0, 6.0, 8.0]);
    // A worker may drop its reference just after the call returned (seen
    // under qemu-user on a loaded machine): released within a bound.
    let released = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while Arc::strong_count(&owner) > 1 && std::time::Instant::now() < released {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(Arc::strong_count(&owner), 1);
}
