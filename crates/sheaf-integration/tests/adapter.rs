//! What a port of Sheaf needs of the runtime, on the real runtime and
//! compiler: lowering per call on the caller's thread, a compile mode per
//! function, background compiles that wait when interpreting costs more,
//! where each artifact came from, and the small conveniences of a thin
//! adapter.

mod support;

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use sheaf_integration::{
    artifacts::ArtifactSource,
    lowering::{Container, LayoutVisitor, Leaf, Lowered, LoweringContext, LoweringError},
    mlir, reference,
    settings::CompileMode,
    stats::{Origin, Phase},
    CapturedScalar, DType, DeviceTensorExt, Dispatched, ErrorChain, FallbackReason, JitConfig,
    JitError, JitFunction, JitRuntime, Provenance, ScalarValue, Value,
};
use support::{array, assert_close};

fn runtime(mode: CompileMode) -> JitRuntime {
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = mode)
        .disk(|disk| disk.folder = sheaf_integration::settings::DiskCacheFolder::Disabled);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// A doubling whose lowering reads the caller's non-`Send` state: it names
/// the op through an `Rc<str>` and counts its runs in a `Cell`.
fn lower_double(
    op: &Rc<str>,
    lowerings: &Cell<usize>,
    ctx: &LoweringContext<'_>,
) -> Result<Lowered, LoweringError> {
    lowerings.set(lowerings.get() + 1);
    let ty = mlir::arg_type(&ctx.args()[0])?;
    Ok(Lowered::new(format!(
        "func.func @{}(%x: {ty}) -> {ty} {{\n  %y = stablehlo.{op} %x, %x : {ty}\n  return %y : {ty}\n}}",
        ctx.entry_symbol()
    )))
}

#[test]
fn a_lowering_that_is_not_send_runs_on_the_callers_thread_and_only_on_misses() {
    let jit = runtime(CompileMode::Background);
    let double: JitFunction = JitFunction::lowered_per_call("double", 11);
    let (op, lowerings): (Rc<str>, _) = (Rc::from("add"), Cell::new(0));
    let x = [Value::from(array(&[3], 1))];
    let call = || {
        jit.dispatch_with(&double, &x, &[], |ctx| lower_double(&op, &lowerings, ctx))
            .unwrap()
    };
    let Dispatched::Interpret(FallbackReason::CompileQueued) = call() else {
        panic!("a background miss is interpreted")
    };
    assert_eq!(lowerings.get(), 1, "lowered at once, on this thread");
    assert!(jit.wait_for_compiles(Duration::from_secs(120)));
    for _ in 0..3 {
        let Dispatched::Compiled(compiled) = call() else {
            panic!("compiled once the compile landed")
        };
        let expected = Value::from(array(&[3], 1).mapv(|v| v * 2.0));
        assert_close(&compiled.outputs[0], &expected, "double");
    }
    assert_eq!(lowerings.get(), 1, "hits never lower");
    assert_eq!(jit.profile().phase(Phase::Lower).count, 1);

    let error = jit.dispatch(&double, &x, &[]).unwrap_err();
    assert!(
        matches!(&error, JitError::Unsupported(m) if m.contains("dispatch_with")),
        "{error}"
    );
}

#[test]
fn a_refused_lowering_is_remembered_and_counted_apart_from_compiles() {
    let jit = runtime(CompileMode::Background);
    let picky: JitFunction = JitFunction::lowered_per_call("picky", 12);
    let x = [Value::from(array(&[2], 1))];
    for _ in 0..3 {
        let outcome = jit
            .dispatch_with(&picky, &x, &[], |_| Err("not this one".into()))
            .unwrap();
        let Dispatched::Interpret(FallbackReason::CompileFailed(failure)) = outcome else {
            panic!("a refusal is a failure of the signature: {outcome:?}")
        };
        let chain = sheaf_integration::ErrorChain(&*failure).to_string();
        assert!(chain.contains("not this one"), "{chain}");
    }
    let stats = jit.stats().total;
    assert_eq!(
        (stats.refusals, stats.compiles, stats.failed_compiles),
        (1, 0, 0)
    );
}

#[test]
fn a_function_can_wait_for_its_compile_in_a_background_runtime() {
    let jit = runtime(CompileMode::Background);
    assert_eq!(jit.compile_mode(), CompileMode::Background);
    let sigmoid = reference::sigmoid().with_compile_mode(CompileMode::Blocking);
    assert_eq!(sigmoid.compile_mode(), Some(CompileMode::Blocking));
    let x = [Value::from(array(&[2, 5], 3))];
    let Dispatched::Compiled(compiled) = jit.dispatch(&sigmoid, &x, &[]).unwrap() else {
        panic!("a blocking function runs compiled from its first call")
    };
    assert!(matches!(
        compiled.provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    assert_eq!(compiled.source(), ArtifactSource::Compiler);
}

#[test]
fn background_waits_for_the_compile_when_interpreting_costs_more() {
    let jit = runtime(CompileMode::Background);
    let (slow, fast) = (reference::sigmoid(), reference::softmax());
    // The caller measured its interpreter: an hour per call of `slow`, a
    // nanosecond per call of `fast`.
    jit.report_interpreted(&slow, Duration::from_secs(3600));
    jit.report_interpreted(&fast, Duration::from_nanos(1));
    let x = [Value::from(array(&[4, 8], 5))];
    let Dispatched::Compiled(compiled) = jit.dispatch(&slow, &x, &[]).unwrap() else {
        panic!("waiting for the compile beats an hour in the interpreter")
    };
    let expected = reference::interpret_sigmoid(&x).unwrap();
    assert_close(&compiled.outputs[0], &expected[0], "sigmoid");
    let t = [reference::temperature(1.0)];
    let outcome = jit.dispatch(&fast, &x, &t).unwrap();
    assert!(
        matches!(
            outcome,
            Dispatched::Interpret(FallbackReason::CompileQueued)
        ),
        "a fast interpreter runs while the compile is queued: {outcome:?}"
    );
}

#[test]
fn call_measures_the_interpreter_and_hands_it_the_captured_scalars() {
    let jit = runtime(CompileMode::Background);
    let softmax = reference::softmax();
    let x = [Value::from(array(&[2, 4], 6))];
    let t = [reference::temperature(0.5)];
    let mut seen = Vec::new();
    let result = jit
        .call(&softmax, &x, &t, |args, captured: &[CapturedScalar], _| {
            seen.extend(captured.iter().map(|c| (c.name().to_owned(), c.value())));
            // An interpreter slow enough that the next miss waits instead.
            std::thread::sleep(Duration::from_millis(1500));
            reference::interpret_softmax(args, 0.5)
        })
        .unwrap();
    assert!(matches!(result.provenance, Provenance::Interpreted(_)));
    assert_eq!(seen, [("temperature".to_owned(), ScalarValue::F32(0.5))]);
    assert_eq!(jit.profile().phase(Phase::Interpret).count, 1);
    // A new temperature is a new signature: its miss waits for its compile
    // (the prior compile estimate, 1 s, is shorter than 1.5 s).
    let t = [reference::temperature(0.25)];
    let Dispatched::Compiled(_) = jit.dispatch(&softmax, &x, &t).unwrap() else {
        panic!("a 1.5 s interpreter makes the miss wait for its compile")
    };
}

#[test]
fn device_results_convert_and_read_back_as_a_port_needs() {
    let jit = runtime(CompileMode::Blocking);
    let x = [Value::from(array(&[2, 3], 7))];
    let Dispatched::Compiled(compiled) = jit.dispatch(&reference::sigmoid(), &x, &[]).unwrap()
    else {
        panic!("blocking")
    };
    let (outputs, metadata) = compiled.into_parts();
    assert_eq!(*metadata, ());
    let Some(sheaf_integration::Tensor::Device(tensor)) = outputs[0].as_tensor().cloned() else {
        panic!("compiled code returns device tensors")
    };
    assert_eq!(tensor.dtype().unwrap(), DType::F32);
    assert_eq!(tensor.element_type(), sheaf_integration::ElementType::F32);
    let widened = tensor.to_f32().unwrap();
    let value = Value::from(tensor);
    assert_eq!(value.dtype().unwrap(), DType::F32);
    assert_eq!(value.to_f32().unwrap(), widened);

    // A wider or narrower dtype reads back as f32 too.
    let ints =
        Value::from(ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(&[2]), vec![3i64, -4]).unwrap());
    assert_eq!(ints.dtype().unwrap(), DType::I64);
    assert_eq!(ints.to_f32().unwrap().as_slice().unwrap(), [3.0, -4.0]);
}

#[test]
fn dicts_from_borrowed_keys_share_their_keys_and_flatten_in_key_order() {
    let keys = ["b".to_owned(), "w".to_owned()];
    let dict = |seed| {
        Value::dict(
            keys.iter()
                .map(|k| (k.as_str(), Value::from(array(&[2], seed)))),
        )
    };
    let (first, second) = (dict(1), dict(2));
    let (Value::Dict(a), Value::Dict(b)) = (&first, &second) else {
        panic!("dicts")
    };
    assert!(
        Arc::ptr_eq(&a[0].0, &b[0].0),
        "the key is interned, not allocated again"
    );
    let unsorted = Value::dict([
        ("w", Value::from(array(&[2], 1))),
        ("b", Value::from(array(&[2], 1))),
    ]);
    let signature = |v: &Value| Value::call_signature(std::slice::from_ref(v), &[]).unwrap();
    assert_eq!(
        signature(&first),
        signature(&unsorted),
        "key order, whatever the given order"
    );
    let twice = Value::dict([
        ("b", Value::Scalar(ScalarValue::F32(1.0))),
        ("b", Value::Scalar(ScalarValue::F32(2.0))),
    ]);
    assert!(Value::call_signature(&[twice], &[]).is_err());
    assert_eq!(
        sheaf_integration::lowering::entry_symbol("mlp-layer"),
        reference::mlp_layer().entry_symbol()
    );
}

/// Code generated before the call, as Sheaf's value-and-grad code is: its
/// entry has a fixed name (`@value_and_grad`) and calls a helper; the
/// helper's name is made unique per signature, the entry's is not.
fn value_and_grad(ctx: &LoweringContext<'_>, entry: &str) -> Result<Lowered, LoweringError> {
    let ty = mlir::arg_type(&ctx.args()[0])?;
    let square = ctx.symbol("square");
    Ok(Lowered::new(format!(
        "func.func private @{square}(%x: {ty}) -> {ty} {{
  %y = stablehlo.multiply %x, %x : {ty}
  return %y : {ty}
}}
func.func @value_and_grad(%x: {ty}) -> ({ty}, {ty}) {{
  %value = func.call @{square}(%x) : ({ty}) -> {ty}
  %grad = stablehlo.add %x, %x : {ty}
  return %value, %grad : {ty}, {ty}
}}"
    ))
    .with_entry(entry))
}

#[test]
fn a_lowerings_own_entry_name_is_mapped_to_the_signatures_entry() {
    let jit = runtime(CompileMode::Blocking);
    let vag: JitFunction = JitFunction::lowered_per_call("value-and-grad", 21);
    let lower = |ctx: &LoweringContext<'_>| value_and_grad(ctx, "value_and_grad");
    // Two signatures in one module: each entry renamed to its own symbol.
    let xs: Vec<[Value; 1]> = [3, 4].map(|n| [Value::from(array(&[n], 1))]).into();
    let calls: Vec<_> = xs
        .iter()
        .map(|x| sheaf_integration::artifacts::Precompile::new(&vag, x).lowered_by(&lower))
        .collect();
    let summary = jit.precompile(&calls).unwrap();
    assert_eq!((summary.compiled, summary.cached), (2, 2));
    for x in &xs {
        let Dispatched::Compiled(compiled) = jit.dispatch_with(&vag, x, &[], lower).unwrap() else {
            panic!("precompiled")
        };
        assert_eq!(compiled.provenance, Provenance::Compiled(Origin::Hit));
        let host = x[0].to_f32().unwrap();
        let [value, grad] = &compiled.outputs[..] else {
            panic!("two results")
        };
        assert_eq!(*value.to_f32().unwrap(), host.mapv(|v| v * v));
        assert_eq!(*grad.to_f32().unwrap(), host.mapv(|v| v + v));
    }
    // An entry the MLIR does not define is the signature's lowering error,
    // which says what is wrong; nothing compiles.
    let x = [Value::from(array(&[5], 1))];
    let compiles = jit.stats().total.compiles;
    let outcome = jit
        .dispatch_with(&vag, &x, &[], |ctx| value_and_grad(ctx, "vag"))
        .unwrap();
    let Dispatched::Interpret(why) = outcome else {
        panic!("a missing entry cannot compile")
    };
    let error = ErrorChain(sheaf_integration::lowering::VariantError::of_fallback(&why).unwrap())
        .to_string();
    assert!(
        error.contains("names `@vag` as its entry function")
            && error.contains("defines no `func.func @vag`"),
        "{error}"
    );
    assert_eq!(jit.stats().total.compiles, compiles);
}

#[test]
#[cfg(feature = "disk-cache")]
fn a_disk_cache_keeps_the_compilers_version_for_the_next_process() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let config = JitConfig::builder()
        .compile(|compile| {
            compile.mode = CompileMode::Blocking;
            compile.compiler = sheaf_integration::compiler::CompilerPreference::Subprocess;
        })
        .disk(|disk| {
            disk.folder = sheaf_integration::settings::DiskCacheFolder::Dir(cache.clone())
        });
    let jit = JitRuntime::new(config.build().unwrap()).unwrap();
    assert!(matches!(
        jit.dispatch(&reference::sigmoid(), &[Value::from(array(&[2], 1))], &[])
            .unwrap(),
        Dispatched::Compiled(_)
    ));
    let compiler = jit
        .compiler()
        .expect("compiled")
        .compiler
        .version()
        .build()
        .to_owned();
    let memos: Vec<String> = std::fs::read_dir(cache.join("compiler-versions"))
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    assert_eq!(memos.len(), 1, "{memos:?}");
    assert!(memos[0].ends_with(&format!("\n{compiler}\n")), "{memos:?}");
}

#[test]
fn bad_calls_do_not_widen_a_function() {
    let jit = runtime(CompileMode::Blocking);
    let mlp = reference::mlp_layer();
    let call = |batch: usize, k: usize| {
        let args = [
            Value::from(array(&[batch, 6], 1)),
            Value::from(array(&[k, 4], 2)),
            Value::from(array(&[4], 3)),
        ];
        jit.dispatch(&mlp, &args, &[]).unwrap()
    };
    // Batch 1 compiles static, batch 2 the dynamic batch: 2 compiles.
    for batch in [1, 2] {
        assert!(matches!(call(batch, 6), Dispatched::Compiled(_)));
    }
    assert_eq!(jit.stats().total.compiles, 2);
    let before = jit.stats().total;
    for k in [5, 7, 9] {
        assert!(
            matches!(
                call(3, k),
                Dispatched::Interpret(FallbackReason::CompileFailed(_))
            ),
            "K = {k} does not fit x's 6 columns"
        );
    }
    let after = jit.stats().total;
    assert_eq!(after.compiles, before.compiles, "0 extra compiles");
    assert_eq!(
        after.live_entries, before.live_entries,
        "0 extra live modules"
    );
    assert_eq!(after.refusals, before.refusals + 3);
    assert_eq!(
        after.generalizations, before.generalizations,
        "K never varied"
    );
    // The next good call runs the dynamic batch: K stays 6.
    let Dispatched::Compiled(compiled) = call(3, 6) else {
        panic!("compiled")
    };
    assert_eq!(compiled.provenance, Provenance::Compiled(Origin::Hit));
    assert_eq!(jit.stats().total.compiles, 2);
    let function = &jit.stats().functions[0];
    let generalized = function
        .last_generalization
        .as_ref()
        .expect("the batch varied");
    assert_eq!(generalized.dims(), [(0, 0)], "{generalized}");
}

#[test]
fn a_ragged_batch_compiles_two_variants_and_a_bad_call_counts_for_nothing() {
    let jit = runtime(CompileMode::Blocking);
    let mlp = reference::mlp_layer();
    let lowerings = || jit.profile().phase(Phase::Lower).count;
    let call = |batch: usize, k: usize| {
        let args = [
            Value::from(array(&[batch, 6], 1)),
            Value::from(array(&[k, 4], 2)),
            Value::from(array(&[4], 3)),
        ];
        let outcome = jit.dispatch(&mlp, &args, &[]).unwrap();
        if let Dispatched::Compiled(compiled) = &outcome {
            let expected = reference::interpret_mlp_layer(&args).unwrap();
            assert_close(&compiled.outputs[0], &expected[0], "mlp_layer");
        }
        outcome
    };
    assert!(matches!(call(3, 6), Dispatched::Compiled(_)), "static");
    // A second size, but its K does not fit W: refused as itself (its
    // lowering runs once, for its own signature), it widens nothing.
    assert!(matches!(
        call(5, 7),
        Dispatched::Interpret(FallbackReason::CompileFailed(_))
    ));
    assert_eq!(lowerings(), 2);
    // The next good size widens the batch at once (its own signature is
    // lowered first, then the dynamic one); every later size hits.
    assert!(matches!(call(7, 6), Dispatched::Compiled(_)));
    assert_eq!(lowerings(), 4);
    for batch in [1, 64, 128, 3] {
        let Dispatched::Compiled(compiled) = call(batch, 6) else {
            panic!("batch {batch}")
        };
        assert_eq!(compiled.provenance, Provenance::Compiled(Origin::Hit));
    }
    let stats = jit.stats();
    let f = stats.function(mlp.id()).unwrap();
    assert_eq!(
        (
            f.counters.compiles,
            f.counters.refusals,
            f.counters.generalizations
        ),
        (2, 1, 1),
        "{stats}"
    );
    assert_eq!(
        f.last_generalization
            .as_ref()
            .unwrap()
            .signature()
            .to_string(),
        "(f32[?,6], f32[6,4], f32[4])"
    );
    assert_eq!(lowerings(), 4, "hits lower nothing");
}

#[test]
fn device_memory_is_reported_per_device() {
    // Copies only: an aligned host array would be imported on the CPU,
    // taking no device memory of its own.
    let config = JitConfig::builder()
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .disk(|disk| disk.folder = sheaf_integration::settings::DiskCacheFolder::Disabled)
        .uploads(|uploads| uploads.import = false);
    let jit = JitRuntime::new(config.build().unwrap()).unwrap();
    let before = jit.memory_statistics().unwrap();
    assert_eq!(
        before.len(),
        1,
        "the primary device only (no CPU fallback opened)"
    );
    let tensor = jit.upload(&array(&[256, 256], 1).into()).unwrap();
    let during = jit.memory_statistics().unwrap();
    let grew = during[0].1.device_bytes_in_use - before[0].1.device_bytes_in_use;
    assert!(grew >= 256 * 256 * 4, "{grew} bytes for a 256 KiB tensor");
    assert!(during[0].1.device_bytes_peak >= during[0].1.device_bytes_in_use);
    drop(tensor);
    jit.forget(&reference::sigmoid());
    let _ = sheaf_integration::stats::UploadStats::default;
}

#[test]
fn a_lowering_reads_dict_keys_from_the_layout_without_values() {
    /// The dict keys of a signature's layout, in flattening order.
    #[derive(Default)]
    struct Keys(Vec<String>);
    impl LayoutVisitor for Keys {
        fn open(&mut self, _: Container) {}
        fn key(&mut self, key: &Arc<str>) {
            self.0.push(key.to_string());
        }
        fn leaf(&mut self, _: Leaf) {}
        fn close(&mut self) {}
    }
    // `(+ (:a p) (:b p))`: its parameters' order comes from the layout.
    let add: JitFunction<Vec<String>> = JitFunction::new("add_ab", "(+ (:a p) (:b p))", |ctx| {
        let mut keys = Keys::default();
        ctx.layout().ok_or("a dict argument")?.visit(&mut keys);
        let ty = mlir::arg_type(&ctx.args()[0])?;
        Ok(Lowered::new(format!(
            "func.func @{}(%a: {ty}, %b: {ty}) -> {ty} {{\n  %y = stablehlo.add %a, %b : {ty}\n  return %y : {ty}\n}}",
            ctx.entry_symbol()
        ))
        .with_metadata(keys.0))
    });
    let p = Value::dict([
        ("b", Value::from(array(&[2], 1))),
        ("a", Value::from(array(&[2], 2))),
    ]);
    let signature = Value::call_signature(std::slice::from_ref(&p), &[]).unwrap();
    // Without values: what `module_text` (and a lowering ahead of calls) sees.
    let text = add.module_text(&signature).unwrap();
    assert!(text.contains("stablehlo.add"), "{text}");
    let jit = runtime(CompileMode::Blocking);
    let Dispatched::Compiled(compiled) = jit.dispatch(&add, &[p], &[]).unwrap() else {
        panic!("blocking")
    };
    assert_eq!(
        compiled.metadata(),
        &["a", "b"],
        "key order, whatever the given order"
    );
}
