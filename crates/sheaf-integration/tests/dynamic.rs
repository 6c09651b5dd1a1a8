//! Dynamic dims on the real runtime and compiler: the reference functions'
//! shape-polymorphic code is correct for every size (1 included), a size of
//! 0 is a clear error or a correct empty result, sizes that do not fit
//! together are an error rather than a crash, and a lowering that refuses
//! dynamic dims leaves its function static.

mod support;

use std::time::Duration;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{
    artifacts::Precompile, lowering::Lowered, mlir, settings::DiskCacheFolder, stats::Origin,
    CallResult, ErrorChain, JitConfig, JitError, JitFunction, JitRuntime, Provenance, Value,
};
use support::{array, assert_close, jit};

fn mlp_call(jit: &JitRuntime, x: ArrayD<f32>, w: &Value, b: &Value) -> Result<CallResult, String> {
    let args = [Value::from(x), w.clone(), b.clone()];
    jit.call(&reference::mlp_layer(), &args, &[], |args, _, _| {
        reference::interpret_mlp_layer(args)
    })
    .map_err(|e| ErrorChain(&e).to_string())
}

#[test]
fn every_batch_size_runs_the_dynamic_variant_correctly() {
    let jit = jit();
    let (w, b) = (Value::from(array(&[8, 4], 1)), Value::from(array(&[4], 2)));
    for (i, batch) in [5, 3, 1, 2, 64, 1].into_iter().enumerate() {
        let x = array(&[batch, 8], 10 + i as u32);
        let expected =
            reference::interpret_mlp_layer(&[x.clone().into(), w.clone(), b.clone()]).unwrap();
        let result = mlp_call(&jit, x, &w, &b).unwrap();
        assert!(
            result.provenance.is_compiled(),
            "batch {batch}: {:?}",
            result.provenance
        );
        assert_close(&result.outputs[0], &expected[0], &format!("batch {batch}"));
    }
    let stats = jit.stats();
    assert_eq!(stats.total.compiles, 2, "5, then any from 3 on: {stats}");
    assert_eq!(stats.total.dynamic_hits, 4, "{stats}");
    // Static code for one size, next to the dynamic variant: it comes first.
    let x = Value::from(array(&[1, 8], 7));
    let args = [x, w.clone(), b.clone()];
    let summary = jit
        .precompile(&[Precompile::new(&reference::mlp_layer(), &args)])
        .unwrap();
    assert_eq!(summary.cached, 1, "not cached exactly yet");
    let result = mlp_call(&jit, array(&[1, 8], 7), &w, &b).unwrap();
    assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
    assert_eq!(
        jit.stats().total.dynamic_hits,
        4,
        "the exact entry served it"
    );
}

#[test]
fn a_hot_batch_size_gets_static_code_that_agrees_with_the_dynamic_variant() {
    // Background mode (the default): misses run in the interpreter while
    // they compile; a hot size's static variant compiles beside the dynamic
    // one while the dynamic one serves it.
    let config = JitConfig::builder().disk(|disk| disk.folder = DiskCacheFolder::Disabled);
    let jit = JitRuntime::new(config.build().unwrap()).unwrap();
    let settle = || assert!(jit.wait_for_compiles(Duration::from_secs(300)));
    let (w, b) = (Value::from(array(&[8, 4], 1)), Value::from(array(&[4], 2)));
    for (i, batch) in [5, 3, 7].into_iter().enumerate() {
        mlp_call(&jit, array(&[batch, 8], 20 + i as u32), &w, &b).unwrap();
        settle();
    }
    assert_eq!(jit.stats().total.generalizations, 1, "{}", jit.stats());
    let x = array(&[16, 8], 30);
    let expected =
        reference::interpret_mlp_layer(&[x.clone().into(), w.clone(), b.clone()]).unwrap();
    let mut dynamic_calls = 0;
    let from_the_dynamic_variant = loop {
        let before = jit.stats().total.dynamic_hits;
        let result = mlp_call(&jit, x.clone(), &w, &b).unwrap();
        assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
        assert_eq!(jit.stats().total.dynamic_hits, before + 1, "served dynamic");
        assert_close(&result.outputs[0], &expected[0], "dynamic, batch 16");
        dynamic_calls += 1;
        if jit.stats().total.specializations == 1 {
            break result.outputs[0].clone();
        }
        assert!(dynamic_calls < 64, "batch 16 is hot by now");
    };
    settle();
    let dynamic_hits = jit.stats().total.dynamic_hits;
    for seed in [30, 31] {
        let x = array(&[16, 8], seed);
        let expected =
            reference::interpret_mlp_layer(&[x.clone().into(), w.clone(), b.clone()]).unwrap();
        let result = mlp_call(&jit, x, &w, &b).unwrap();
        assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
        assert_close(&result.outputs[0], &expected[0], "static, batch 16");
        if seed == 30 {
            assert_close(
                &result.outputs[0],
                &from_the_dynamic_variant,
                "static and dynamic code agree",
            );
        }
    }
    let stats = jit.stats();
    assert_eq!(
        stats.total.dynamic_hits, dynamic_hits,
        "the static variant served: {stats}"
    );
    assert_eq!(stats.total.compiles, 3, "5, any, then 16: {stats}");
    // Another size still runs the dynamic variant, correctly.
    let result = mlp_call(&jit, array(&[17, 8], 40), &w, &b).unwrap();
    assert_eq!(result.provenance, Provenance::Compiled(Origin::Hit));
    assert_eq!(jit.stats().total.dynamic_hits, dynamic_hits + 1);
}

#[test]
fn a_batch_of_zero_is_an_empty_result_or_a_clear_error() {
    let jit = jit();
    let (w, b) = (Value::from(array(&[8, 4], 1)), Value::from(array(&[4], 2)));
    for batch in [2, 3] {
        mlp_call(&jit, array(&[batch, 8], 3), &w, &b).unwrap();
    }
    match mlp_call(&jit, ArrayD::zeros(IxDyn(&[0, 8])), &w, &b) {
        Ok(result) => {
            let y = result.outputs[0].to_host().unwrap();
            assert_eq!(y.shape(), [0, 4], "{:?}", result.provenance);
            println!("batch 0: an empty result ({:?})", result.provenance);
        }
        Err(message) => {
            assert!(message.contains("mlp_layer"), "{message}");
            println!("batch 0: {message}");
        }
    }
    // The runtime is unharmed.
    let after = mlp_call(&jit, array(&[4, 8], 4), &w, &b).unwrap();
    assert_eq!(after.provenance, Provenance::Compiled(Origin::Hit));
    // A first call with batch 0 compiles (or refuses) a static variant.
    let fresh = support::jit();
    let result = mlp_call(&fresh, ArrayD::zeros(IxDyn(&[0, 8])), &w, &b).unwrap();
    assert_eq!(result.outputs[0].to_host().unwrap().shape(), [0, 4]);
    println!("batch 0 first: {:?}", result.provenance);
}

#[test]
fn sizes_that_do_not_fit_together_are_an_error_not_a_crash() {
    let jit = jit();
    // K takes two values, so x's dim 1 and W's dim 0 become dynamic too.
    for (n, k) in [(2, 8), (3, 6), (4, 5)] {
        let (w, b) = (Value::from(array(&[k, 4], 1)), Value::from(array(&[4], 2)));
        let result = mlp_call(&jit, array(&[n, k], 3), &w, &b).unwrap();
        assert!(result.provenance.is_compiled());
    }
    let any_k = jit.stats().functions[0]
        .last_generalization
        .clone()
        .unwrap();
    assert_eq!(
        any_k.signature().to_string(),
        "(f32[?,?], f32[?,4], f32[4])"
    );
    let (w, b) = (Value::from(array(&[7, 4], 1)), Value::from(array(&[4], 2)));
    let x = Value::from(array(&[2, 5], 3));
    let error = jit
        .dispatch(&reference::mlp_layer(), &[x, w, b], &[])
        .expect_err("K of x is 5, K of W is 7");
    assert!(matches!(error, JitError::Runtime(_)), "{error:?}");
    let message = ErrorChain(&error).to_string();
    assert!(
        message.contains("mlp_layer needs f32 x[N,K], W[K,M], b[M]"),
        "{message}"
    );
}

#[test]
fn sigmoid_and_softmax_serve_every_size_of_a_varying_dim() {
    let jit = jit();
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let t = [reference::temperature(0.7)];
    for (i, rows) in [3, 9, 1, 17, 2].into_iter().enumerate() {
        let x = [Value::from(array(&[rows, 6, 5], 20 + i as u32))];
        let y = jit
            .call(&sigmoid, &x, &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        assert_close(
            &y.outputs[0],
            &reference::interpret_sigmoid(&x).unwrap()[0],
            "sigmoid",
        );
        let y = jit
            .call(&softmax, &x, &t, |args, _, _| {
                reference::interpret_softmax(args, 0.7)
            })
            .unwrap();
        let expected = reference::interpret_softmax(&x, 0.7).unwrap();
        assert_close(&y.outputs[0], &expected[0], "softmax");
        assert!(y.provenance.is_compiled(), "{:?}", y.provenance);
    }
    let stats = jit.stats();
    assert_eq!(
        stats.total.compiles, 4,
        "one size, then any, per function: {stats}"
    );
    assert_eq!(stats.total.generalizations, 2, "{stats}");
}

#[test]
fn a_lowering_that_refuses_dynamic_dims_leaves_its_function_static() {
    let jit = jit();
    let static_only: JitFunction = JitFunction::new("neg", "(defn neg [x] (- x))", |ctx| {
        if ctx.has_dynamic_dims() {
            return Err("neg is lowered for static shapes only".into());
        }
        let [x] = ctx.args() else {
            return Err("neg takes one tensor".into());
        };
        let ty = mlir::arg_type(x)?;
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> {ty} {{
  %y = stablehlo.negate %x : {ty}
  return %y : {ty}
}}",
            ctx.entry_symbol()
        )))
    })
    .with_dynamic_dims();
    let negate = |args: &[Value]| -> Result<Vec<Value>, ReferenceError> {
        let x = args[0].to_host()?;
        Ok(vec![Value::from(x.as_f32().unwrap().mapv(|v| -v))])
    };
    let mut provenance = Vec::new();
    for rows in [1, 2, 3, 4] {
        let x = [Value::from(array(&[rows, 3], rows as u32))];
        let y = jit
            .call(&static_only, &x, &[], |args, _, _| negate(args))
            .unwrap();
        assert_close(&y.outputs[0], &negate(&x).unwrap()[0], "neg");
        provenance.push(y.provenance.is_compiled());
    }
    assert_eq!(
        provenance,
        [true, false, true, true],
        "the refused one interprets"
    );
    let stats = jit.stats();
    assert_eq!(
        stats.total.compiles, 3,
        "1, ? refused, then 3 and 4 static: {stats}"
    );
    assert_eq!(
        (stats.total.refusals, stats.total.failed_compiles),
        (1, 0),
        "{stats}"
    );
}
