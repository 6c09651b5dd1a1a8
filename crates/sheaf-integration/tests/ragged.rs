//! The ragged-batch workload on the real runtime and compiler, alone in its
//! process (its memory is measured): `mlp_layer` with a batch size drawn
//! uniformly from 1..=128 for 2,000 calls (fixed seed) compiles exactly two
//! variants (the first size, then any size from the second), runs at least
//! 99% of its calls compiled, matches the interpreter, and its memory stays
//! flat.

mod support;

use sheaf_integration::reference;
use sheaf_integration::{
    lowering::{ArgSpec, Signature},
    DType, Value,
};
use support::{array, assert_close, jit};
use test_support::proc_status::rss_bytes;

#[test]
fn a_ragged_batch_runs_compiled_on_two_variants_with_flat_memory() {
    let jit = jit();
    let mlp = reference::mlp_layer();
    let (w, b) = (
        Value::from(array(&[256, 256], 1)),
        Value::from(array(&[256], 2)),
    );
    let mut compiled = 0;
    let mut rss_at_100 = 0;
    let calls = reference::ragged_batch_sizes(2000, 128);
    for (i, &batch) in calls.iter().enumerate() {
        let args = [
            Value::from(array(&[batch, 256], i as u32)),
            w.clone(),
            b.clone(),
        ];
        let expected = reference::interpret_mlp_layer(&args).unwrap();
        let result = jit
            .call(&mlp, &args, &[], |args, _, _| {
                reference::interpret_mlp_layer(args)
            })
            .unwrap();
        compiled += usize::from(result.provenance.is_compiled());
        assert_close(
            &result.outputs[0],
            &expected[0],
            &format!("call {i}, batch {batch}"),
        );
        if i == 100 {
            rss_at_100 = rss_bytes();
        }
    }
    let growth = rss_bytes().saturating_sub(rss_at_100);
    let stats = jit.stats();
    let f = stats.function(mlp.id()).unwrap();
    assert_eq!(f.counters.compiles, 2, "{stats}");
    assert!(
        compiled * 100 >= calls.len() * 99,
        "{compiled} of {} calls compiled",
        calls.len()
    );
    assert!(growth <= 2 << 20, "RSS grew {growth} bytes after call 100");
    let any_batch = Signature::builder()
        .arg(DType::F32, &[ArgSpec::DYNAMIC, 256])
        .arg(DType::F32, &[256, 256])
        .arg(DType::F32, &[256])
        .build();
    assert_eq!(
        f.last_generalization.as_ref().map(|g| g.signature()),
        Some(&any_batch),
        "{stats}"
    );
    println!(
        "{compiled} of {} calls compiled, {} compiles, RSS {:+} KiB after call 100\n{stats}",
        calls.len(),
        f.counters.compiles,
        growth / 1024
    );
}
