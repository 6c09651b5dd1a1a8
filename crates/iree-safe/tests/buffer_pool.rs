//! `BufferPool`: a CPU device's buffers come from the process's pool, which
//! keeps freed blocks for the next buffers of their size, on the real
//! runtime and, under miri, on the mock (whose local devices take their
//! buffers' bytes from the host allocator they were created with, as
//! IREE's heap allocator does). One test: the pool is the process's.

use iree_safe::{BufferPool, Runtime, Tensor, DEFAULT_BUFFER_POOL_CAPACITY, POOLED_BLOCK_MIN};
use test_support::iree::{LeakCheck, DRIVER};

#[test]
fn freed_buffers_serve_the_next_tensors_of_their_size_until_the_pool_is_off() {
    let _check = LeakCheck::start();
    let pool = BufferPool::global();
    pool.set_capacity(DEFAULT_BUFFER_POOL_CAPACITY);
    let runtime = Runtime::new(DRIVER).unwrap();
    let elements = POOLED_BLOCK_MIN / std::mem::size_of::<f32>();
    let tensor = |value: f32| {
        Tensor::from_slice(runtime.device(), &[elements], &vec![value; elements]).unwrap()
    };

    drop(tensor(1.0));
    let kept = pool.statistics();
    assert!(
        kept.kept_blocks >= 1 && kept.kept_bytes >= POOLED_BLOCK_MIN as u64,
        "{kept:?}"
    );

    // The next tensor of the size takes the kept block, and holds its own
    // data, not the last tensor's.
    let second = tensor(2.0);
    let reused = pool.statistics();
    assert!(reused.hits > kept.hits, "{kept:?} then {reused:?}");
    assert!(reused.reused_bytes >= kept.reused_bytes + POOLED_BLOCK_MIN as u64);
    assert!(reused.kept_bytes < kept.kept_bytes);
    let values = second.to_vec::<f32>().unwrap();
    assert!(values.iter().all(|&v| v == 2.0));
    drop(second);

    // Off: what it kept is released, and frees are not kept.
    pool.set_capacity(0);
    assert_eq!(pool.statistics().kept_bytes, 0);
    drop(tensor(3.0));
    assert_eq!(pool.statistics().kept_blocks, 0);

    pool.set_capacity(DEFAULT_BUFFER_POOL_CAPACITY);
    drop(tensor(4.0));
    assert!(pool.trim() >= POOLED_BLOCK_MIN as u64);
    assert_eq!(pool.statistics().kept_bytes, 0);
}
