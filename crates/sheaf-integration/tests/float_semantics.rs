//! Results Sheaf can trust: with the default float semantics
//! (`FloatSemantics::Strict`) compiled code gives exactly what the IREE
//! compiler gives with its own default flags for the same target (a 512²
//! matmul included, which the runtime compiles with data tiling, or on
//! AVX-512 with its own tiles, `tuning::AVX512_MATMUL_SPEC`, as it does a
//! matmul whose dims are no multiple of those tiles); the
//! opt-in `Reassociate` stays within a stated tolerance of it, and never
//! shares a variant with the strict code (in memory, on disk or in a
//! bundle).

mod support;

use ndarray::ArrayD;
use sheaf_integration::{
    artifacts::ArtifactSource,
    compiler::CompileOptions,
    lowering::Lowered,
    mlir, reference,
    settings::{DiskCacheFolder, FloatSemantics},
    CapturedScalar, DType, DeviceTensorExt, Dispatched, HostTensor, JitConfig, JitFunction,
    JitRuntime, Value,
};
use support::{array, blocking};

/// `sum(x * x)` over the last axis of an f32 matrix: one long reduction per
/// row, where reassociation changes the order of the additions.
fn row_sum_of_squares() -> JitFunction {
    JitFunction::new("row_sum_of_squares", "(sum (* x x) -1)", |ctx| {
        let [x] = ctx.args() else {
            return Err("one matrix".into());
        };
        let &[rows, _] = x.dims() else {
            return Err("one matrix".into());
        };
        let ty = mlir::arg_type(x)?;
        let out = mlir::tensor_type(DType::F32, &[rows])?;
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> {out} {{
  %sq = stablehlo.multiply %x, %x : {ty}
  %zero = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %sum = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [1] : ({ty}, tensor<f32>) -> {out}
  return %sum : {out}
}}",
            ctx.entry_symbol()
        )))
    })
}

/// One call of each function: the function, its arguments and captured
/// scalars.
struct Case {
    name: &'static str,
    function: JitFunction,
    args: Vec<Value>,
    captured: Vec<CapturedScalar>,
}

fn cases() -> Vec<Case> {
    let case = |name, function, args: Vec<ArrayD<f32>>, captured| Case {
        name,
        function,
        args: args.into_iter().map(Value::from).collect(),
        captured,
    };
    vec![
        case(
            "matmul",
            reference::matmul(),
            vec![array(&[512, 512], 7), array(&[512, 512], 8)],
            vec![],
        ),
        case(
            "matmul, ragged tiles",
            reference::matmul(),
            vec![array(&[333, 700], 9), array(&[700, 1000], 10)],
            vec![],
        ),
        case(
            "matmul, ragged tiles, rows every CPU family's spec reaches",
            reference::matmul(),
            vec![array(&[333, 700], 11), array(&[700, 700], 12)],
            vec![],
        ),
        case(
            "batched matmul, ragged tiles",
            reference::matmul(),
            vec![array(&[6, 100, 300], 13), array(&[6, 300, 200], 14)],
            vec![],
        ),
        case(
            "sigmoid",
            reference::sigmoid(),
            vec![array(&[16, 64], 1)],
            vec![],
        ),
        case(
            "softmax",
            reference::softmax(),
            vec![array(&[32, 1024], 2)],
            vec![reference::temperature(0.5)],
        ),
        case(
            "mlp_layer",
            reference::mlp_layer(),
            vec![
                array(&[16, 256], 3),
                array(&[256, 256], 4),
                array(&[256], 5),
            ],
            vec![],
        ),
        case(
            "row_sum_of_squares",
            row_sum_of_squares(),
            vec![array(&[64, 8192], 6)],
            vec![],
        ),
    ]
}

fn runtime(semantics: FloatSemantics) -> JitRuntime {
    let config = blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| compile.float_semantics = semantics);
    JitRuntime::new(config.build().unwrap()).unwrap()
}

/// The call's f32 results, read back, from the runtime (blocking: compiled).
fn compiled(jit: &JitRuntime, case: &Case) -> Vec<ArrayD<f32>> {
    let function = &case.function;
    let Dispatched::Compiled(compiled) =
        jit.dispatch(function, &case.args, &case.captured).unwrap()
    else {
        panic!("{}: a blocking call runs compiled", case.name)
    };
    compiled.outputs.iter().map(f32_host).collect()
}

fn f32_host(value: &Value) -> ArrayD<f32> {
    match value.to_host().unwrap() {
        HostTensor::F32(array) => (*array).clone(),
        other => panic!("an f32 result, got {other:?}"),
    }
}

/// The call's results from the same MLIR module compiled outside the
/// runtime, by the IREE compiler with its default flags for the runtime's
/// target (`CompileOptions` with nothing but the target and the input
/// type), loaded into the runtime's IREE runtime and called directly.
fn compiler_default(jit: &JitRuntime, case: &Case) -> Vec<ArrayD<f32>> {
    let signature = Value::call_signature(&case.args, &case.captured).unwrap();
    let module = case.function.module_text(&signature).unwrap();
    let mut options = CompileOptions::stablehlo();
    options.target = jit.compile_options().target.clone();
    let compiler = iree_safe::compiler::choose_compiler(Default::default()).unwrap();
    let artifact = compiler.compiler.compile(&module, &options).unwrap();
    let loaded = jit.runtime().load(artifact.vmfb()).unwrap();
    let entry = loaded.function(case.function.entry_symbol()).unwrap();
    let inputs: Vec<iree_safe::VmValue> = case
        .args
        .iter()
        .map(|arg| jit.upload(&arg.to_host().unwrap()).unwrap().into())
        .collect();
    entry
        .call(&inputs)
        .unwrap()
        .into_iter()
        .map(|result| {
            let iree_safe::VmValue::Tensor(tensor) = result else {
                panic!("{}: a tensor result", case.name)
            };
            assert_eq!(tensor.dtype().unwrap(), DType::F32);
            f32_host(&Value::from(tensor))
        })
        .collect()
}

fn bits(arrays: &[ArrayD<f32>]) -> Vec<Vec<u32>> {
    let bits = |a: &ArrayD<f32>| a.iter().map(|v| v.to_bits()).collect();
    arrays.iter().map(bits).collect()
}

#[test]
fn strict_results_are_the_compilers_default_results_bit_for_bit() {
    let jit = runtime(FloatSemantics::Strict);
    assert_eq!(jit.float_semantics(), FloatSemantics::Strict);
    for case in cases() {
        let ours = compiled(&jit, &case);
        let default = compiler_default(&jit, &case);
        assert_eq!(ours.len(), default.len(), "{}", case.name);
        for (a, b) in ours.iter().zip(&default) {
            assert_eq!(a.shape(), b.shape(), "{}", case.name);
        }
        assert!(
            bits(&ours) == bits(&default),
            "{}: the strict runtime's results differ from iree-compile's default output",
            case.name
        );
    }
}

/// The stated tolerance of `Reassociate`: each result within 1e-5 of the
/// strict one, relative to the larger of 1 and the largest magnitude of
/// that result (a norm-wise relative error: a dot product that cancels to
/// near zero is held to its terms' scale, not to its own).
const REASSOCIATED_TOLERANCE: f32 = 1e-5;

#[test]
fn reassociated_results_stay_within_the_stated_tolerance_and_really_differ() {
    let (strict, fast) = (
        runtime(FloatSemantics::Strict),
        runtime(FloatSemantics::Reassociate),
    );
    assert!(fast
        .compile_options()
        .flags()
        .iter()
        .any(|f| f == "--iree-llvmcpu-reassociate-fp-reductions=true"));
    let mut differed = Vec::new();
    for case in cases() {
        let (s, f) = (compiled(&strict, &case), compiled(&fast, &case));
        for (s, f) in s.iter().zip(&f) {
            assert_eq!(s.shape(), f.shape(), "{}", case.name);
            let scale = s.iter().fold(1.0f32, |m, x| m.max(x.abs()));
            for (x, y) in s.iter().zip(f) {
                assert!(
                    (x - y).abs() <= REASSOCIATED_TOLERANCE * scale,
                    "{}: strict {x} vs reassociated {y}",
                    case.name
                );
            }
        }
        if bits(&s) != bits(&f) {
            differed.push(case.name);
        }
    }
    // The flag reaches the compiler: the long reduction adds in another
    // order.
    assert!(
        differed.contains(&"row_sum_of_squares"),
        "reassociation changed nothing: {differed:?}"
    );
}

#[test]
fn a_function_may_choose_its_own_semantics_and_never_shares_a_variant() {
    let jit = runtime(FloatSemantics::Strict);
    let case = cases().pop().unwrap();
    let fast = case
        .function
        .clone()
        .with_float_semantics(FloatSemantics::Reassociate);
    let strict_results = compiled(&jit, &case);
    let fast_case = Case {
        function: fast.clone(),
        ..case
    };
    let fast_results = compiled(&jit, &fast_case);
    assert_ne!(
        bits(&strict_results),
        bits(&fast_results),
        "the function's choice compiled its own variant"
    );
    assert_eq!(jit.stats().total.compiles, 2, "one variant each");
    // The same choice made explicitly by another function value is the
    // same function; the runtime's default is not shared with it.
    let again = fast_case
        .function
        .clone()
        .with_float_semantics(FloatSemantics::Reassociate);
    assert_eq!(again.id(), fast.id());
    let strict_again = Case {
        function: fast_case
            .function
            .with_float_semantics(FloatSemantics::Strict),
        ..fast_case
    };
    assert_eq!(
        bits(&compiled(&jit, &strict_again)),
        bits(&strict_results),
        "an explicit strict choice gives the runtime default's results"
    );
}

#[test]
fn semantics_are_part_of_the_disk_key_and_of_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let with_disk = |semantics: FloatSemantics, bundle: Option<&std::path::Path>| {
        let mut config = blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.clone()))
            .compile(|compile| compile.float_semantics = semantics);
        if let Some(bundle) = bundle {
            config = config.artifact_bundle(bundle);
        }
        JitRuntime::new(config.build().unwrap()).unwrap()
    };
    let case = cases().pop().unwrap();
    let source = |jit: &JitRuntime| {
        let Dispatched::Compiled(compiled) = jit
            .dispatch(&case.function, &case.args, &case.captured)
            .unwrap()
        else {
            panic!("blocking")
        };
        compiled.source()
    };
    let strict = with_disk(FloatSemantics::Strict, None);
    assert_eq!(source(&strict), ArtifactSource::Compiler);
    let bundle = dir.path().join("bundle");
    strict.export_artifacts(&bundle).unwrap();
    drop(strict);
    // The strict entry on disk and in the bundle is not the reassociating
    // runtime's code: it compiles its own...
    let fast = with_disk(FloatSemantics::Reassociate, Some(&bundle));
    assert_eq!(source(&fast), ArtifactSource::Compiler);
    drop(fast);
    // ...and each finds its own on disk, or in the bundle, afterwards.
    let fast = with_disk(FloatSemantics::Reassociate, None);
    assert_eq!(source(&fast), ArtifactSource::DiskCache);
    let strict = with_disk(FloatSemantics::Strict, Some(&bundle));
    assert_eq!(source(&strict), ArtifactSource::Bundle);
}

#[test]
fn the_runtime_setting_comes_from_the_environment_too() {
    let vars = |name: &str| (name == "SHEAF_JIT_FLOAT_SEMANTICS").then(|| "reassociate".into());
    let config = JitConfig::builder()
        .apply_vars(vars)
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(config.compile.float_semantics, FloatSemantics::Reassociate);
    assert_eq!(
        JitConfig::default().compile.float_semantics,
        FloatSemantics::Strict
    );
}

#[test]
fn the_callers_flags_win_over_the_runtimes_and_cannot_contradict_the_target() {
    let flag = "--iree-llvmcpu-reassociate-fp-reductions";
    // A reassociating runtime whose caller asks for the opposite: the
    // caller's flag (later) wins, once, and the code is the strict code.
    let config = blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .compile(|compile| {
            compile.float_semantics = FloatSemantics::Reassociate;
            compile.options.extra_flags.push(format!("{flag}=false"));
        });
    let overridden = JitRuntime::new(config.build().unwrap()).unwrap();
    let flags = overridden.compile_options().flags();
    let given: Vec<&String> = flags.iter().filter(|f| f.starts_with(flag)).collect();
    assert_eq!(given, [&format!("{flag}=false")], "{flags:?}");
    let case = cases().pop().unwrap();
    assert_eq!(
        bits(&compiled(&overridden, &case)),
        bits(&compiled(&runtime(FloatSemantics::Strict), &case)),
        "the caller's flag reached the compiler"
    );
    // A flag that contradicts the target is refused at start, naming both.
    // The other CPU is one the target is not (it is `generic` under qemu).
    let cpu_flag = "--iree-llvmcpu-target-cpu=";
    let target_cpu = flags
        .iter()
        .find_map(|f| f.strip_prefix(cpu_flag))
        .expect("a CPU target names its CPU");
    let other_cpu = if target_cpu == "generic" {
        "cortex-a53"
    } else {
        "generic"
    };
    let contradicting = format!("{cpu_flag}{other_cpu}");
    let config =
        blocking().compile(|compile| compile.options.extra_flags.push(contradicting.clone()));
    let error = JitRuntime::new(config.build().unwrap())
        .unwrap_err()
        .to_string();
    for part in [
        "compile.options.extra_flags",
        contradicting.as_str(),
        "--iree-llvmcpu-target-cpu=",
        "CompileSettings::target",
    ] {
        assert!(error.contains(part), "{part}: {error}");
    }
}
