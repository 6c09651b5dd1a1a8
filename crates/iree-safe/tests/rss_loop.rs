//! 10,000 load → call → drop cycles leave the resident set where the first
//! 100 left it (within 2 MiB): evicting a module really frees it.

#![cfg(not(iree_mock))]

use iree_safe::{Runtime, Tensor};
use test_support::iree::{program, DRIVER};
use test_support::proc_status::rss_bytes;

#[test]
fn ten_thousand_load_call_drop_cycles_keep_rss_flat() {
    let runtime = Runtime::new(DRIVER).unwrap();
    let bytes = program("add");
    let a = Tensor::from_slice(runtime.device(), &[4], &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let cycle = || {
        let module = runtime.load(bytes.vmfb()).unwrap();
        let out = module
            .function("add")
            .unwrap()
            .call(&[a.clone().into(), a.clone().into()])
            .unwrap();
        assert_eq!(
            out[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
            vec![2.0, 4.0, 6.0, 8.0]
        );
    };
    for _ in 0..100 {
        cycle();
    }
    let after_100 = rss_bytes();
    for _ in 100..10_000 {
        cycle();
    }
    let after_10_000 = rss_bytes();
    let growth = after_10_000.saturating_sub(after_100);
    eprintln!(
        "RSS after 100 cycles: {after_100} B, after 10,000: {after_10_000} B, growth {growth} B"
    );
    assert!(
        growth <= 2 << 20,
        "RSS grew by {growth} bytes over 9,900 load/call/drop cycles"
    );
}
