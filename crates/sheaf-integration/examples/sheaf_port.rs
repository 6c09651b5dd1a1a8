//! A port of Sheaf's JIT call path onto this crate, run by `cargo test` (and
//! so by `cargo xtask test`) on the real runtime and compiler.
//!
//! It has the shape of Sheaf's dispatch (`eval_call` asking the JIT, then
//! interpreting) with a small language of its own whose IR is not `Send`
//! (names are `Rc<str>`, as in Sheaf's AST). Each call brings its lowering
//! ([`JitRuntime::dispatch_with`]): it runs on the caller's thread, borrows
//! the caller's function registry and reads the caller's own values (dict
//! keys, static integers), and only MLIR text crosses to a compile thread.
//! The runtime compiles in the background; `step`, like Sheaf's
//! value-and-grad, always waits for its compile. The parent process exports
//! what it compiled to a bundle and runs itself again with no compiler:
//! that process serves every call compiled from the first, with no lowering.
//!
//! ```sh
//! cargo run -p sheaf-integration --example sheaf_port
//! ```

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ndarray::{ArrayD, Ix2, IxDyn};
use sheaf_integration::{
    artifacts::ArtifactSource,
    compiler::CompilerPreference,
    lowering::{Container, LayoutBuilder, Leaf, Lowered, LoweringContext, LoweringError},
    mlir,
    settings::{CompileMode, DiskCacheFolder},
    stats::Phase,
    DType, Dispatched, JitConfig, JitFunction, JitRuntime, ScalarValue, Value,
};

// -- Sheaf's side: values, IR, the interpreter. -----------------------------

type Name = Rc<str>;

/// Sheaf's values, reduced to what the port needs (tensors held as f32).
#[derive(Debug, Clone, PartialEq)]
enum SheafValue {
    Int(i64),
    Tensor(Arc<ArrayD<f32>>),
    Tuple(Vec<SheafValue>),
    Dict(BTreeMap<Name, SheafValue>),
}

/// A function body. Not `Send`: names are `Rc<str>`.
#[derive(Debug)]
enum Expr {
    Param(Name),
    Get(Box<Expr>, Name),
    Nth(Box<Expr>, usize),
    Add(Box<Expr>, Box<Expr>),
    Mul(Box<Expr>, Box<Expr>),
    /// Times a static integer parameter, baked into the compiled code.
    Scale(Box<Expr>, Name),
    MatMul(Box<Expr>, Box<Expr>),
    Relu(Box<Expr>),
    Call(Name, Vec<Expr>),
    Dict(Vec<(Name, Expr)>),
}

use Expr::*;

fn param(name: &str) -> Box<Expr> {
    Box::new(Param(name.into()))
}

#[derive(Debug)]
struct FunctionDef {
    name: Name,
    params: Vec<Name>,
    static_params: Vec<Name>,
    body: Expr,
}

fn def(name: &str, params: &[&str], static_params: &[&str], body: Expr) -> FunctionDef {
    let names = |names: &[&str]| names.iter().map(|&n| Name::from(n)).collect();
    FunctionDef {
        name: name.into(),
        params: names(params),
        static_params: names(static_params),
        body,
    }
}

type Error = Box<dyn std::error::Error>;

/// Per-variant metadata, as Sheaf's `return_dict_keys`.
type ReturnKeys = Option<Vec<String>>;

struct Env {
    registry: HashMap<Name, Rc<FunctionDef>>,
    jit: JitRuntime,
    functions: HashMap<(Name, u64), JitFunction<ReturnKeys>>,
    /// Functions that wait for their compile (Sheaf's value-and-grad).
    blocking: Vec<Name>,
}

impl Env {
    /// Sheaf's `eval_call`: compiled code if the JIT has it, else the
    /// interpreter.
    fn eval_call(&mut self, name: &str, args: &[SheafValue]) -> Result<SheafValue, Error> {
        let def = Rc::clone(&self.registry[name]);
        let function = self.jit_function(&def);
        let jit_args = def
            .params
            .iter()
            .zip(args)
            .map(|(p, arg)| to_jit(arg, def.static_params.contains(p)))
            .collect::<Vec<_>>();
        let start = Instant::now();
        let registry = &self.registry;
        let lower = |ctx: &LoweringContext<'_>| lower(&def, registry, args, ctx);
        match self.jit.dispatch_with(&function, &jit_args, &[], lower)? {
            Dispatched::Compiled(compiled) => {
                let (outputs, keys) = compiled.into_parts();
                from_jit(outputs, &keys)
            }
            Dispatched::Interpret(_) => {
                let result = interpret(registry, &def, args);
                self.jit.report_interpreted(&function, start.elapsed());
                result
            }
        }
    }

    /// The JIT function of `def`, by name and a hash of the definition with
    /// its callees' (a redefined callee makes its callers new functions).
    fn jit_function(&mut self, def: &FunctionDef) -> JitFunction<ReturnKeys> {
        let mut identity = format!("{def:?}");
        callees(&def.body, &self.registry, &mut identity);
        let hash = sheaf_integration::lowering::stable_hash(identity.as_bytes());
        let blocking = self.blocking.contains(&def.name);
        let new = || {
            let function = JitFunction::lowered_per_call(&def.name, hash)
                .with_metadata_codec(encode_keys, decode_keys);
            match blocking {
                true => function.with_compile_mode(CompileMode::Blocking),
                false => function,
            }
        };
        let key = (Rc::clone(&def.name), hash);
        self.functions.entry(key).or_insert_with(new).clone()
    }
}

/// The metadata as a bundle records it: the dict keys, one per line.
fn encode_keys(keys: &ReturnKeys) -> Vec<u8> {
    keys.as_ref()
        .map_or(Vec::new(), |keys| keys.join("\n").into_bytes())
}

fn decode_keys(bytes: &[u8]) -> Option<ReturnKeys> {
    let text = std::str::from_utf8(bytes).ok()?;
    Some((!text.is_empty()).then(|| text.lines().map(String::from).collect()))
}

fn callees(expr: &Expr, registry: &HashMap<Name, Rc<FunctionDef>>, out: &mut String) {
    match expr {
        Param(_) => {}
        Get(x, _) | Nth(x, _) | Scale(x, _) | Relu(x) => callees(x, registry, out),
        Add(x, y) | Mul(x, y) | MatMul(x, y) => {
            callees(x, registry, out);
            callees(y, registry, out);
        }
        Call(callee, args) => {
            args.iter().for_each(|a| callees(a, registry, out));
            let def = &registry[callee];
            out.push_str(&format!("{def:?}"));
            callees(&def.body, registry, out);
        }
        Dict(entries) => entries.iter().for_each(|(_, e)| callees(e, registry, out)),
    }
}

/// The interpreter.
fn interpret(
    registry: &HashMap<Name, Rc<FunctionDef>>,
    def: &FunctionDef,
    args: &[SheafValue],
) -> Result<SheafValue, Error> {
    let scope: HashMap<&Name, &SheafValue> = def.params.iter().zip(args).collect();
    eval(registry, &def.body, &scope)
}

fn eval(
    registry: &HashMap<Name, Rc<FunctionDef>>,
    expr: &Expr,
    scope: &HashMap<&Name, &SheafValue>,
) -> Result<SheafValue, Error> {
    let tensor = |e: &Expr| match eval(registry, e, scope)? {
        SheafValue::Tensor(t) => Ok::<_, Error>(t),
        other => Err(format!("not a tensor: {other:?}").into()),
    };
    let new = |array: ArrayD<f32>| SheafValue::Tensor(Arc::new(array));
    Ok(match expr {
        Param(name) => (*scope.get(name).ok_or(format!("unbound {name}"))?).clone(),
        Get(dict, key) => match eval(registry, dict, scope)? {
            SheafValue::Dict(entries) => entries.get(key).ok_or(format!("no {key}"))?.clone(),
            other => return Err(format!("get on {other:?}").into()),
        },
        Nth(tuple, i) => match eval(registry, tuple, scope)? {
            SheafValue::Tuple(items) => items.get(*i).ok_or("no such element")?.clone(),
            other => return Err(format!("nth on {other:?}").into()),
        },
        Add(x, y) => new(&*tensor(x)? + &*tensor(y)?),
        Mul(x, y) => new(&*tensor(x)? * &*tensor(y)?),
        Scale(x, k) => match scope.get(k) {
            Some(SheafValue::Int(k)) => new(tensor(x)?.mapv(|v| v * *k as f32)),
            _ => return Err(format!("{k} must be an int").into()),
        },
        MatMul(x, w) => {
            let (x, w) = (tensor(x)?, tensor(w)?);
            let (x, w) = (
                x.view().into_dimensionality::<Ix2>()?,
                w.view().into_dimensionality::<Ix2>()?,
            );
            new(x.dot(&w).into_dyn())
        }
        Relu(x) => new(tensor(x)?.mapv(|v| v.max(0.0))),
        Call(callee, args) => {
            let args = args
                .iter()
                .map(|a| eval(registry, a, scope))
                .collect::<Result<Vec<_>, _>>()?;
            interpret(registry, &registry[callee], &args)?
        }
        Dict(entries) => SheafValue::Dict(
            entries
                .iter()
                .map(|(k, e)| Ok((Rc::clone(k), eval(registry, e, scope)?)))
                .collect::<Result<_, Error>>()?,
        ),
    })
}

// -- Between Sheaf's values and the JIT's. ----------------------------------

/// Tensors shared (no copy), dicts from borrowed keys already in order,
/// static integers baked into the code.
fn to_jit(value: &SheafValue, static_param: bool) -> Value {
    match value {
        SheafValue::Int(n) if static_param => Value::Static(ScalarValue::I64(*n)),
        SheafValue::Int(n) => Value::Scalar(ScalarValue::I64(*n)),
        SheafValue::Tensor(data) => Value::host(Arc::clone(data)),
        SheafValue::Tuple(items) => Value::Tuple(items.iter().map(|v| to_jit(v, false)).collect()),
        SheafValue::Dict(entries) => {
            Value::dict(entries.iter().map(|(k, v)| (&**k, to_jit(v, false))))
        }
    }
}

/// Results back, with the variant's dict keys; every tensor read as f32.
fn from_jit(outputs: Vec<Value>, keys: &ReturnKeys) -> Result<SheafValue, Error> {
    let tensor = |value: &Value| Ok::<_, Error>(SheafValue::Tensor(value.to_f32()?));
    match (keys, &outputs[..]) {
        (Some(keys), [dict]) => Ok(SheafValue::Dict(
            keys.iter()
                .map(|key| {
                    Ok((
                        Name::from(key.as_str()),
                        tensor(dict.get(key).ok_or("key")?)?,
                    ))
                })
                .collect::<Result<_, Error>>()?,
        )),
        (None, [value]) => tensor(value),
        _ => Err(format!("unexpected results {outputs:?}").into()),
    }
}

// -- The lowering: StableHLO from the body, read from the caller's values. --

#[derive(Debug, Clone)]
enum Emitted {
    Tensor { name: String, dims: Vec<i64> },
    Tuple(Vec<Emitted>),
    Dict(BTreeMap<Name, Emitted>),
}

struct Emitter<'a> {
    registry: &'a HashMap<Name, Rc<FunctionDef>>,
    statics: HashMap<Name, i64>,
    lines: Vec<String>,
    params: Vec<String>,
}

fn lower(
    def: &FunctionDef,
    registry: &HashMap<Name, Rc<FunctionDef>>,
    args: &[SheafValue],
    ctx: &LoweringContext<'_>,
) -> Result<Lowered<ReturnKeys>, LoweringError> {
    let mut emitter = Emitter {
        registry,
        statics: HashMap::new(),
        lines: Vec::new(),
        params: Vec::new(),
    };
    let mut scope = HashMap::new();
    for (param, value) in def.params.iter().zip(args) {
        match value {
            SheafValue::Int(n) if def.static_params.contains(param) => {
                emitter.statics.insert(Rc::clone(param), *n);
            }
            other => {
                let bound = emitter.bind(other)?;
                scope.insert(Rc::clone(param), bound);
            }
        }
    }
    let (results, keys) = match emitter.emit(&def.body, &scope)? {
        Emitted::Dict(entries) => (
            entries.values().cloned().collect(),
            Some(entries.keys().map(|k| k.to_string()).collect::<Vec<_>>()),
        ),
        result => (vec![result], None),
    };
    let mut returns = Vec::new();
    for result in results {
        let Emitted::Tensor { name, dims } = result else {
            return Err("the port returns tensors or a dict of them".into());
        };
        returns.push((format!("%{name}"), mlir::tensor_type(DType::F32, &dims)?));
    }
    let (names, types): (Vec<_>, Vec<_>) = returns.into_iter().unzip();
    let mlir = format!(
        "func.func @{}({}) -> ({}) {{\n  {}\n  return {} : {}\n}}",
        ctx.entry_symbol(),
        emitter.params.join(", "),
        types.join(", "),
        emitter.lines.join("\n  "),
        names.join(", "),
        types.join(", ")
    );
    let mut lowered = Lowered::new(mlir).with_metadata(keys.clone());
    if let Some(keys) = keys {
        let mut outputs = LayoutBuilder::new();
        outputs.open(Container::Dict);
        for key in keys {
            outputs.key(key).leaf(Leaf::Tensor);
        }
        let outputs = outputs.close().build();
        lowered =
            lowered.with_outputs(outputs.map_err(|e| LoweringError::with_source("results", e))?);
    }
    Ok(lowered)
}

impl Emitter<'_> {
    fn fresh(&mut self, line: impl FnOnce(&str) -> String) -> String {
        let name = format!("v{}", self.lines.len());
        self.lines.push(line(&name));
        name
    }

    /// Binds an argument to entry parameters, in the runtime's flattening
    /// order (a dict's entries by key: a `BTreeMap`'s order).
    fn bind(&mut self, value: &SheafValue) -> Result<Emitted, LoweringError> {
        Ok(match value {
            SheafValue::Tensor(t) => {
                let (name, dims) = (format!("a{}", self.params.len()), mlir_dims(t.shape()));
                let ty = mlir::tensor_type(DType::F32, &dims)?;
                self.params.push(format!("%{name}: {ty}"));
                Emitted::Tensor { name, dims }
            }
            SheafValue::Tuple(items) => Emitted::Tuple(
                items
                    .iter()
                    .map(|i| self.bind(i))
                    .collect::<Result<_, _>>()?,
            ),
            SheafValue::Dict(entries) => Emitted::Dict(
                entries
                    .iter()
                    .map(|(k, v)| Ok((Rc::clone(k), self.bind(v)?)))
                    .collect::<Result<_, LoweringError>>()?,
            ),
            SheafValue::Int(_) => return Err("the port passes no run-time integers".into()),
        })
    }

    fn emit(
        &mut self,
        expr: &Expr,
        scope: &HashMap<Name, Emitted>,
    ) -> Result<Emitted, LoweringError> {
        let tensor = |this: &mut Self, e: &Expr| match this.emit(e, scope)? {
            Emitted::Tensor { name, dims } => Ok((name, dims)),
            _ => Err(LoweringError::new(
                "a tuple or dict where a tensor is needed",
            )),
        };
        let ty = |dims: &[i64]| mlir::tensor_type(DType::F32, dims);
        let (name, dims) = match expr {
            Param(name) => return Ok(scope.get(name).ok_or("unbound")?.clone()),
            Get(dict, key) => match self.emit(dict, scope)? {
                Emitted::Dict(entries) => return Ok(entries.get(key).ok_or("no key")?.clone()),
                _ => return Err("get on a tensor or tuple".into()),
            },
            Nth(tuple, i) => match self.emit(tuple, scope)? {
                Emitted::Tuple(items) => return Ok(items.get(*i).ok_or("no element")?.clone()),
                _ => return Err("nth on a tensor or dict".into()),
            },
            Add(x, y) | Mul(x, y) => {
                let ((x, xd), (mut y, yd)) = (tensor(self, x)?, tensor(self, y)?);
                let t = ty(&xd)?;
                if yd != xd {
                    // A vector added to each row.
                    if yd.len() != 1 || xd.last() != yd.last() {
                        return Err(format!("shapes {xd:?} and {yd:?} do not combine").into());
                    }
                    let (v, rank) = (ty(&yd)?, xd.len() - 1);
                    y = self.fresh(|o| {
                        format!("%{o} = stablehlo.broadcast_in_dim %{y}, dims = [{rank}] : ({v}) -> {t}")
                    });
                }
                let op = if matches!(expr, Add(..)) {
                    "add"
                } else {
                    "multiply"
                };
                (
                    self.fresh(|o| format!("%{o} = stablehlo.{op} %{x}, %{y} : {t}")),
                    xd,
                )
            }
            Scale(x, k) => {
                let (x, dims) = tensor(self, x)?;
                let (k, t) = (*self.statics.get(k).ok_or("not static")?, ty(&dims)?);
                let c = self.fresh(|o| format!("%{o} = stablehlo.constant dense<{k}.0> : {t}"));
                (
                    self.fresh(|o| format!("%{o} = stablehlo.multiply %{x}, %{c} : {t}")),
                    dims,
                )
            }
            MatMul(x, w) => {
                let ((x, xd), (w, wd)) = (tensor(self, x)?, tensor(self, w)?);
                let dims = vec![xd[0], wd[1]];
                let (tx, tw, t) = (ty(&xd)?, ty(&wd)?, ty(&dims)?);
                let o = self.fresh(|o| {
                    format!("%{o} = stablehlo.dot_general %{x}, %{w}, contracting_dims = [1] x [0] : ({tx}, {tw}) -> {t}")
                });
                (o, dims)
            }
            Relu(x) => {
                let (x, dims) = tensor(self, x)?;
                let t = ty(&dims)?;
                let z = self.fresh(|o| format!("%{o} = stablehlo.constant dense<0.0> : {t}"));
                (
                    self.fresh(|o| format!("%{o} = stablehlo.maximum %{x}, %{z} : {t}")),
                    dims,
                )
            }
            Call(callee, args) => {
                let def = Rc::clone(self.registry.get(callee).ok_or("no such function")?);
                let mut inner = HashMap::new();
                for (param, arg) in def.params.iter().zip(args) {
                    inner.insert(Rc::clone(param), self.emit(arg, scope)?);
                }
                return self.emit(&def.body, &inner);
            }
            Dict(entries) => {
                return Ok(Emitted::Dict(
                    entries
                        .iter()
                        .map(|(k, e)| Ok((Rc::clone(k), self.emit(e, scope)?)))
                        .collect::<Result<_, LoweringError>>()?,
                ))
            }
        };
        Ok(Emitted::Tensor { name, dims })
    }
}

fn mlir_dims(shape: &[usize]) -> Vec<i64> {
    shape.iter().map(|&d| d as i64).collect()
}

// -- The run. ---------------------------------------------------------------

fn data(shape: &[usize], seed: usize) -> SheafValue {
    let n: usize = shape.iter().product();
    let values = (0..n).map(|i| ((i * 7 + seed * 3) % 11) as f32 / 5.0 - 1.0);
    SheafValue::Tensor(Arc::new(
        ArrayD::from_shape_vec(IxDyn(shape), values.collect()).unwrap(),
    ))
}

fn assert_close(a: &SheafValue, b: &SheafValue, what: &str) {
    match (a, b) {
        (SheafValue::Dict(a), SheafValue::Dict(b)) => {
            assert!(a.keys().eq(b.keys()), "{what}: keys");
            a.iter()
                .for_each(|(k, v)| assert_close(v, &b[k], &format!("{what}.{k}")));
        }
        (SheafValue::Tensor(a), SheafValue::Tensor(b)) => {
            assert_eq!(a.shape(), b.shape(), "{what}: shape");
            let close = a
                .iter()
                .zip(b.iter())
                .all(|(x, y)| (x - y).abs() <= 1e-4 * y.abs().max(1.0));
            assert!(close, "{what}: {a} vs {b}");
        }
        _ => panic!("{what}: {a:?} vs {b:?}"),
    }
}

/// The program: defines its functions and calls each a few times, checking
/// every result against the interpreter; returns how many calls ran.
fn program(env: &mut Env) -> Result<usize, Error> {
    let b = Box::new;
    let dense = Relu(b(Add(
        b(MatMul(param("x"), b(Get(param("p"), "w".into())))),
        b(Get(param("p"), "b".into())),
    )));
    env.define(def("dense", &["p", "x"], &[], dense));
    let step = Dict(vec![
        (
            "y".into(),
            Call("dense".into(), vec![Param("p".into()), Param("x".into())]),
        ),
        ("scaled".into(), Scale(param("x"), "k".into())),
    ]);
    env.define(def("step", &["p", "x", "k"], &["k"], step));
    env.define(def(
        "sum_pair",
        &["t"],
        &[],
        Add(b(Nth(param("t"), 0)), b(Nth(param("t"), 1))),
    ));
    env.define(def("act", &["x"], &[], Relu(param("x"))));
    env.define(def(
        "outer",
        &["x"],
        &[],
        Add(b(Call("act".into(), vec![Param("x".into())])), param("x")),
    ));

    let weights = SheafValue::Dict(BTreeMap::from([
        ("w".into(), data(&[16, 8], 1)),
        ("b".into(), data(&[8], 2)),
    ]));
    let pair = SheafValue::Tuple(vec![data(&[2, 3], 7), data(&[2, 3], 8)]);
    let mut calls: Vec<(&str, Vec<SheafValue>)> = Vec::new();
    for round in 0..3 {
        for k in [2, 3] {
            let x = data(&[4, 16], 10 + round);
            calls.push(("step", vec![weights.clone(), x, SheafValue::Int(k)]));
        }
        calls.push(("sum_pair", vec![pair.clone()]));
        calls.push(("outer", vec![data(&[3, 3], 5)]));
    }
    for (round, (name, args)) in calls.iter().enumerate() {
        if round == calls.len() / 3 {
            // Let the background compiles of the first round land.
            assert!(
                env.jit.wait_for_compiles(Duration::from_secs(120)),
                "compiles stuck"
            );
        }
        let result = env.eval_call(name, args)?;
        let expected = interpret(&env.registry, &env.registry[*name], args)?;
        assert_close(&result, &expected, name);
    }
    Ok(calls.len())
}

impl Env {
    fn define(&mut self, def: FunctionDef) {
        self.registry.insert(Rc::clone(&def.name), Rc::new(def));
    }
}

fn env(jit: JitRuntime) -> Env {
    let blocking = vec![Name::from("step")];
    Env {
        registry: HashMap::new(),
        jit,
        functions: HashMap::new(),
        blocking,
    }
}

/// A process with only the bundle: no compiler, no disk cache; it prints
/// its profile at exit when `SHEAF_JIT_PROFILE=1` (Sheaf's `--jit-profile`).
fn serve_bundle(bundle: &str) -> Result<(), Error> {
    let jit = JitRuntime::new(
        JitConfig::builder()
            .apply_env()?
            .artifact_bundle(bundle)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .compile(|compile| compile.compiler = CompilerPreference::Disabled)
            .build()?,
    )?;
    let mut env = env(jit.clone());
    let calls = program(&mut env)?;
    let profile = jit.profile();
    assert_eq!(profile.phase(Phase::Lower).count, 0, "no lowering");
    assert_eq!(
        profile.loaded_from(ArtifactSource::Compiler),
        0,
        "no compile"
    );
    assert_eq!(
        jit.stats().total.fallback_calls,
        0,
        "{calls} calls, all compiled"
    );
    println!("sheaf_port (bundle only): {calls} calls compiled from the first, 0 lowerings");
    Ok(())
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, bundle] = &args[..] {
        assert_eq!(flag, "--serve-bundle");
        return serve_bundle(bundle);
    }
    let cache = tempfile::tempdir()?;
    let jit = JitRuntime::new(
        JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::project(cache.path()))
            .compile(|compile| compile.mode = CompileMode::Background)
            .build()?,
    )?;
    let before = jit.memory_statistics()?;
    let mut env = env(jit.clone());
    let calls = program(&mut env)?;
    // The redefined callee makes `outer` a new function.
    let x = data(&[3, 3], 5);
    let first = env.eval_call("outer", std::slice::from_ref(&x))?;
    env.define(def("act", &["x"], &[], Mul(param("x"), param("x"))));
    let again = env.eval_call("outer", std::slice::from_ref(&x))?;
    assert_ne!(first, again, "the redefined callee is used");

    let stats = jit.stats();
    let memory = jit.memory_statistics()?;
    println!(
        "sheaf_port: {calls} calls, {} compiles ({} interpreted while compiling); device memory \
         {} B in use ({} B before), peak {} B",
        stats.total.compiles,
        stats.total.fallback_calls,
        memory[0].1.device_bytes_in_use,
        before[0].1.device_bytes_in_use,
        memory[0].1.device_bytes_peak,
    );
    assert!(
        memory[0].1.device_bytes_peak > 0,
        "the calls used device memory"
    );

    let bundle = cache.path().join("bundle");
    let exported = jit.export_artifacts(&bundle)?;
    println!(
        "exported {} variants in {} artifacts",
        exported.variants, exported.artifacts
    );
    let served = // Runs itself again like the tests' children (through qemu-user under
    // `cargo xtask test --aarch64`).
    test_support::child::command(std::env::current_exe()?)
        .args(["--serve-bundle".as_ref(), bundle.as_os_str()])
        .env("SHEAF_JIT_PROFILE", "1")
        .output()?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&served.stdout),
        String::from_utf8_lossy(&served.stderr),
    );
    print!("{stdout}");
    assert!(
        served.status.success(),
        "the bundle-only process failed: {stderr}"
    );
    assert!(
        stderr.contains("JIT profile") && stderr.contains("compiler 0;"),
        "{stderr}"
    );
    println!("sheaf_port: every compiled result matched the interpreter");
    Ok(())
}
