//! The `legacy` mode: Sheaf's original JIT, reproduced (over
//! [`LegacySession`], a runtime per artifact).
//!
//! One compiled slot per function, keyed by argument shapes only; on a
//! mismatch the slot is recompiled into a brand-new runtime (instance +
//! device + session) pushed onto a list that is never purged. Compiled bytes
//! are reused across recompiles to keep the run short, but each recompile
//! still builds and keeps a new runtime, exactly like the old code.

use std::collections::HashMap;
use std::sync::Arc;

use iree_safe::compiler::{self, Compiler};
use sheaf_demos::legacy::LegacySession;
use sheaf_integration::lowering::Signature;
use sheaf_integration::{reference, CapturedScalar, DType, JitConfig, JitFunction};

use crate::args::Args;
use crate::workload::{self, Record, Recorder};

/// A function's one slot: the shapes it was compiled for and its runtime.
struct Slot {
    shapes: Vec<Vec<usize>>,
    session: usize,
}

/// One f32 argument: its shape and its data.
pub(crate) type Input<'a> = (&'a [usize], &'a [f32]);

pub(crate) struct Legacy {
    driver: String,
    compiler: Arc<dyn Compiler>,
    options: compiler::CompileOptions,
    /// Bytes compiled so far, by (function, shape, captured scalars).
    artifacts: HashMap<String, Vec<u8>>,
    /// Every runtime ever built; never purged (the leak).
    sessions: Vec<LegacySession>,
    slots: HashMap<String, Slot>,
}

impl Legacy {
    /// A legacy JIT running on `driver`.
    pub(crate) fn new(driver: &str) -> anyhow::Result<Legacy> {
        let auto = compiler::CompilerPreference::Auto;
        let mut options = JitConfig::default().compile.options;
        // Code for this process, whichever machine the compiler runs on.
        options.target = compiler::CompileTarget::process_cpu(&auto);
        Ok(Legacy {
            driver: driver.to_owned(),
            compiler: compiler::choose_compiler(auto)?.compiler,
            options,
            artifacts: HashMap::new(),
            sessions: Vec::new(),
            slots: HashMap::new(),
        })
    }

    /// Runtimes built so far (all alive).
    pub(crate) fn runtimes(&self) -> u64 {
        self.sessions.len() as u64
    }

    /// Distinct signatures compiled so far.
    pub(crate) fn compiles(&self) -> u64 {
        self.artifacts.len() as u64
    }

    /// Calls `function` the old way; returns its f32 output.
    pub(crate) fn call(
        &mut self,
        function: &JitFunction,
        inputs: &[Input<'_>],
        captured: &[CapturedScalar],
    ) -> anyhow::Result<Vec<f32>> {
        let name = function.name().to_owned();
        let shapes: Vec<Vec<usize>> = inputs.iter().map(|(shape, _)| shape.to_vec()).collect();
        let slot_shapes = self.slots.get(&name).map(|slot| slot.shapes.clone());
        if slot_shapes.as_ref() != Some(&shapes) {
            let bytes = self.artifact(function, &shapes, captured)?;
            let session = LegacySession::new(&self.driver, &bytes)?;
            self.sessions.push(session);
            let index = self.sessions.len() - 1;
            self.slots.insert(
                name.clone(),
                Slot {
                    shapes: shapes.clone(),
                    session: index,
                },
            );
            tracing::debug!(
                target: "sheaf_jit::recompiles",
                "legacy {name}{shapes:?}: {} -> compile -> runtime #{index} ({} orphaned)",
                match &slot_shapes {
                    None => "slot empty".to_owned(),
                    Some(old) => format!("shape mismatch with slot {old:?}"),
                },
                self.sessions.len() - self.slots.len(),
            );
        }
        let session = self.slots[&name].session;
        self.sessions[session].call_f32(&format!("{name}.{}", function.entry_symbol()), inputs)
    }

    /// Compiled bytes for this key, compiling on first use.
    fn artifact(
        &mut self,
        function: &JitFunction,
        shapes: &[Vec<usize>],
        captured: &[CapturedScalar],
    ) -> anyhow::Result<Vec<u8>> {
        let mut builder = Signature::builder();
        for shape in shapes {
            let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
            builder.arg(DType::F32, &dims);
        }
        for scalar in captured {
            builder.captured(scalar.clone());
        }
        let signature = builder.build();
        let key = format!("{}{signature}", function.name());
        if let Some(bytes) = self.artifacts.get(&key) {
            return Ok(bytes.clone());
        }
        let mlir = function.module_text(&signature)?;
        let bytes = self.compiler.compile(&mlir, &self.options)?.into_bytes();
        self.artifacts.insert(key, bytes.clone());
        Ok(bytes)
    }
}

pub(crate) fn run(args: &Args, emit: &mut dyn FnMut(&Record)) -> anyhow::Result<()> {
    let mut legacy = Legacy::new(&args.driver)?;
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let mut recorder = Recorder::new("legacy", &args.checkpoints, emit);
    let mut stale = 0;
    for i in 0..args.max_iters() {
        if workload::rss_bytes() > args.ceiling_bytes {
            let runtimes = legacy.runtimes();
            recorder.stopped(i, runtimes, runtimes, stale);
            eprintln!(
                "[pingpong] legacy mode stopped after {i} iterations: RSS passed the {} MiB ceiling with {runtimes} runtimes alive",
                args.ceiling_bytes >> 20
            );
            return Ok(());
        }
        let x = workload::sigmoid_input(i);
        let y = legacy.call(&sigmoid, &[(x.shape(), workload::data(&x))], &[])?;
        if i == 0 {
            recorder.first_result(legacy.runtimes());
        }
        let expected = workload::expected_sigmoid(x)?;
        stale += u64::from(!workload::matches(&y, &expected));

        let (x, t) = workload::softmax_input(i);
        let captured = [reference::temperature(t)];
        let y = legacy.call(&softmax, &[(x.shape(), workload::data(&x))], &captured)?;
        let expected = workload::expected_softmax(x, t)?;
        stale += u64::from(!workload::matches(&y, &expected));

        let runtimes = legacy.runtimes();
        recorder.after(i + 1, runtimes, runtimes, stale);
    }
    Ok(())
}
