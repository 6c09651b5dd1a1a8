//! A function with structured arguments and results: a dict in, a dict
//! out (one of its leaves 0-d), and metadata kept per variant.

use ndarray::ArrayD;
use sheaf_integration::{
    lowering::{Container, LayoutBuilder, Leaf, Lowered, LoweringContext, LoweringError},
    mlir, JitFunction, Value,
};

/// What `affine`'s lowering hands back with each variant.
#[derive(Debug, PartialEq)]
pub(crate) struct AffineMeta {
    /// The keys of the result dict, as Sheaf's `FunctionSignature` keeps
    /// `return_dict_keys`.
    pub(crate) return_keys: Vec<String>,
}

/// `(defn affine [params x] {:y (+ (* x (:w params)) (:b params)) :n (sum x)})`:
/// a dict in, a dict out (with a 0-d result), metadata kept per variant.
pub(crate) fn affine() -> JitFunction<AffineMeta> {
    JitFunction::new(
        "affine",
        "(defn affine [params x] ...)",
        |ctx: &LoweringContext<'_>| {
            // The flattened arguments: params.b, params.w (key order), then x.
            let [b, w, x] = ctx.args() else {
                return Err(LoweringError::new("affine takes {b, w} and x"));
            };
            if b.dims() != x.dims() || w.dims() != x.dims() || x.rank() != 1 {
                return Err(LoweringError::new(format!(
                    "affine needs vectors of one length, got {b} {w} {x}"
                )));
            }
            let ty = mlir::arg_type(x)?;
            let mut outputs = LayoutBuilder::new();
            outputs
                .open(Container::Dict)
                .key("n")
                .leaf(Leaf::Tensor)
                .key("y")
                .leaf(Leaf::Tensor)
                .close();
            Ok(Lowered::new(format!(
            "func.func @{entry}(%b: {ty}, %w: {ty}, %x: {ty}) -> (tensor<f32>, {ty}) {{
               %xw = stablehlo.multiply %x, %w : {ty}
               %y = stablehlo.add %xw, %b : {ty}
               %zero = stablehlo.constant dense<0.0> : tensor<f32>
               %n = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [0] : ({ty}, tensor<f32>) -> tensor<f32>
               return %n, %y : tensor<f32>, {ty}
             }}",
            entry = ctx.entry_symbol()
        ))
        .with_outputs(outputs.build().map_err(|e| LoweringError::with_source("output layout", e))?)
        .with_metadata(AffineMeta {
            return_keys: vec!["n".into(), "y".into()],
        }))
        },
    )
}

pub(crate) fn params(b: ArrayD<f32>, w: ArrayD<f32>, keys: (&str, &str)) -> Value {
    // Given out of key order on purpose: dicts flatten by key.
    Value::Dict(vec![
        (keys.1.into(), Value::from(w)),
        (keys.0.into(), Value::from(b)),
    ])
}
