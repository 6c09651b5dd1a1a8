//! Host arguments on a CPU device: a 64-byte-aligned array is handed to the
//! compiled code without a copy (imported) and computes what a copy does;
//! the call does not keep it; arrays that cannot be imported are copied and
//! cached; a working set larger than the cache keeps the part that fits.

use std::sync::Arc;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    tuning::{aligned_copy, IMPORT_ALIGNMENT, IMPORT_MIN_BYTES},
    Dispatched, HostTensor, JitConfig, JitRuntime, Value,
};

fn array(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n)
            .map(|i| ((i * 7 + seed) % 13) as f32 / 13.0 - 0.5)
            .collect(),
    )
    .unwrap()
}

/// A standard-layout array that is *not* 64-byte aligned (whatever the
/// allocator gives): a copy starting 4 bytes past an aligned one.
fn unaligned(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    let mut data = array(&[n + 1], seed).into_raw_vec_and_offset().0;
    let skip = usize::from(data.as_ptr().addr().is_multiple_of(IMPORT_ALIGNMENT));
    data.truncate(skip + n);
    let flat = ndarray::Array1::from_vec(data).slice_move(ndarray::s![skip..]);
    let a = flat.into_shape_with_order(IxDyn(shape)).unwrap();
    assert_ne!(a.as_ptr().addr() % IMPORT_ALIGNMENT, 0);
    a
}

fn jit(edit: impl FnOnce(&mut sheaf_integration::settings::UploadSettings)) -> JitRuntime {
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .uploads(edit);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

fn run(jit: &JitRuntime, args: &[Value]) -> ArrayD<f32> {
    let mlp = reference::mlp_layer();
    match jit.dispatch(&mlp, args, &[]).unwrap() {
        Dispatched::Compiled(compiled) => {
            // The read-back array itself (not a copy): its placement matters.
            let host = compiled.outputs[0].to_host().unwrap().to_f32();
            Arc::unwrap_or_clone(host)
        }
        Dispatched::Interpret(why) => panic!("interpreted: {why}"),
    }
}

#[test]
fn an_aligned_host_array_is_imported_and_computes_what_a_copy_does() {
    // W: f32[256,256] is 256 KiB, above the import threshold; x and b are
    // below it and copied.
    let w = Arc::new(aligned_copy(&array(&[256, 256], 1)));
    assert_eq!(w.as_ptr().addr() % IMPORT_ALIGNMENT, 0);
    const { assert!(256 * 256 * 4 >= IMPORT_MIN_BYTES) };
    let b = Value::from(array(&[256], 2));
    let importing = jit(|_| {});
    let copying = jit(|uploads| uploads.import = false);
    for call in 0..3 {
        let x = Value::from(array(&[8, 256], 10 + call));
        let args = [x, Value::from(HostTensor::F32(Arc::clone(&w))), b.clone()];
        let imported = run(&importing, &args);
        let copied = run(&copying, &args);
        assert_eq!(imported, copied, "call {call}");
        let expected = reference::interpret_mlp_layer(&args).unwrap();
        assert_eq!(
            Value::from(imported).to_f32().unwrap(),
            expected[0].to_f32().unwrap()
        );
        // The call kept nothing: results are new buffers, and the import's
        // reference was released when the call's arguments were.
        drop(args);
        assert_eq!(Arc::strong_count(&w), 1, "call {call}");
    }
    let stats = importing.upload_stats();
    assert_eq!(
        (stats.imports, stats.bytes_imported),
        (3, 3 * 256 * 256 * 4),
        "{stats:?}"
    );
    // x three times, b once, then b again (and cached), then a hit.
    assert_eq!((stats.uploads, stats.hits), (5, 1), "{stats:?}");
    let copied = copying.upload_stats();
    assert_eq!(copied.imports, 0, "{copied:?}");
    assert_eq!(copied.uploads + copied.hits, 9, "{copied:?}");
}

#[test]
fn an_array_that_cannot_be_imported_is_copied_and_cached() {
    let w = Value::from(unaligned(&[256, 256], 1));
    let b = Value::from(array(&[256], 2));
    let jit = jit(|_| {});
    let mut results = Vec::new();
    for call in 0..3 {
        let x = Value::from(array(&[8, 256], 10 + call));
        results.push(run(&jit, &[x, w.clone(), b.clone()]));
    }
    let stats = jit.upload_stats();
    assert_eq!(stats.imports, 0, "{stats:?}");
    // W and b: copied on their first and second use, then hits.
    assert_eq!((stats.uploads, stats.hits), (3 + 4, 2), "{stats:?}");
    // Tagged storage is converted, never imported, aligned or not.
    let tagged = HostTensor::tagged(
        Arc::new(aligned_copy(&array(&[128, 256], 3))),
        sheaf_integration::DType::F64,
    )
    .unwrap();
    let device = jit.runtime().device();
    assert!(tagged.import_to(device).unwrap().is_none());
}

#[test]
fn a_working_set_larger_than_the_cache_keeps_what_fits() {
    // Six 256 KiB arrays that cannot be imported, a cache of four.
    let arrays: Vec<HostTensor> = (0..6)
        .map(|i| HostTensor::from(unaligned(&[256, 256], i)))
        .collect();
    let jit = jit(|uploads| uploads.bytes = 4 * 256 * 256 * 4);
    assert_eq!(jit.upload_stats().max_bytes, 4 * 256 * 256 * 4);
    for _ in 0..2 {
        for a in &arrays {
            jit.upload(a).unwrap();
        }
    }
    let warm = jit.upload_stats();
    for _ in 0..3 {
        for a in &arrays {
            jit.upload(a).unwrap();
        }
    }
    let stats = jit.upload_stats();
    // Strict LRU would evict every array just before its next use (0 hits);
    // the cache keeps four of the six instead.
    assert_eq!(stats.hits - warm.hits, 3 * 4, "{stats:?}");
    assert_eq!(stats.entries, 4);
    assert!(stats.bytes <= stats.max_bytes);
    assert_eq!(stats.evictions, 0, "{stats:?}");
    // Arrays that are gone are released at the next miss (they were kept
    // until evicted for room before).
    drop(arrays);
    let fresh: Vec<HostTensor> = (10..12)
        .map(|i| HostTensor::from(unaligned(&[256, 256], i)))
        .collect();
    for _ in 0..2 {
        for a in &fresh {
            jit.upload(a).unwrap();
        }
    }
    let after = jit.upload_stats();
    assert_eq!((after.released, after.evictions), (4, 0), "{after:?}");
    assert_eq!(after.entries, 2);
}

#[test]
fn the_default_bound_is_sized_to_the_device() {
    let jit = jit(|_| {});
    let stats = jit.upload_stats();
    let total_kib: usize = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert_eq!(stats.max_bytes, total_kib * 1024 / 4);
}

#[test]
fn a_result_read_back_and_passed_again_is_imported() {
    // x: f32[64,256] is 64 KiB: the result is too, and so is the next x.
    let w = Value::from(array(&[256, 256], 1));
    let b = Value::from(array(&[256], 2));
    let importing = jit(|_| {});
    let copying = jit(|uploads| uploads.import = false);
    let mut x = Value::from(array(&[64, 256], 3));
    let mut x_copied = x.clone();
    for _ in 0..3 {
        let y = run(&importing, &[x.clone(), w.clone(), b.clone()]);
        let y_copied = run(&copying, &[x_copied.clone(), w.clone(), b.clone()]);
        assert_eq!(y, y_copied);
        // Sheaf reads results back as host arrays: those are aligned.
        let host = HostTensor::F32(Arc::new(y));
        assert_eq!(
            host.as_f32().unwrap().as_ptr().addr() % IMPORT_ALIGNMENT,
            0,
            "a read-back starts on a 64-byte boundary"
        );
        x = Value::from(host);
        x_copied = Value::from(y_copied);
    }
    let stats = importing.upload_stats();
    // The first x was the allocator's (copied); the two read back imported.
    assert!(stats.imports >= 2, "{stats:?}");
    assert_eq!(stats.bytes_imported % (64 * 256 * 4) as u64, 0);
}

#[test]
fn reading_a_device_tensor_as_f32_copies_once() {
    use sheaf_integration::DeviceTensorExt;
    let jit = jit(|_| {});
    let x = jit.upload(&HostTensor::from(array(&[64, 256], 5))).unwrap();
    let back = x.to_f32().unwrap();
    assert_eq!(*back, array(&[64, 256], 5));
    // The read-back array itself, still on its 64-byte boundary (a second
    // copy would be wherever the allocator put it).
    assert_eq!(back.as_ptr().addr() % IMPORT_ALIGNMENT, 0);
}

/// This process's resident memory, from `/proc/self/statm`.
fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: f64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096.0 / f64::from(1 << 20)
}

#[test]
#[cfg_attr(not(target_os = "linux"), ignore = "reads /proc/self/statm")]
fn the_copy_of_an_array_that_is_gone_is_released_at_the_next_miss() {
    // A 128 MiB weight that cannot be imported, passed twice (so cached)
    // and dropped: its device copy stayed until the cache filled (a
    // quarter of RAM), 128 MiB of host memory on a CPU device.
    let jit = JitRuntime::new(
        JitConfig::builder()
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .device(|device| device.parallel_workers = None)
            .build()
            .unwrap(),
    )
    .unwrap();
    const MIB: usize = 128;
    let before = rss_mib();
    let w = Value::from(unaligned(&[4096, 8192], 1));
    let b = Value::from(array(&[8192], 2));
    for call in 0..2 {
        let x = Value::from(array(&[1, 4096], 10 + call));
        run(&jit, &[x, w.clone(), b.clone()]);
    }
    let cached = jit.upload_stats();
    assert!(cached.bytes >= MIB << 20, "W is cached: {cached:?}");
    drop(w);
    // Another call's upload misses: the copy of W goes with it.
    let sigmoid = reference::sigmoid();
    let x = [Value::from(array(&[8], 3))];
    assert!(matches!(
        jit.dispatch(&sigmoid, &x, &[]).unwrap(),
        Dispatched::Compiled(_)
    ));
    // The copy's memory went back to the buffer pool, which keeps freed
    // blocks for the next buffers of their size: given back, it is gone.
    iree_safe::BufferPool::global().trim();
    let after = rss_mib();
    println!("RSS {before:.0} MiB before the array, {after:.0} MiB after it is gone");
    // Generous: the array and its copy are 256 MiB; the compiled modules
    // and the allocator's caches are a few.
    assert!(
        after < before + (MIB / 2) as f64,
        "RSS {before:.0} MiB before the array, {after:.0} MiB after it is gone"
    );
    let stats = jit.upload_stats();
    assert!(stats.released >= 1, "{stats:?}");
    assert!(stats.bytes < 1 << 20, "{stats:?}");
}
