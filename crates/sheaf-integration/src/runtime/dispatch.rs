//! The call path: flatten the arguments, look the signature up, run the
//! variant (or say why the caller must interpret), and the uploads of host
//! arguments on the way.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jit_cache::{CapturedScalar, CompileFailure, Dispatch, FallbackReason, Prepared, Provenance};
use smallvec::SmallVec;

use crate::compile::function::JitFunction;
use crate::compile::lowering::{Lowered, LoweringContext};
use crate::compile::variant::Variant;
use crate::config::CompileMode;
use crate::error::{JitError, LoweringError};
use crate::outcome::{CallError, CallResult, Compiled, Dispatched};
use crate::placement::CpuFallback;
use crate::profile::Phase;
use crate::tensor::{scalar_to_device, DeviceTensor, HostTensor, Tensor};
use crate::upload::UploadCache;
use crate::value::{self, FlatArg, Value};

use super::JitRuntime;

impl JitRuntime {
    /// Runs `function` on `args` compiled, or says why the caller must run
    /// it in its own interpreter; the function's own lowering lowers a new
    /// signature (see [`dispatch_with`](Self::dispatch_with), which this
    /// is with that lowering).
    ///
    /// # Errors
    ///
    /// Those of [`dispatch_with`](Self::dispatch_with), and
    /// [`JitError::Unsupported`] for a function
    /// [lowered per call](JitFunction::lowered_per_call).
    pub fn dispatch<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
    ) -> Result<Dispatched<M>, JitError> {
        let lower = function.lowering().ok_or_else(|| {
            JitError::Unsupported(format!(
                "`{}` is lowered per call: call it with `dispatch_with` and its lowering",
                function.name()
            ))
        })?;
        self.dispatch_with(function, args, captured, lower)
    }

    /// Runs `function` on `args` compiled, or says why the caller must run
    /// it in its own interpreter; `lower` lowers the signature to compile
    /// when the call misses.
    ///
    /// The call's signature (dtypes and dims, static scalars and structure
    /// of `args`, and the `captured` scalars baked into the code) finds
    /// compiled code in the cache. A miss the cache decides to compile
    /// (not at capacity, no remembered failure) first looks in the artifact
    /// bundles by the function's name, definition hash and signature (no
    /// lowering), then runs `lower` **on this thread** — it may borrow the
    /// caller's state, `Send` or not: only the MLIR text and the metadata
    /// cross to a compile thread — then loads the artifact from the disk
    /// cache (on this thread, so the call runs it, in either mode), or
    /// fetches it from the remote cache or compiles it: at once in
    /// [`CompileMode::Blocking`], on a compile thread in
    /// [`CompileMode::Background`] (the function's
    /// [mode](JitFunction::with_compile_mode), else the runtime's) while
    /// this call is interpreted, unless interpreting the function is
    /// expected to take longer than the compile (see
    /// [`report_interpreted`](Self::report_interpreted)). A hit runs `lower`
    /// not at all and copies nothing.
    ///
    /// A lowering's refusal is the signature's failure (remembered like a
    /// failed compile, counted in [`CacheStats`](crate::stats::CacheStats)' `refusals`): the call is
    /// interpreted ([`FallbackReason::CompileFailed`]). Errors of compiled
    /// code (a shape the artifact rejects) are errors, never a silent
    /// fallback.
    ///
    /// `lower` runs at most twice per miss: when the call's dims make a dim
    /// of a function [with dynamic dims](JitFunction::with_dynamic_dims)
    /// vary, it lowers the call's own signature first (a call whose dims do
    /// not fit together is refused as itself, and never widens the
    /// function), then the signature with that dim dynamic.
    ///
    /// ```no_run
    /// use std::rc::Rc;
    /// use sheaf_integration::lowering::Lowered;
    /// use sheaf_integration::{mlir, Dispatched, JitConfig, JitFunction, JitRuntime, Value};
    ///
    /// // The caller's IR: not `Send` (an `Rc`), never handed to the runtime.
    /// let op: Rc<str> = Rc::from("add");
    /// let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// let double: JitFunction = JitFunction::lowered_per_call("double", 1);
    /// let x = Value::host(ndarray::ArrayD::<f32>::ones(ndarray::IxDyn(&[4])));
    /// let outcome = jit.dispatch_with(&double, &[x], &[], |ctx| {
    ///     let ty = mlir::arg_type(&ctx.args()[0])?;
    ///     Ok(Lowered::new(format!(
    ///         "func.func @{}(%x: {ty}) -> {ty} {{ %y = stablehlo.{op} %x, %x : {ty} return %y : {ty} }}",
    ///         ctx.entry_symbol()
    ///     )))
    /// })?;
    /// if let Dispatched::Compiled(compiled) = outcome {
    ///     println!("{:?}", compiled.outputs[0].to_host()?);
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`JitError::Unsupported`] for arguments the cache key cannot describe
    /// (see [`Value::call_signature`]) and for results of compiled code that
    /// are not tensors, and [`JitError::Runtime`] when the compiled code or the
    /// copy of an argument to the device fails. A failed compile is not an
    /// error: the call is interpreted ([`FallbackReason::CompileFailed`]).
    pub fn dispatch_with<M: Send + Sync + 'static>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
        mut lower: impl FnMut(&LoweringContext<'_>) -> Result<Lowered<M>, LoweringError>,
    ) -> Result<Dispatched<M>, JitError> {
        let inner = &*self.inner;
        let start = inner.profile.call_clock();
        // Disabled (the default), the span costs a check of its callsite's
        // interest, and its fields are never formatted: `trace_span!` alone
        // would hand them to the `log` crate on every call while no
        // `tracing` subscriber is set (tracing's `log` feature, which a
        // dependency turns on).
        let span = if tracing::enabled!(target: crate::log_targets::CALL, tracing::Level::TRACE) {
            tracing::trace_span!(
                target: crate::log_targets::CALL,
                "call",
                function = function.name(),
                signature = tracing::field::Empty,
                outcome = tracing::field::Empty,
            )
        } else {
            tracing::Span::none()
        };
        let _entered = span.enter();
        let (signature, flat) = value::flatten_call(args, captured)?;
        if !span.is_disabled() {
            span.record("signature", tracing::field::display(&signature));
        }
        // When this call prepared a compile: its lowering and compile are
        // recorded as such, the lookup up to then as the lookup.
        let mut missed_at = None;
        let dispatch = match function.compile_mode().unwrap_or(inner.compile_mode) {
            CompileMode::Blocking => {
                inner
                    .cache
                    .get_or_compile(function.id(), &signature, |target| {
                        missed_at = inner.profile.call_clock();
                        if let Some(variant) = inner.served_by_bundle(function, target, &signature)
                        {
                            return Ok(variant);
                        }
                        inner.vet(function, &mut lower, (target, &signature), args)?;
                        inner.compile(&inner.lower(function, &mut lower, target, args)?)
                    })
            }
            CompileMode::Background => {
                inner
                    .cache
                    .get_or_queue(function.id(), &signature, |target| {
                        missed_at = inner.profile.call_clock();
                        if let Some(variant) = inner.served_by_bundle(function, target, &signature)
                        {
                            return Ok(Prepared::Ready(variant));
                        }
                        inner.vet(function, &mut lower, (target, &signature), args)?;
                        let mut lowering = inner.lower(function, &mut lower, target, args)?;
                        // An artifact on disk is loaded here: the call runs
                        // it rather than the interpreter.
                        let placement = inner.placement_for(&lowering.module);
                        if let Some(variant) = inner.pipeline.local(&mut lowering, placement) {
                            inner.profile.count_source(variant.source);
                            return Ok(Prepared::Ready(variant));
                        }
                        // The pool holds the runtime weakly: dropping the
                        // last handle withdraws the queued compiles.
                        let runtime = Arc::downgrade(&self.inner);
                        let ticket = inner.queued.push(lowering);
                        Ok(Prepared::Queue(move || {
                            let inner = runtime.upgrade().ok_or(CompileFailure::Abandoned)?;
                            ticket.compile(|lowerings| inner.compile_together(lowerings))
                        }))
                    })
            }
        };
        let looked_up = inner.profile.call_clock();
        inner
            .profile
            .record_call_phase(Phase::KeyLookup, start, missed_at.or(looked_up));
        let outcome = match dispatch {
            Dispatch::Compiled { exe, origin } => {
                let outputs = self.run(&exe, &flat, looked_up)?;
                Dispatched::Compiled(Compiled::new(outputs, Provenance::Compiled(origin), exe)?)
            }
            Dispatch::Interpret { reason } => Dispatched::Interpret(reason),
        };
        if !span.is_disabled() {
            let described = match &outcome {
                Dispatched::Compiled(compiled) => format!("compiled ({:?})", compiled.provenance),
                Dispatched::Interpret(reason) => format!("interpret ({reason:?})"),
            };
            span.record("outcome", described);
        }
        Ok(outcome)
    }

    /// Tells the runtime how long interpreting a call of `function` took,
    /// after [`dispatch`](Self::dispatch) said to interpret it
    /// ([`call`](Self::call) does it itself). In
    /// [`CompileMode::Background`], a later miss of the function whose
    /// compile is expected to finish sooner than an interpreted call would
    /// waits for the compile instead of interpreting (see
    /// [`jit_cache::JitCache::get_or_queue`] for the estimate).
    pub fn report_interpreted<M>(&self, function: &JitFunction<M>, took: Duration) {
        self.inner.profile.record(Phase::Interpret, took);
        self.inner.cache.report_interpreted(function.id(), took);
    }

    /// [`dispatch`](Self::dispatch), running `interpret` when the call must
    /// be interpreted: it receives the arguments with every device tensor
    /// copied to the host, the captured scalars, and the reason. `interpret`
    /// may borrow the caller's interpreter state mutably; its time is
    /// reported ([`report_interpreted`](Self::report_interpreted)).
    ///
    /// # Errors
    ///
    /// [`CallError::Jit`] with the errors of [`dispatch`](Self::dispatch) (or
    /// of copying an argument to the host), and [`CallError::Interpreter`]
    /// with `interpret`'s error.
    pub fn call<M: Send + Sync + 'static, E>(
        &self,
        function: &JitFunction<M>,
        args: &[Value],
        captured: &[CapturedScalar],
        interpret: impl FnOnce(&[Value], &[CapturedScalar], &FallbackReason) -> Result<Vec<Value>, E>,
    ) -> Result<CallResult<M>, CallError<E>> {
        match self.dispatch(function, args, captured)? {
            Dispatched::Compiled(compiled) => Ok(CallResult::compiled(compiled)),
            Dispatched::Interpret(fallback) => {
                let start = Instant::now();
                let host_args = args
                    .iter()
                    .cloned()
                    .map(Value::into_host_value)
                    .collect::<Result<Vec<_>, _>>()?;
                let outputs = interpret(&host_args, captured, &fallback).map_err(|source| {
                    CallError::Interpreter {
                        function: function.name().to_owned(),
                        fallback: fallback.clone(),
                        source,
                    }
                })?;
                self.report_interpreted(function, start.elapsed());
                Ok(CallResult::interpreted(outputs, fallback))
            }
        }
    }

    /// Copies `host` to the device compiled code runs on, through the upload
    /// cache (a host array passed again later is not copied again).
    ///
    /// # Errors
    ///
    /// As [`HostTensor::to_device`].
    pub fn upload(&self, host: &HostTensor) -> Result<DeviceTensor, JitError> {
        self.inner.primary_uploads.upload(host)
    }

    /// Runs compiled code; `start` is when the cache lookup ended (`None`
    /// when the runtime does not time calls).
    fn run(
        &self,
        variant: &Variant,
        flat: &[FlatArg<'_>],
        start: Option<Instant>,
    ) -> Result<Vec<Value>, JitError> {
        let profile = &self.inner.profile;
        let device = variant.entry.module().runtime().device();
        let uploads = self.uploads_for(device)?;
        // A device tensor of this device is passed as it is (borrowed);
        // what the call makes (an upload, a scalar's tensor) lives here.
        let inputs = flat
            .iter()
            .map(|arg| -> Result<Cow<'_, iree_safe::Tensor>, JitError> {
                Ok(match arg {
                    FlatArg::Tensor(Tensor::Device(tensor))
                        if tensor.device().shares_memory_with(device) =>
                    {
                        Cow::Borrowed(tensor)
                    }
                    // Another device's tensor (the CPU fallback's, say) goes
                    // through the host.
                    FlatArg::Tensor(Tensor::Device(tensor)) => {
                        Cow::Owned(HostTensor::from_device(tensor)?.to_device(device)?)
                    }
                    FlatArg::Tensor(Tensor::Host(host)) => Cow::Owned(uploads.upload(host)?),
                    FlatArg::Scalar(scalar) => Cow::Owned(scalar_to_device(device, *scalar)?),
                })
            })
            .collect::<Result<SmallVec<[_; 4]>, _>>()?;
        let start = if inputs.iter().any(|input| matches!(input, Cow::Owned(_))) {
            let now = profile.call_clock();
            profile.record_call_phase(Phase::InputTransfer, start, now);
            now
        } else {
            start
        };
        let borrowed: SmallVec<[&iree_safe::Tensor; 4]> = inputs.iter().map(|x| &**x).collect();
        let results = variant.entry.call_borrowed(&borrowed)?;
        // One pass, one vector: the results as values, which are the
        // call's outputs as they are unless the lowering declared a
        // structure.
        let values = results
            .map(|result| match result? {
                iree_safe::VmValue::Tensor(tensor) => Ok(Value::Tensor(Tensor::Device(tensor))),
                other => Err(JitError::Unsupported(format!(
                    "compiled code returned a {} where results are tensors (return 0-d tensors)",
                    other.describe()
                ))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        profile.record_call_phase(Phase::Call, start, profile.call_clock());
        value::restore(values, variant.outputs.as_ref())
    }

    /// The upload cache of `device`: the primary one (also for the device
    /// beside it, which takes the primary's tensors), or the CPU
    /// fallback's.
    fn uploads_for(&self, device: &iree_safe::Device) -> Result<&UploadCache, JitError> {
        let inner = &*self.inner;
        if device.shares_memory_with(inner.primary.device()) {
            return Ok(&inner.primary_uploads);
        }
        match inner.cpu.as_ref().and_then(CpuFallback::opened) {
            Some(cpu) => Ok(inner
                .cpu_uploads
                .get_or_init(|| UploadCache::new(cpu.device().clone(), inner.upload_settings))),
            None => Err(JitError::Internal(format!(
                "a variant runs on `{}`, which this runtime did not open",
                device.uri()
            ))),
        }
    }
}
