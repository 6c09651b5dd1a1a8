//! What the cache logs, outside its lock: misses and what they do, compile
//! results, evictions (whose executables are dropped here), mode changes.

use std::fmt;
use std::sync::Arc;

use crate::byte_size::ByteSize;
use crate::config::CacheConfig;
use crate::dispatch::{Dispatch, FallbackReason, Origin};
use crate::error::ErrorChain;
use crate::explain::MissReason;
use crate::failures::NEVER;
use crate::function_cache::Evicted;
use crate::function_id::FunctionId;
use crate::signature::Signature;
use crate::state::{Caller, CompileReport, Finished, Miss, MissAction, NotCached, Note, Started};
use crate::wait_rule::Estimates;

use super::{Executable, JitCache};

pub(super) fn hit<E>(func: &FunctionId, exe: Arc<E>, notes: Vec<Note>) -> Dispatch<E> {
    log_notes(func, notes);
    Dispatch::Compiled {
        exe,
        origin: Origin::Hit,
    }
}

/// Logs a compile's result (the compile of `report.sig` for a miss
/// explained by `miss`), and that its shape class stays static when a
/// compile of dynamic dims failed.
pub(super) fn log_compiled<E>(
    func: &FunctionId,
    report: &CompileReport<'_, E>,
    miss: &MissReason,
    static_again: bool,
    config: &CacheConfig,
) {
    let sig = report.sig;
    let elapsed = report.elapsed;
    match report.result {
        Ok((_, bytes)) => tracing::debug!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            "{func}: {} {sig} in {elapsed:.1?} ({})",
            if report.fetched { "fetched ready-made" } else { "compiled" },
            ByteSize::from(*bytes)
        ),
        // The lowering's verdict on a call (its dims do not fit, say):
        // the caller's interpreter reports it; the cache only notes it.
        // A call refused as itself is remembered by its own signature.
        Err(error) if error.is_refusal() => {
            let sig = match report.call {
                Some(call) if error.is_call_refusal() => call,
                _ => sig,
            };
            tracing::debug!(
                target: crate::log_targets::RECOMPILES,
                function = %func,
                signature = %sig,
                "{func}: {sig} not compiled: {}. Calls with this signature run in the \
                 interpreter {}",
                ErrorChain(&**error),
                RetryAfter(config.failed_compile_retry_after)
            )
        }
        Err(error) if matches!(miss, MissReason::HotSize { .. }) => tracing::warn!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            setting = "CacheConfig::specialize_hot_sizes",
            "{func}: compiling {sig}, a hot size, failed: {}. The variant with dynamic dims \
             keeps serving it; it is not tried again {}",
            ErrorChain(&**error),
            RetryAfter(config.failed_compile_retry_after)
        ),
        Err(error) => tracing::warn!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            setting = "CacheConfig::failed_compile_retry_after",
            "{func}: compiling {sig} failed: {}. Calls with this signature run in the \
             interpreter {}",
            ErrorChain(&**error),
            RetryAfter(config.failed_compile_retry_after)
        ),
    }
    if static_again {
        tracing::warn!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            setting = "CacheConfig::static_shape_functions",
            "{func}: its dims stay static: the variant with dynamic dims {sig} failed to \
             compile, so later misses like it compile their own shapes. Add `{}` to \
             CacheConfig::static_shape_functions to skip the attempt",
            func.name()
        );
    }
}

/// How long a failed signature is interpreted, in words.
struct RetryAfter(u64);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            NEVER => f.write_str(
                "until JitCache::clear_failures; it is not retried \
                 (CacheConfig::failed_compile_retry_after is u64::MAX)",
            ),
            calls => write!(
                f,
                "for the next {calls} calls (CacheConfig::failed_compile_retry_after) or until \
                 JitCache::clear_failures"
            ),
        }
    }
}

/// Logs what became of a successful compile of `bytes` bytes, releases the
/// entries it evicted and logs the mode changes they caused.
pub(super) fn report_finished<E>(
    func: &FunctionId,
    sig: &Signature,
    bytes: usize,
    finished: Finished<E>,
    config: &CacheConfig,
) {
    match finished.not_cached {
        Some(NotCached::FunctionEvicted) => tracing::debug!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            "{func}: compiled {sig} after the function was evicted; not cached"
        ),
        Some(NotCached::TooLarge) => tracing::warn!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %sig,
            setting = "CacheConfig::max_total_bytes",
            "{func}: the executable for {sig} ({}) exceeds CacheConfig::max_total_bytes ({}); \
             it is not cached. Raise CacheConfig::max_total_bytes",
            ByteSize::from(bytes),
            ByteSize::from(config.max_total_bytes)
        ),
        None => {}
    }
    release(finished.evicted);
    log_finished_notes(finished.notes);
}

pub(super) fn log_finished_notes(notes: Vec<(FunctionId, Note)>) {
    for (func, note) in notes {
        note.change.log(&func, note.last_miss.as_ref());
    }
}

/// Logs and drops evicted entries (outside the lock); returns how many.
pub(super) fn release<E>(evicted: Vec<(FunctionId, Evicted<E>)>) -> usize {
    let n = evicted.len();
    for (func, e) in evicted {
        tracing::debug!(
            target: crate::log_targets::RECOMPILES,
            function = %func,
            signature = %e.sig,
            "{func}: evicted {} ({}, {})",
            e.sig,
            ByteSize::from(e.bytes),
            e.cause
        );
        // The cache's reference goes now; the executable is freed unless a
        // running call still holds it.
        drop(e.exe);
    }
    n
}

impl<E: Executable> Miss<E> {
    /// Logs the miss and the mode changes it noted, and hands what the
    /// policy learned to `cache`'s memory; returns why it missed, what the
    /// call does, and what a queueing call weighs to wait.
    pub(super) fn logged(
        self,
        cache: &JitCache<E>,
        func: &FunctionId,
        sig: &Signature,
    ) -> (MissReason, MissAction<E>, Option<Estimates>) {
        let Miss {
            number,
            reason,
            action,
            notes,
            estimates,
            learned,
        } = self;
        log_miss(func, sig, number, &reason, &action, estimates.is_some());
        log_notes(func, notes);
        cache.keep(learned.map(|learned| (func.clone(), learned)));
        (reason, action, estimates)
    }
}

fn log_notes(func: &FunctionId, notes: Vec<Note>) {
    for note in notes {
        note.change.log(func, note.last_miss.as_ref());
    }
}

fn log_miss<E>(
    func: &FunctionId,
    sig: &Signature,
    number: u64,
    reason: &MissReason,
    action: &MissAction<E>,
    may_wait: bool,
) {
    if !crate::log_targets::recompiles_debug_shown() {
        return;
    }
    let action = match action {
        MissAction::Compile {
            generalization: Some(generalization),
            started,
            ..
        } => {
            let verb = match (started.caller, may_wait) {
                (Caller::Background, false) => {
                    "queue the compile of dynamic dims, interpret meanwhile"
                }
                (Caller::Background, true) => "queue the compile of dynamic dims",
                (Caller::Blocking, _) => "compile dynamic dims",
            };
            match started.admitted {
                Some(admit) => format!("{verb} ({generalization}; admitted at capacity: {admit})"),
                None => format!("{verb} ({generalization})"),
            }
        }
        MissAction::Compile {
            started:
                Started {
                    admitted: Some(admit),
                    ..
                },
            ..
        } => format!("compile (admitted at capacity: {admit})"),
        MissAction::Compile {
            started:
                Started {
                    caller: Caller::Background,
                    ..
                },
            ..
        } if !may_wait => "queue the compile, interpret meanwhile".to_owned(),
        MissAction::Compile {
            started:
                Started {
                    caller: Caller::Background,
                    ..
                },
            ..
        } => "queue the compile".to_owned(),
        MissAction::Compile { .. } => "compile".to_owned(),
        MissAction::Wait { .. } if may_wait => {
            "wait for the compile in flight if interpreting takes longer".to_owned()
        }
        MissAction::Wait { .. } => "wait for the compile in flight".to_owned(),
        MissAction::Interpret(FallbackReason::NotAdmitted { refusal, .. }) => {
            format!("interpret (not admitted at capacity: {refusal})")
        }
        MissAction::Interpret(FallbackReason::Thrashing {
            remaining_cool_down,
            ..
        }) => format!("interpret (thrashing, compiling resumes in {remaining_cool_down} calls)"),
        MissAction::Interpret(
            FallbackReason::CompileFailed(_)
            | FallbackReason::CompileQueued
            | FallbackReason::CompileQueueFull,
        ) => "interpret".to_owned(),
        MissAction::Interpret(FallbackReason::CompileInFlight) => {
            "interpret while another call compiles".to_owned()
        }
    };
    tracing::debug!(
        target: crate::log_targets::RECOMPILES,
        function = %func,
        signature = %sig,
        "{func}: miss #{number} ({reason}) -> {action}"
    );
}
