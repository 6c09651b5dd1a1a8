//! A port of Sheaf's JIT call path onto this crate, run by `cargo test` (and
//! so by `cargo xtask test`) on the real runtime and compiler.
//!
//! It reproduces the shape of Sheaf's dispatch (`eval_call` asking
//! `try_iree_dispatch`, then compiling, then interpreting) with its own small
//! language: a `SheafValue` enum (ints, floats, tensors held as
//! `Arc<ArrayD<f32>>` with a dtype tag, tuples, dicts), an interpreter with a
//! mutable environment (a scope stack and call counters), and a lowering
//! that walks the function's body, reads the argument values to lay out dict
//! parameters and bake static integers, inlines callees, and names its entry
//! after the function. It runs a dict-in/dict-out function, a function whose
//! callee is redefined, and a dense layer whose weights are reused across
//! calls (uploaded once), and checks every compiled result against the
//! interpreter.
//!
//! ```sh
//! cargo run -p sheaf-integration --example sheaf_port
//! ```

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ndarray::{ArrayD, Axis, Ix2, IxDyn};
use sheaf_integration::{
    mlir, CompileMode, Container, DType, DiskCacheFolder, Dispatched, HostTensor, JitConfig,
    JitFunction, JitRuntime, LayoutBuilder, Leaf, Lowered, LoweringContext, LoweringError, Origin,
    Provenance, ScalarValue, Value,
};

// ---------------------------------------------------------------------------
// Sheaf's side: values, functions, the interpreter.
// ---------------------------------------------------------------------------

/// Sheaf's value type, reduced to what the port needs.
#[derive(Debug, Clone, PartialEq)]
enum SheafValue {
    Int(i64),
    /// Storage is always f32; `dtype` says what the values are.
    Tensor {
        data: Arc<ArrayD<f32>>,
        dtype: DType,
    },
    Tuple(Vec<SheafValue>),
    Dict(BTreeMap<String, SheafValue>),
}

impl SheafValue {
    fn tensor(data: ArrayD<f32>) -> SheafValue {
        SheafValue::Tensor {
            data: Arc::new(data),
            dtype: DType::F32,
        }
    }

    fn array(&self) -> &ArrayD<f32> {
        match self {
            SheafValue::Tensor { data, .. } => data,
            other => panic!("not a tensor: {other:?}"),
        }
    }
}

/// The body of a function.
#[derive(Debug, Clone)]
enum Expr {
    Param(&'static str),
    /// A dict entry: `(get p :key)`.
    Get(Box<Expr>, &'static str),
    /// A tuple element: `(nth t i)`.
    Nth(Box<Expr>, usize),
    /// Elementwise, or a vector added to each row of a matrix.
    Add(Box<Expr>, Box<Expr>),
    /// Elementwise.
    Mul(Box<Expr>, Box<Expr>),
    /// Times a static integer parameter (baked into the compiled code).
    Scale(Box<Expr>, &'static str),
    MatMul(Box<Expr>, Box<Expr>),
    Relu(Box<Expr>),
    /// A call of another user function (inlined when compiled).
    Call(&'static str, Vec<Expr>),
    /// A dict result.
    Dict(Vec<(&'static str, Expr)>),
}

use Expr::*;

fn b(expr: Expr) -> Box<Expr> {
    Box::new(expr)
}

/// A user function: its parameters (and which are static: baked into the
/// code, part of the key), and its body.
#[derive(Debug, Clone)]
struct FunctionDef {
    name: &'static str,
    params: Vec<&'static str>,
    static_params: Vec<&'static str>,
    body: Expr,
}

#[derive(Debug, thiserror::Error)]
enum SheafError {
    #[error("runtime error: {0}")]
    Runtime(String),
    #[error(transparent)]
    Jit(#[from] sheaf_integration::JitError),
    #[error(transparent)]
    Config(#[from] sheaf_integration::ConfigError),
}

/// The interpreter's state: the function registry, the scope stack, and
/// counters (mutable state a `'static` closure could not own).
struct Env {
    registry: HashMap<&'static str, FunctionDef>,
    scopes: Vec<HashMap<&'static str, SheafValue>>,
    interpreted: HashMap<&'static str, usize>,
    jit: JitRuntime,
    /// Compiled functions by name and definition hash (of the function and
    /// its callees), as Sheaf's JIT keeps them.
    compiled: HashMap<(&'static str, u64), JitFunction<ReturnKeys>>,
}

/// Per-variant metadata, as Sheaf's `FunctionSignature.return_dict_keys`.
#[derive(Debug, Clone)]
struct ReturnKeys(Option<Vec<String>>);

impl Env {
    fn new(jit: JitRuntime) -> Self {
        Env {
            registry: HashMap::new(),
            scopes: Vec::new(),
            interpreted: HashMap::new(),
            jit,
            compiled: HashMap::new(),
        }
    }

    fn define(&mut self, def: FunctionDef) {
        self.registry.insert(def.name, def);
    }

    /// Sheaf's `eval_call`: compiled code if the JIT can, else the
    /// interpreter, with this environment.
    fn eval_call(
        &mut self,
        name: &'static str,
        args: &[SheafValue],
    ) -> Result<SheafValue, SheafError> {
        let def = self.registry[name].clone();
        let function = self.jit_function(&def);
        let jit_args: Vec<Value> = def
            .params
            .iter()
            .zip(args)
            .map(|(param, arg)| to_jit(arg, def.static_params.contains(param)))
            .collect::<Result<_, _>>()?;
        match self.jit.dispatch(&function, &jit_args, &[])? {
            Dispatched::Compiled(compiled) => from_jit(&compiled.outputs, compiled.metadata()),
            Dispatched::Interpret(why) => {
                eprintln!("[sheaf_port] {name}: interpreted ({why})");
                self.interpret(&def, args)
            }
        }
    }

    /// The interpreter: push a scope, bind the parameters, evaluate.
    fn interpret(
        &mut self,
        def: &FunctionDef,
        args: &[SheafValue],
    ) -> Result<SheafValue, SheafError> {
        *self.interpreted.entry(def.name).or_default() += 1;
        self.scopes.push(
            def.params
                .iter()
                .copied()
                .zip(args.iter().cloned())
                .collect(),
        );
        let result = self.eval(&def.body);
        self.scopes.pop();
        result
    }

    fn eval(&mut self, expr: &Expr) -> Result<SheafValue, SheafError> {
        let tensor = |value: SheafValue| value.array().clone();
        Ok(match expr {
            Param(name) => self
                .scopes
                .last()
                .and_then(|s| s.get(name))
                .cloned()
                .ok_or_else(|| SheafError::Runtime(format!("unbound {name}")))?,
            Get(dict, key) => match self.eval(dict)? {
                SheafValue::Dict(entries) => entries
                    .get(*key)
                    .cloned()
                    .ok_or_else(|| SheafError::Runtime(format!("no key {key}")))?,
                other => return Err(SheafError::Runtime(format!("get on {other:?}"))),
            },
            Nth(tuple, index) => match self.eval(tuple)? {
                SheafValue::Tuple(items) => items
                    .get(*index)
                    .cloned()
                    .ok_or_else(|| SheafError::Runtime(format!("no element {index}")))?,
                other => return Err(SheafError::Runtime(format!("nth on {other:?}"))),
            },
            Add(x, y) => {
                let (x, y) = (tensor(self.eval(x)?), tensor(self.eval(y)?));
                SheafValue::tensor(&x + &y)
            }
            Mul(x, y) => {
                let (x, y) = (tensor(self.eval(x)?), tensor(self.eval(y)?));
                SheafValue::tensor(&x * &y)
            }
            Scale(x, k) => {
                let x = tensor(self.eval(x)?);
                let Some(SheafValue::Int(k)) = self.scopes.last().and_then(|s| s.get(k)).cloned()
                else {
                    return Err(SheafError::Runtime(format!("{k} must be an int")));
                };
                SheafValue::tensor(x.mapv(|v| v * k as f32))
            }
            MatMul(x, w) => {
                let (x, w) = (tensor(self.eval(x)?), tensor(self.eval(w)?));
                let (x, w) = (
                    x.into_dimensionality::<Ix2>().unwrap(),
                    w.into_dimensionality::<Ix2>().unwrap(),
                );
                SheafValue::tensor(x.dot(&w).into_dyn())
            }
            Relu(x) => SheafValue::tensor(tensor(self.eval(x)?).mapv(|v| v.max(0.0))),
            Call(callee, args) => {
                let args = args
                    .iter()
                    .map(|a| self.eval(a))
                    .collect::<Result<Vec<_>, _>>()?;
                let def = self.registry[callee].clone();
                self.interpret(&def, &args)?
            }
            Dict(entries) => SheafValue::Dict(
                entries
                    .iter()
                    .map(|(key, expr)| Ok(((*key).to_owned(), self.eval(expr)?)))
                    .collect::<Result<_, SheafError>>()?,
            ),
        })
    }

    /// The JIT function of `def`, keyed like Sheaf's: by name and by a hash
    /// of the definition with its callees' (so redefining a callee makes the
    /// caller a new function).
    fn jit_function(&mut self, def: &FunctionDef) -> JitFunction<ReturnKeys> {
        let mut callees = Vec::new();
        collect_callees(&def.body, &self.registry, &mut callees);
        let identity = format!("{def:?}|{callees:?}");
        let hash = sheaf_integration::stable_hash(identity.as_bytes());
        let registry: Arc<HashMap<&'static str, FunctionDef>> = Arc::new(self.registry.clone());
        let def = def.clone();
        self.compiled
            .entry((def.name, hash))
            .or_insert_with(|| {
                JitFunction::with_definition_hash(def.name, hash, move |ctx| {
                    lower(&def, &registry, ctx)
                })
            })
            .clone()
    }
}

fn collect_callees(
    expr: &Expr,
    registry: &HashMap<&'static str, FunctionDef>,
    out: &mut Vec<String>,
) {
    let mut visit = |e: &Expr| collect_callees(e, registry, out);
    match expr {
        Param(_) => {}
        Get(x, _) | Nth(x, _) | Scale(x, _) | Relu(x) => visit(x),
        Add(x, y) | Mul(x, y) | MatMul(x, y) => {
            visit(x);
            visit(y);
        }
        Call(callee, args) => {
            for a in args {
                visit(a);
            }
            if let Some(def) = registry.get(callee) {
                out.push(format!("{def:?}"));
                collect_callees(&def.body, registry, out);
            }
        }
        Dict(entries) => {
            for (_, e) in entries {
                visit(e);
            }
        }
    }
}

/// Sheaf's values to the JIT's: tensors shared (no copy), dicts and tuples
/// kept as structure, ints of static parameters baked in, other scalars
/// passed at run time.
fn to_jit(value: &SheafValue, static_param: bool) -> Result<Value, SheafError> {
    Ok(match value {
        SheafValue::Int(n) if static_param => Value::Static(ScalarValue::I64(*n)),
        SheafValue::Int(n) => Value::Scalar(ScalarValue::I64(*n)),
        SheafValue::Tensor { data, dtype } => {
            Value::from(HostTensor::tagged(Arc::clone(data), *dtype)?)
        }
        SheafValue::Tuple(items) => Value::Tuple(
            items
                .iter()
                .map(|v| to_jit(v, false))
                .collect::<Result<_, _>>()?,
        ),
        SheafValue::Dict(entries) => Value::Dict(
            entries
                .iter()
                .map(|(k, v)| Ok((Arc::from(k.as_str()), to_jit(v, false)?)))
                .collect::<Result<_, SheafError>>()?,
        ),
    })
}

/// The JIT's results back to Sheaf's values, using the variant's metadata
/// for the dict keys (as Sheaf's `unflatten_value` uses `return_dict_keys`).
fn from_jit(outputs: &[Value], meta: &ReturnKeys) -> Result<SheafValue, SheafError> {
    let tensor = |value: &Value| -> Result<SheafValue, SheafError> {
        let host = value.to_host()?;
        let data = host
            .as_f32()
            .ok_or_else(|| SheafError::Runtime("not f32".into()))?;
        Ok(SheafValue::tensor(data.clone()))
    };
    match (&meta.0, outputs) {
        (Some(keys), [Value::Dict(entries)]) => Ok(SheafValue::Dict(
            keys.iter()
                .zip(entries)
                .map(|(key, (_, value))| Ok((key.clone(), tensor(value)?)))
                .collect::<Result<_, SheafError>>()?,
        )),
        (None, [value]) => tensor(value),
        _ => Err(SheafError::Runtime(format!(
            "unexpected results {outputs:?}"
        ))),
    }
}

// ---------------------------------------------------------------------------
// The lowering: StableHLO from a function's body.
// ---------------------------------------------------------------------------

/// An SSA value of the function being emitted, with its shape.
#[derive(Debug, Clone)]
enum Emitted {
    Tensor { name: String, dims: Vec<i64> },
    Tuple(Vec<Emitted>),
    Dict(BTreeMap<String, Emitted>),
}

struct Emitter<'a> {
    registry: &'a HashMap<&'static str, FunctionDef>,
    static_ints: HashMap<&'static str, i64>,
    lines: Vec<String>,
    next: usize,
}

fn lower(
    def: &FunctionDef,
    registry: &HashMap<&'static str, FunctionDef>,
    ctx: &LoweringContext<'_>,
) -> Result<Lowered<ReturnKeys>, LoweringError> {
    // Read the argument values: lay out dict parameters (their keys, in
    // flattening order) and take the static integers to bake in.
    let values = ctx
        .values()
        .ok_or("the port lowers only from a call's values")?;
    let mut emitter = Emitter {
        registry,
        static_ints: HashMap::new(),
        lines: Vec::new(),
        next: 0,
    };
    let mut arguments = Vec::new();
    let mut scope = HashMap::new();
    for (param, value) in def.params.iter().zip(values) {
        match value {
            Value::Static(ScalarValue::I64(n)) => {
                emitter.static_ints.insert(param, *n);
            }
            other => {
                let bound = bind(other, &mut arguments)?;
                scope.insert(*param, bound);
            }
        }
    }
    let result = emitter.emit(&def.body, &scope)?;
    let (results, keys) = match &result {
        Emitted::Tensor { .. } => (vec![result.clone()], None),
        Emitted::Dict(entries) => (
            entries.values().cloned().collect(),
            Some(entries.keys().cloned().collect::<Vec<_>>()),
        ),
        Emitted::Tuple(_) => return Err("tuple results are not supported by the port".into()),
    };
    let mut signature = Vec::new();
    let mut returns = Vec::new();
    for result in &results {
        let Emitted::Tensor { name, dims } = result else {
            return Err("nested dict results are not supported by the port".into());
        };
        let ty = mlir::tensor_type(DType::F32, dims)?;
        signature.push(ty.clone());
        returns.push((name.clone(), ty));
    }
    let params: Vec<String> = arguments
        .iter()
        .map(|(name, ty)| format!("%{name}: {ty}"))
        .collect();
    let mut text = format!(
        "func.func @{}({}) -> ({}) {{\n",
        ctx.entry_name(),
        params.join(", "),
        signature.join(", ")
    );
    for line in &emitter.lines {
        text.push_str("  ");
        text.push_str(line);
        text.push('\n');
    }
    let names: Vec<String> = returns.iter().map(|(n, _)| format!("%{n}")).collect();
    let types: Vec<String> = returns.iter().map(|(_, t)| t.clone()).collect();
    text.push_str(&format!(
        "  return {} : {}\n}}",
        names.join(", "),
        types.join(", ")
    ));
    let mut lowered = Lowered::new(text).with_metadata(ReturnKeys(keys.clone()));
    if let Some(keys) = keys {
        let mut outputs = LayoutBuilder::new();
        outputs.open(Container::Dict);
        for key in keys {
            outputs.key(key).leaf(Leaf::Tensor);
        }
        outputs.close();
        lowered = lowered.with_outputs(
            outputs
                .build()
                .map_err(|e| LoweringError::with_source("outputs", e))?,
        );
    }
    Ok(lowered)
}

/// Binds an argument value to entry-function parameters, in the order the
/// runtime flattens it (dict entries by key).
fn bind(value: &Value, arguments: &mut Vec<(String, String)>) -> Result<Emitted, LoweringError> {
    match value {
        Value::Tensor(tensor) => {
            let name = format!("arg{}", arguments.len());
            let dims: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
            arguments.push((name.clone(), mlir::tensor_type(DType::F32, &dims)?));
            Ok(Emitted::Tensor { name, dims })
        }
        Value::Tuple(items) => Ok(Emitted::Tuple(
            items
                .iter()
                .map(|item| bind(item, arguments))
                .collect::<Result<_, _>>()?,
        )),
        Value::Dict(entries) => {
            let mut sorted: Vec<_> = entries.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            let mut bound = BTreeMap::new();
            for (key, value) in sorted {
                bound.insert(key.to_string(), bind(value, arguments)?);
            }
            Ok(Emitted::Dict(bound))
        }
        other => Err(format!("the port does not lower {other:?}").into()),
    }
}

impl Emitter<'_> {
    fn fresh(&mut self) -> String {
        self.next += 1;
        format!("v{}", self.next)
    }

    fn emit(
        &mut self,
        expr: &Expr,
        scope: &HashMap<&'static str, Emitted>,
    ) -> Result<Emitted, LoweringError> {
        let tensor = |e: Emitted| match e {
            Emitted::Tensor { name, dims } => Ok((name, dims)),
            _ => Err(LoweringError::new(
                "a tuple or dict where a tensor is needed",
            )),
        };
        Ok(match expr {
            Param(name) => scope
                .get(name)
                .cloned()
                .ok_or_else(|| format!("unbound {name}"))?,
            Get(dict, key) => match self.emit(dict, scope)? {
                Emitted::Dict(entries) => entries
                    .get(*key)
                    .cloned()
                    .ok_or_else(|| format!("no key {key}"))?,
                _ => return Err("get on a tensor or tuple".into()),
            },
            Nth(tuple, index) => match self.emit(tuple, scope)? {
                Emitted::Tuple(items) => items
                    .get(*index)
                    .cloned()
                    .ok_or_else(|| format!("no element {index}"))?,
                _ => return Err("nth on a tensor or dict".into()),
            },
            Add(x, y) | Mul(x, y) => {
                let ((x, xd), (y, yd)) =
                    (tensor(self.emit(x, scope)?)?, tensor(self.emit(y, scope)?)?);
                let ty = mlir::tensor_type(DType::F32, &xd)?;
                let y = if yd == xd {
                    y
                } else if yd.len() == 1 && xd.last() == yd.last() {
                    // A vector added to each row.
                    let b = self.fresh();
                    let vty = mlir::tensor_type(DType::F32, &yd)?;
                    self.lines.push(format!(
                        "%{b} = stablehlo.broadcast_in_dim %{y}, dims = [{}] : ({vty}) -> {ty}",
                        xd.len() - 1
                    ));
                    b
                } else {
                    return Err(format!("shapes {xd:?} and {yd:?} do not combine").into());
                };
                let out = self.fresh();
                let op = if matches!(expr, Add(..)) {
                    "add"
                } else {
                    "multiply"
                };
                self.lines
                    .push(format!("%{out} = stablehlo.{op} %{x}, %{y} : {ty}"));
                Emitted::Tensor {
                    name: out,
                    dims: xd,
                }
            }
            Scale(x, k) => {
                let (x, dims) = tensor(self.emit(x, scope)?)?;
                let k = *self
                    .static_ints
                    .get(k)
                    .ok_or_else(|| format!("{k} is not static"))?;
                let ty = mlir::tensor_type(DType::F32, &dims)?;
                let (c, out) = (self.fresh(), self.fresh());
                self.lines
                    .push(format!("%{c} = stablehlo.constant dense<{k}.0> : {ty}"));
                self.lines
                    .push(format!("%{out} = stablehlo.multiply %{x}, %{c} : {ty}"));
                Emitted::Tensor { name: out, dims }
            }
            MatMul(x, w) => {
                let ((x, xd), (w, wd)) =
                    (tensor(self.emit(x, scope)?)?, tensor(self.emit(w, scope)?)?);
                let dims = vec![xd[0], wd[1]];
                let (tx, tw, ty) = (
                    mlir::tensor_type(DType::F32, &xd)?,
                    mlir::tensor_type(DType::F32, &wd)?,
                    mlir::tensor_type(DType::F32, &dims)?,
                );
                let out = self.fresh();
                self.lines.push(format!(
                    "%{out} = stablehlo.dot_general %{x}, %{w}, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {ty}"
                ));
                Emitted::Tensor { name: out, dims }
            }
            Relu(x) => {
                let (x, dims) = tensor(self.emit(x, scope)?)?;
                let ty = mlir::tensor_type(DType::F32, &dims)?;
                let (zero, zeros, out) = (self.fresh(), self.fresh(), self.fresh());
                self.lines.push(format!(
                    "%{zero} = stablehlo.constant dense<0.0> : tensor<f32>"
                ));
                self.lines.push(format!("%{zeros} = stablehlo.broadcast_in_dim %{zero}, dims = [] : (tensor<f32>) -> {ty}"));
                self.lines
                    .push(format!("%{out} = stablehlo.maximum %{x}, %{zeros} : {ty}"));
                Emitted::Tensor { name: out, dims }
            }
            Call(callee, args) => {
                let def = self
                    .registry
                    .get(callee)
                    .ok_or_else(|| format!("no function {callee}"))?;
                let mut inner = HashMap::new();
                for (param, arg) in def.params.iter().zip(args) {
                    inner.insert(*param, self.emit(arg, scope)?);
                }
                self.emit(&def.body, &inner)?
            }
            Dict(entries) => Emitted::Dict(
                entries
                    .iter()
                    .map(|(key, e)| Ok(((*key).to_owned(), self.emit(e, scope)?)))
                    .collect::<Result<_, LoweringError>>()?,
            ),
        })
    }
}

// ---------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------

fn data(shape: &[usize], seed: usize) -> ArrayD<f32> {
    let n: usize = shape.iter().product();
    ArrayD::from_shape_vec(
        IxDyn(shape),
        (0..n)
            .map(|i| ((i * 7 + seed * 3) % 11) as f32 / 5.0 - 1.0)
            .collect(),
    )
    .unwrap()
}

fn assert_same(compiled: &SheafValue, interpreted: &SheafValue, what: &str) {
    match (compiled, interpreted) {
        (SheafValue::Dict(a), SheafValue::Dict(b)) => {
            assert_eq!(
                a.keys().collect::<Vec<_>>(),
                b.keys().collect::<Vec<_>>(),
                "{what}: keys"
            );
            for (key, value) in a {
                assert_same(value, &b[key], &format!("{what}.{key}"));
            }
        }
        (a, b) => {
            let (a, b) = (a.array(), b.array());
            assert_eq!(a.shape(), b.shape(), "{what}: shape");
            for (x, y) in a.iter().zip(b.iter()) {
                assert!(
                    (x - y).abs() <= 1e-4 * y.abs().max(1.0),
                    "{what}: {x} vs {y}"
                );
            }
        }
    }
}

fn main() -> Result<(), SheafError> {
    let cache = tempfile::tempdir().expect("a temporary folder");
    let jit = JitRuntime::new(
        JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::project(cache.path()))
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .build()?,
    )?;
    let mut env = Env::new(jit.clone());

    // A dense layer with its weights in a dict: `relu(x · p.w + p.b)`.
    env.define(FunctionDef {
        name: "dense",
        params: vec!["p", "x"],
        static_params: vec![],
        body: Relu(b(Add(
            b(MatMul(b(Param("x")), b(Get(b(Param("p")), "w")))),
            b(Get(b(Param("p")), "b")),
        ))),
    });
    // Dict in, dict out, with a static integer baked in:
    // `{:y (dense p x) :scaled (* x k)}`.
    env.define(FunctionDef {
        name: "step",
        params: vec!["p", "x", "k"],
        static_params: vec!["k"],
        body: Dict(vec![
            ("y", Call("dense", vec![Param("p"), Param("x")])),
            ("scaled", Scale(b(Param("x")), "k")),
        ]),
    });
    // A tuple argument: `(+ (nth t 0) (nth t 1))`.
    env.define(FunctionDef {
        name: "sum_pair",
        params: vec!["t"],
        static_params: vec![],
        body: Add(b(Nth(b(Param("t")), 0)), b(Nth(b(Param("t")), 1))),
    });
    // A caller whose callee will be redefined.
    env.define(FunctionDef {
        name: "act",
        params: vec!["x"],
        static_params: vec![],
        body: Relu(b(Param("x"))),
    });
    env.define(FunctionDef {
        name: "outer",
        params: vec!["x"],
        static_params: vec![],
        body: Add(b(Call("act", vec![Param("x")])), b(Param("x"))),
    });

    let params = SheafValue::Dict(BTreeMap::from([
        ("w".to_owned(), SheafValue::tensor(data(&[16, 8], 1))),
        ("b".to_owned(), SheafValue::tensor(data(&[8], 2))),
    ]));
    // The same weights on every call: uploaded once.
    for call in 0..6 {
        let x = SheafValue::tensor(data(&[4, 16], 10 + call));
        let k = SheafValue::Int(2 + (call % 2) as i64);
        let compiled = env.eval_call("step", &[params.clone(), x.clone(), k.clone()])?;
        let def = env.registry["step"].clone();
        let interpreted = env.interpret(&def, &[params.clone(), x, k])?;
        assert_same(&compiled, &interpreted, "step");
    }
    let uploads = jit.upload_stats();
    println!(
        "step: 6 calls, 2 variants (k = 2, 3); weights uploaded {} times, served from the upload cache {} times",
        uploads.uploads - 6,
        uploads.hits
    );
    assert_eq!(
        uploads.hits, 8,
        "w and b from the third call on: {uploads:?}"
    );

    let pair = SheafValue::Tuple(vec![
        SheafValue::tensor(data(&[2, 3], 7)),
        SheafValue::tensor(data(&[2, 3], 8)),
    ]);
    let compiled = env.eval_call("sum_pair", std::slice::from_ref(&pair))?;
    assert_same(
        &compiled,
        &env.interpret(&env.registry["sum_pair"].clone(), &[pair])?,
        "sum_pair",
    );

    // Redefining the callee makes the caller a new function.
    let x = SheafValue::tensor(data(&[3, 3], 5));
    let before = env.eval_call("outer", std::slice::from_ref(&x))?;
    assert_same(
        &before,
        &env.interpret(&env.registry["outer"].clone(), std::slice::from_ref(&x))?,
        "outer",
    );
    env.define(FunctionDef {
        name: "act",
        params: vec!["x"],
        static_params: vec![],
        body: Mul(b(Param("x")), b(Param("x"))),
    });
    let after = env.eval_call("outer", std::slice::from_ref(&x))?;
    assert_same(
        &after,
        &env.interpret(&env.registry["outer"].clone(), std::slice::from_ref(&x))?,
        "outer after act changed",
    );
    assert_ne!(before, after, "the redefined callee is used");

    // Dict keys and sums of the results, for the record.
    let SheafValue::Dict(result) = env.eval_call(
        "step",
        &[
            params,
            SheafValue::tensor(data(&[4, 16], 99)),
            SheafValue::Int(2),
        ],
    )?
    else {
        panic!("step returns a dict");
    };
    let stats = jit.stats();
    println!(
        "step returned {{{}}}; sum of y {:.3}; {} compiles, {} hits, {} interpreted calls",
        result.keys().cloned().collect::<Vec<_>>().join(", "),
        result["y"].array().sum_axis(Axis(0)).sum(),
        stats.total.compiles,
        stats.total.hits,
        env.interpreted.values().sum::<usize>()
    );
    assert_eq!(
        stats.total.compiles, 5,
        "step k=2, step k=3, sum_pair, outer before and after: {stats}"
    );
    assert_eq!(stats.total.fallback_calls, 0, "{stats}");
    let dispatched = jit.dispatch(
        &env.jit_function(&env.registry["dense"].clone()),
        &[
            to_jit(
                &SheafValue::Dict(BTreeMap::from([
                    ("w".to_owned(), SheafValue::tensor(data(&[16, 8], 1))),
                    ("b".to_owned(), SheafValue::tensor(data(&[8], 2))),
                ])),
                false,
            )?,
            to_jit(&SheafValue::tensor(data(&[4, 16], 1)), false)?,
        ],
        &[],
    )?;
    let Dispatched::Compiled(dense) = dispatched else {
        panic!("dense is compiled")
    };
    assert!(matches!(
        dense.provenance,
        Provenance::Compiled(Origin::CompiledNow { .. })
    ));
    println!("sheaf_port: every compiled result matched the interpreter");
    Ok(())
}
