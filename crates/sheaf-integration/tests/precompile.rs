//! Batched ahead-of-time compiles on the real runtime and compiler: one
//! module serves every variant of the batch, and is unloaded with the last
//! of them.

mod support;

use sheaf_integration::reference;
use sheaf_integration::{
    artifacts::Precompile, lowering::VariantError, settings::DiskCacheFolder, stats::Origin,
    ErrorChain, JitError, JitRuntime, Provenance, Value,
};
use support::{array, assert_close};

fn shapes(range: std::ops::RangeInclusive<usize>) -> Vec<[Value; 1]> {
    range
        .map(|n| [Value::from(array(&[n, 16], n as u32))])
        .collect()
}

#[test]
fn a_batch_of_eight_serves_hits_and_unloads_after_the_last_is_evicted() {
    let config = support::blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .cache(|cache| cache.function_capacity = 8)
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let sigmoid = reference::sigmoid();
    let first = shapes(1..=8);
    let calls: Vec<_> = first.iter().map(|x| Precompile::new(&sigmoid, x)).collect();
    let summary = jit.precompile(&calls).unwrap();
    assert_eq!(
        (summary.compiled, summary.cached, summary.skipped),
        (8, 8, 0)
    );
    assert_eq!(jit.stats().total.compiles, 8);
    let again = jit.precompile(&calls[..2]).unwrap();
    assert_eq!((again.compiled, again.skipped), (0, 2), "cached already");

    let mut module = None;
    for x in &first {
        let result = jit
            .call(&sigmoid, x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
        let expected = reference::interpret_sigmoid(x).unwrap();
        assert_close(&result.outputs[0], &expected[0], "a precompiled variant");
        let this = result.module().unwrap();
        let shared = module.get_or_insert_with(|| this.clone());
        assert!(shared.same_module(this), "one module for the batch");
    }
    let module = module.unwrap().downgrade();

    // A second batch of eight replaces the first one by one: the first
    // module stays loaded while any of its variants is cached.
    let second = shapes(9..=16);
    let calls: Vec<_> = second
        .iter()
        .map(|x| Precompile::new(&sigmoid, x))
        .collect();
    jit.precompile(&calls[..7]).unwrap();
    assert!(module.is_loaded(), "one variant of the first batch is left");
    jit.precompile(&calls[7..]).unwrap();
    assert!(!module.is_loaded(), "the last variant went, and the module");
    assert_eq!(jit.stats().total.live_entries, 8);
}

#[test]
fn a_lowering_error_fails_the_batch_and_caches_nothing() {
    let jit = support::jit();
    let sigmoid = reference::sigmoid();
    let good = shapes(1..=2);
    let bad = [Value::from(ndarray::ArrayD::<i32>::zeros(ndarray::IxDyn(
        &[2],
    )))];
    let mut calls: Vec<_> = good.iter().map(|x| Precompile::new(&sigmoid, x)).collect();
    calls.push(Precompile::new(&sigmoid, &bad));
    let error = jit.precompile(&calls).unwrap_err();
    assert!(
        matches!(error, JitError::Precompile(VariantError::Lowering { .. })),
        "{error:?}"
    );
    let message = ErrorChain(&error).to_string();
    assert!(message.contains("cannot lower `sigmoid`"), "{message}");
    assert!(
        message.contains("sigmoid needs a float tensor, got i32[2]"),
        "{message}"
    );
    assert_eq!(jit.stats().total.live_entries, 0);
}
