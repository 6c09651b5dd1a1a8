//! `mlp_layer`'s lowering compiles, and computes what its interpreter does,
//! for every variant the dynamic-dims policy can ask of it: each of the 32
//! choices of dynamic dims among `x[N,K]`, `W[K,M]`, `b[M]`, at every size
//! N, K, M ∈ {1, 2} (size 1 is where IREE rewrites a product through a
//! reshape). And a one-output layer (M = 1) on a ragged batch runs its
//! calls compiled after two compiles, as any other layer does.

mod support;

use iree_safe::compiler::{choose_compiler, CompileOptions, CompileTarget, CompilerPreference};
use iree_safe::{Runtime, Tensor};
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    lowering::{ArgSpec, Signature},
    reference, DType, ErrorChain, Value,
};
use support::{array, assert_close, jit};

/// The dims of `x`, `W` and `b`, in signature order.
const DIMS: usize = 5;

/// One variant: which dims are dynamic (bit i: dim i of `x0 x1 w0 w1 b0`),
/// at which sizes.
#[derive(Debug, Clone, Copy)]
struct Variant {
    dynamic: u32,
    n: usize,
    k: usize,
    m: usize,
}

impl Variant {
    fn all() -> Vec<Variant> {
        let sizes = [1, 2];
        let mut all = Vec::new();
        for dynamic in 0..1 << DIMS {
            for n in sizes {
                for k in sizes {
                    for m in sizes {
                        all.push(Variant { dynamic, n, k, m });
                    }
                }
            }
        }
        all
    }

    fn signature(&self) -> Signature {
        let sizes = [self.n, self.k, self.k, self.m, self.m];
        let dims: Vec<i64> = (0..DIMS)
            .map(|i| {
                if self.dynamic >> i & 1 == 1 {
                    ArgSpec::DYNAMIC
                } else {
                    sizes[i] as i64
                }
            })
            .collect();
        let mut builder = Signature::builder();
        builder
            .arg(DType::F32, &dims[0..2])
            .arg(DType::F32, &dims[2..4])
            .arg(DType::F32, &dims[4..5]);
        builder.build()
    }

    fn args(&self, seed: u32) -> [ArrayD<f32>; 3] {
        [
            array(&[self.n, self.k], seed),
            array(&[self.k, self.m], seed + 1),
            array(&[self.m], seed + 2),
        ]
    }
}

/// The lowering's functions for `signature`, its entry renamed `entry`
/// (so that every variant can share one module and one compile).
fn functions(signature: &Signature, entry: &str) -> String {
    let module = reference::mlp_layer().module_text(signature).unwrap();
    let body = module
        .split_once("{\n")
        .and_then(|(_, rest)| rest.trim_end().strip_suffix('}'))
        .expect("module_text wraps the functions in `module @name { }`");
    body.replace("func.func @mlp_layer(", &format!("func.func @{entry}("))
}

#[test]
fn every_dynamic_variant_of_mlp_layer_compiles_and_matches_the_interpreter() {
    let variants = Variant::all();
    let module: String = variants
        .iter()
        .enumerate()
        .map(|(i, variant)| functions(&variant.signature(), &format!("v{i}")))
        .collect();
    let compiler = choose_compiler(CompilerPreference::Auto).unwrap().compiler;
    let mut options = CompileOptions::stablehlo();
    options.target = CompileTarget::process_cpu(&CompilerPreference::Auto);
    let artifact = compiler
        .compile(&format!("module @variants {{\n{module}}}\n"), &options)
        .unwrap_or_else(|e| panic!("the 256 variants do not compile: {}", ErrorChain(&e)));
    let runtime = Runtime::new("local-sync").unwrap();
    let loaded = runtime.load(artifact.vmfb()).unwrap();
    for (i, variant) in variants.iter().enumerate() {
        let function = loaded.function(&format!("v{i}")).unwrap();
        let arrays = variant.args(i as u32);
        let inputs: Vec<iree_safe::VmValue> = arrays
            .iter()
            .map(|a| {
                let data = a.as_standard_layout();
                Tensor::from_slice(runtime.device(), a.shape(), data.as_slice().unwrap())
                    .unwrap()
                    .into()
            })
            .collect();
        let outputs = function
            .call(&inputs)
            .unwrap_or_else(|e| panic!("{variant:?}: {e}"));
        let result = outputs[0].as_tensor().unwrap();
        let actual = ArrayD::from_shape_vec(IxDyn(result.shape()), result.to_vec::<f32>().unwrap());
        let expected = reference::interpret_mlp_layer(&arrays.map(Value::from))
            .unwrap_or_else(|e| panic!("{}", ErrorChain(&e)));
        assert_close(
            &Value::from(actual.unwrap()),
            &expected[0],
            &format!("{variant:?} ({})", variant.signature()),
        );
    }
}

#[test]
fn a_one_output_layer_on_a_ragged_batch_compiles_twice() {
    let jit = jit();
    let (w, b) = (Value::from(array(&[3, 1], 1)), Value::from(array(&[1], 2)));
    let sizes = reference::ragged_batch_sizes(20, 16);
    for (i, &batch) in sizes.iter().enumerate() {
        let args = [
            Value::from(array(&[batch, 3], 10 + i as u32)),
            w.clone(),
            b.clone(),
        ];
        let result = jit
            .call(&reference::mlp_layer(), &args, &[], |args, _, _| {
                reference::interpret_mlp_layer(args)
            })
            .unwrap();
        assert!(
            result.provenance.is_compiled(),
            "call {i}, batch {batch}: {:?}",
            result.provenance
        );
        let expected = reference::interpret_mlp_layer(&args).unwrap();
        assert_close(&result.outputs[0], &expected[0], &format!("batch {batch}"));
    }
    let stats = jit.stats();
    assert_eq!(stats.total.compiles, 2, "one size, then any: {stats}");
    assert_eq!(stats.total.fallback_calls, 0, "{stats}");
}
