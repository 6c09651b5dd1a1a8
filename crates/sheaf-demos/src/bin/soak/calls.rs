//! The soak's calls: 40 good signatures of the reference functions, each
//! with its arguments and the interpreter's result, and bad calls that must
//! be refused (an error, never a result).

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::reference::{self, ReferenceError};
use sheaf_integration::{CapturedScalar, ErrorChain, HostTensor, JitFunction, JitRuntime, Value};

/// The reference functions, made once.
pub(crate) struct Functions {
    sigmoid: JitFunction,
    softmax: JitFunction,
    mlp_layer: JitFunction,
}

impl Functions {
    pub(crate) fn new() -> Self {
        Functions {
            sigmoid: reference::sigmoid(),
            softmax: reference::softmax(),
            mlp_layer: reference::mlp_layer(),
        }
    }
}

/// Which function a call runs, with what it captures.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Sigmoid,
    Softmax { temperature: f32 },
    MlpLayer,
}

impl Kind {
    fn function(self, functions: &Functions) -> &JitFunction {
        match self {
            Kind::Sigmoid => &functions.sigmoid,
            Kind::Softmax { .. } => &functions.softmax,
            Kind::MlpLayer => &functions.mlp_layer,
        }
    }

    fn captured(self) -> Vec<CapturedScalar> {
        match self {
            Kind::Softmax { temperature } => vec![reference::temperature(temperature)],
            Kind::Sigmoid | Kind::MlpLayer => Vec::new(),
        }
    }

    fn interpret(self, args: &[Value]) -> Result<Vec<Value>, ReferenceError> {
        match self {
            Kind::Sigmoid => reference::interpret_sigmoid(args),
            Kind::Softmax { temperature } => reference::interpret_softmax(args, temperature),
            Kind::MlpLayer => reference::interpret_mlp_layer(args),
        }
    }
}

/// What a call must give.
#[derive(Debug)]
enum Expected {
    /// This result (the interpreter's).
    Result(HostTensor),
    /// An error: the call is bad.
    Refusal,
}

/// One call of the soak.
#[derive(Debug)]
pub(crate) struct Call {
    pub(crate) what: String,
    kind: Kind,
    args: Vec<Value>,
    captured: Vec<CapturedScalar>,
    expected: Expected,
}

/// How a call went.
pub(crate) enum Outcome {
    /// The right result, compiled or interpreted.
    Right { compiled: bool },
    /// A bad call, refused with an error as it must be.
    Refused,
    /// A wrong result, a result for a bad call, or an error for a good one.
    Wrong(String),
}

impl Call {
    fn good(what: String, kind: Kind, args: Vec<Value>) -> Call {
        let expected = kind
            .interpret(&args)
            .ok()
            .and_then(|outputs| outputs.into_iter().next())
            .and_then(|output| output.to_host().ok())
            .unwrap_or_else(|| panic!("the interpreter refuses the soak's good call {what}"));
        Call {
            what,
            captured: kind.captured(),
            kind,
            args,
            expected: Expected::Result(expected),
        }
    }

    fn bad(what: &str, kind: Kind, args: Vec<Value>) -> Call {
        Call {
            what: what.to_owned(),
            captured: kind.captured(),
            kind,
            args,
            expected: Expected::Refusal,
        }
    }

    /// Runs the call on `jit` and checks what came back.
    pub(crate) fn run(&self, jit: &JitRuntime, functions: &Functions) -> Outcome {
        let function = self.kind.function(functions);
        let result = jit.call(function, &self.args, &self.captured, |args, _, _| {
            self.kind.interpret(args)
        });
        match (&self.expected, result) {
            (Expected::Result(expected), Ok(result)) => {
                match result.outputs.first().map(Value::to_host) {
                    Some(Ok(actual)) if close(&actual, expected) => Outcome::Right {
                        compiled: result.provenance.is_compiled(),
                    },
                    other => Outcome::Wrong(format!(
                        "{} ({:?}): expected {expected:?}, got {other:?}",
                        self.what, result.provenance
                    )),
                }
            }
            (Expected::Result(_), Err(error)) => {
                Outcome::Wrong(format!("{}: {}", self.what, ErrorChain(&error)))
            }
            (Expected::Refusal, Err(_)) => Outcome::Refused,
            (Expected::Refusal, Ok(result)) => Outcome::Wrong(format!(
                "bad call {} was not refused ({:?})",
                self.what, result.provenance
            )),
        }
    }
}

/// Equal within 1e-4, relative to the larger of 1 and the expected value.
fn close(actual: &HostTensor, expected: &HostTensor) -> bool {
    fn within<T: Copy + Into<f64>>(a: &ArrayD<T>, e: &ArrayD<T>) -> bool {
        a.shape() == e.shape()
            && a.iter().zip(e.iter()).all(|(&a, &e)| {
                let (a, e): (f64, f64) = (a.into(), e.into());
                (a - e).abs() <= 1e-4 * e.abs().max(1.0)
            })
    }
    match (actual, expected) {
        (HostTensor::F32(a), HostTensor::F32(e)) => within(a, e),
        (HostTensor::F64(a), HostTensor::F64(e)) => within(a, e),
        _ => false,
    }
}

/// Deterministic values in [-3, 3).
fn array<T: From<f32>>(shape: &[usize], seed: u32) -> ArrayD<T> {
    let mut state = seed.wrapping_mul(2_654_435_761).max(1);
    ArrayD::from_shape_simple_fn(IxDyn(shape), || {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        T::from((state % 6000) as f32 / 1000.0 - 3.0)
    })
}

/// The 40 good calls: sigmoid on 15 f32 and 5 f64 shapes, softmax on 5
/// shapes at 2 temperatures, mlp_layer at 10 batch sizes.
pub(crate) fn good_calls() -> Vec<Call> {
    let mut calls = Vec::new();
    let mut seed = 1;
    let mut next_seed = || {
        seed += 1;
        seed
    };
    for b in [1, 2, 3, 4, 5, 6, 7, 8, 16, 32] {
        let x = Value::from(array::<f32>(&[b, 32], next_seed()));
        calls.push(Call::good(
            format!("sigmoid f32[{b},32]"),
            Kind::Sigmoid,
            vec![x],
        ));
    }
    for d in [1, 3, 5, 7, 9] {
        let x = Value::from(array::<f32>(&[4, d, 2], next_seed()));
        calls.push(Call::good(
            format!("sigmoid f32[4,{d},2]"),
            Kind::Sigmoid,
            vec![x],
        ));
    }
    for b in [1, 2, 3, 4, 5] {
        let x = Value::from(array::<f64>(&[2, b], next_seed()));
        calls.push(Call::good(
            format!("sigmoid f64[2,{b}]"),
            Kind::Sigmoid,
            vec![x],
        ));
    }
    for temperature in [0.5, 2.0] {
        for b in [1, 2, 4, 8, 16] {
            let x = Value::from(array::<f32>(&[b, 64], next_seed()));
            let kind = Kind::Softmax { temperature };
            let what = format!("softmax f32[{b},64] at {temperature}");
            calls.push(Call::good(what, kind, vec![x]));
        }
    }
    let (w, bias) = (
        Value::from(array::<f32>(&[16, 8], next_seed())),
        Value::from(array::<f32>(&[8], next_seed())),
    );
    for b in [1, 2, 3, 5, 8, 13, 21, 34, 55, 89] {
        let x = Value::from(array::<f32>(&[b, 16], next_seed()));
        let args = vec![x, w.clone(), bias.clone()];
        calls.push(Call::good(format!("mlp_layer b={b}"), Kind::MlpLayer, args));
    }
    calls
}

/// Calls that must be refused: an mlp_layer whose inner dims do not fit, an
/// argument tree deeper than `Value::MAX_DEPTH`, a dict with a key twice,
/// and a sigmoid of integers (neither the lowering nor the interpreter
/// takes them).
pub(crate) fn bad_calls() -> Vec<Call> {
    let x = || Value::from(array::<f32>(&[2, 3], 99));
    let mut deep = x();
    for _ in 0..=Value::MAX_DEPTH {
        deep = Value::Tuple(vec![deep]);
    }
    let twice = Value::Dict(vec![("k".into(), x()), ("k".into(), x())]);
    let integers = Value::from(ArrayD::<i32>::zeros(IxDyn(&[2, 3])));
    let wrong_k = vec![
        Value::from(array::<f32>(&[4, 15], 7)),
        Value::from(array::<f32>(&[16, 8], 8)),
        Value::from(array::<f32>(&[8], 9)),
    ];
    vec![
        Call::bad("mlp_layer with K 15 against 16", Kind::MlpLayer, wrong_k),
        Call::bad("a tree too deep", Kind::Sigmoid, vec![deep]),
        Call::bad("a dict with a key twice", Kind::Sigmoid, vec![twice]),
        Call::bad("sigmoid of i32", Kind::Sigmoid, vec![integers]),
    ]
}
