//! The state's decisions, driven call by call with explicit instants: no
//! compile runs, no thread, no clock read (the tests run under miri).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{CacheState, Caller, CompileId, CompileReport, MissAction, Progress, Started, Step};
use crate::config::{CacheConfig, CachePolicy};
use crate::dispatch::FallbackReason;
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::function_id::FunctionId;
use crate::signature::Signature;
use crate::DType;

type State = CacheState<u32>;

fn sig(n: i64) -> Signature {
    Signature::builder().arg(DType::F32, &[n]).build()
}

fn config() -> CacheConfig {
    CacheConfig {
        dynamic_dims: false,
        ..CacheConfig::default()
    }
}

/// Calls `func` with `sig` at `now`; the state's decision.
fn call(
    state: &mut State,
    config: &CacheConfig,
    func: &FunctionId,
    sig: &Signature,
    (caller, now): (Caller, Instant),
) -> Step<u32> {
    state
        .begin_call_at(func, sig, config, caller, Some(now))
        .expect("the cache does not remember")
}

/// The action of a miss; panics on a hit.
fn miss_action(step: Step<u32>) -> (MissReason, MissAction<u32>) {
    match step {
        Step::Miss(miss) => (miss.reason, miss.action),
        Step::Hit { .. } => panic!("a hit"),
    }
}

/// What the miss started, if it compiles.
fn started(action: &MissAction<u32>) -> Started {
    match action {
        MissAction::Compile { started, .. } => *started,
        other => panic!("not a compile: {other:?}"),
    }
}

/// Reports the compile of `sig`, started as `started`, done with `result`.
fn finish(
    state: &mut State,
    config: &CacheConfig,
    func: &FunctionId,
    (sig, started): (&Signature, Started),
    result: Result<(Arc<u32>, usize), Arc<CompileFailure>>,
) {
    let report = CompileReport {
        sig,
        call: Some(sig),
        started,
        result: &result,
        elapsed: Duration::from_millis(5),
        fetched: false,
    };
    state.finish_compile(func, &report, config);
}

fn failed() -> Arc<CompileFailure> {
    Arc::new(CompileFailure::Abandoned)
}

#[test]
fn a_blocking_miss_compiles_from_its_instant_and_later_misses_wait_for_it() {
    let config = config();
    let mut state = State::new(&config, false);
    let (f, a) = (FunctionId::new("f", 1), sig(1));
    let t0 = Instant::now();
    let (reason, action) = miss_action(call(&mut state, &config, &f, &a, (Caller::Blocking, t0)));
    assert!(matches!(reason, MissReason::FirstCall), "{reason:?}");
    assert_eq!(started(&action).caller, Caller::Blocking);
    let t1 = t0 + Duration::from_secs(3);
    let (reason, action) = miss_action(call(&mut state, &config, &f, &a, (Caller::Blocking, t1)));
    assert!(matches!(reason, MissReason::CompileInFlight));
    // Running since the first call's instant, not the second's.
    assert!(
        matches!(action, MissAction::Wait { progress: Progress::Running(since), .. } if since == t0),
        "{action:?}"
    );
    // A queueing call with no interpreted time reported does not wait.
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, (Caller::Background, t1)));
    assert!(matches!(
        action,
        MissAction::Interpret(FallbackReason::CompileInFlight)
    ));
}

#[test]
fn a_queued_compile_is_waited_for_by_ticket_then_by_the_instant_it_starts() {
    let config = config();
    let mut state = State::new(&config, false);
    let (f, a) = (FunctionId::new("f", 1), sig(1));
    let t0 = Instant::now();
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, (Caller::Background, t0)));
    let MissAction::Compile {
        started, flight, ..
    } = action
    else {
        panic!("not a compile: {action:?}");
    };
    assert_eq!(started.caller, Caller::Background);
    let id = CompileId {
        func: &f,
        sig: &a,
        generation: started.generation,
    };
    let progress = |state: &mut State, now| match miss_action(call(
        state,
        &config,
        &f,
        &a,
        (Caller::Blocking, now),
    ))
    .1
    {
        MissAction::Wait { progress, .. } => progress,
        other => panic!("not a wait: {other:?}"),
    };
    assert_eq!(progress(&mut state, t0), Progress::Preparing);
    state.queued(id, &flight, 7, true);
    assert_eq!(progress(&mut state, t0), Progress::Queued(7));
    let t1 = t0 + Duration::from_millis(250);
    assert!(state.start_queued(id, t1));
    assert_eq!(progress(&mut state, t0), Progress::Running(t1));
    let counters = state.stats(&config).total;
    assert_eq!((counters.compiles_queued, counters.fallback_calls), (1, 1));
}

#[test]
fn a_failed_signature_is_interpreted_for_the_retry_after_calls_then_compiled_again() {
    let config = CacheConfig {
        failed_compile_retry_after: 2,
        ..config()
    };
    let mut state = State::new(&config, false);
    let (f, a) = (FunctionId::new("f", 1), sig(1));
    let now = (Caller::Blocking, Instant::now());
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, now));
    finish(
        &mut state,
        &config,
        &f,
        (&a, started(&action)),
        Err(failed()),
    );
    for retry_in in [1, 0] {
        let (reason, action) = miss_action(call(&mut state, &config, &f, &a, now));
        assert!(
            matches!(reason, MissReason::CompileFailedEarlier { retry_in_calls, .. } if retry_in_calls == retry_in),
            "{reason:?}"
        );
        assert!(matches!(
            action,
            MissAction::Interpret(FallbackReason::CompileFailed(_))
        ));
    }
    let (reason, action) = miss_action(call(&mut state, &config, &f, &a, now));
    assert!(
        matches!(reason, MissReason::RetryAfterFailure),
        "{reason:?}"
    );
    started(&action);
    let total = state.stats(&config).total;
    // The failed compile's call, then the two blocked calls.
    assert_eq!((total.failed_compiles, total.fallback_calls), (1, 3));
}

#[test]
fn at_capacity_a_signature_seen_once_is_not_admitted() {
    let config = CacheConfig {
        function_capacity: 1,
        policy: CachePolicy::Adaptive,
        ..config()
    };
    let mut state = State::new(&config, false);
    let (f, a, b) = (FunctionId::new("f", 1), sig(1), sig(2));
    let now = (Caller::Blocking, Instant::now());
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, now));
    finish(
        &mut state,
        &config,
        &f,
        (&a, started(&action)),
        Ok((Arc::new(1), 8)),
    );
    for _ in 0..4 {
        assert!(matches!(
            call(&mut state, &config, &f, &a, now),
            Step::Hit { .. }
        ));
    }
    let (_, action) = miss_action(call(&mut state, &config, &f, &b, now));
    assert!(
        matches!(
            action,
            MissAction::Interpret(FallbackReason::NotAdmitted { .. })
        ),
        "{action:?}"
    );
    let stats = state.stats(&config);
    let row = stats.function(&f).expect("a row for f");
    assert!(row.last_refusal.is_some());
    assert_eq!(row.counters.admissions_refused, 1);
    assert_eq!(row.counters.fallback_calls, 1);
    assert_eq!((row.counters.hits, row.counters.misses), (4, 2));
}

#[test]
fn the_lru_cool_down_sends_a_thrashing_function_to_the_interpreter() {
    let config = CacheConfig {
        function_capacity: 1,
        policy: CachePolicy::LruCoolDown,
        thrash_window: 100,
        thrash_threshold: 2,
        thrash_cool_down: 10,
        ..config()
    };
    let mut state = State::new(&config, false);
    let f = FunctionId::new("f", 1);
    let now = (Caller::Blocking, Instant::now());
    let mut thrashing = None;
    // Two shapes alternate through one slot: each miss evicts the other.
    for i in 0..10_u64 {
        let s = sig(i64::from(i % 2 == 1));
        match miss_action(call(&mut state, &config, &f, &s, now)) {
            (_, MissAction::Compile { started, .. }) => {
                finish(&mut state, &config, &f, (&s, started), Ok((Arc::new(1), 8)));
            }
            (_, MissAction::Interpret(FallbackReason::Thrashing { .. })) => {
                thrashing = Some(i);
                break;
            }
            (_, other) => panic!("call {i}: {other:?}"),
        }
    }
    let thrashing = thrashing.expect("the cool-down never started");
    let total = state.stats(&config).total;
    assert_eq!(total.compiles, thrashing);
    assert_eq!(total.evictions, thrashing - 1);
    assert_eq!(total.fallback_calls, 1);
}

#[test]
fn totals_are_the_live_functions_and_the_retired_counters_each_counted_once() {
    let config = config();
    let mut state = State::new(&config, false);
    let (f, g, a) = (FunctionId::new("f", 1), FunctionId::new("g", 2), sig(1));
    let now = (Caller::Blocking, Instant::now());
    for func in [&f, &g] {
        let (_, action) = miss_action(call(&mut state, &config, func, &a, now));
        finish(
            &mut state,
            &config,
            func,
            (&a, started(&action)),
            Ok((Arc::new(1), 8)),
        );
        assert!(matches!(
            call(&mut state, &config, func, &a, now),
            Step::Hit { .. }
        ));
    }
    // A compile of `f` in flight when `f` is forgotten: it counts, once,
    // in the totals only.
    let b = sig(2);
    let (_, action) = miss_action(call(&mut state, &config, &f, &b, now));
    assert_eq!(state.remove_function(&f).len(), 1);
    finish(
        &mut state,
        &config,
        &f,
        (&b, started(&action)),
        Ok((Arc::new(1), 8)),
    );
    let stats = state.stats(&config);
    let total = &stats.total;
    assert_eq!(stats.functions.len(), 1, "g only");
    assert_eq!((total.calls, total.hits, total.misses), (5, 2, 3));
    assert_eq!((total.compiles, total.evictions), (3, 1));
    assert_eq!((total.live_entries, total.live_bytes), (1, 8));
    let g_row = stats.function(&g).expect("a row for g");
    assert_eq!((g_row.counters.calls, g_row.counters.compiles), (2, 1));
}

#[test]
fn a_compile_abandoned_after_its_function_was_redefined_counts_for_the_totals_only() {
    let config = config();
    let mut state = State::new(&config, false);
    let (f, a) = (FunctionId::new("f", 1), sig(1));
    let now = (Caller::Blocking, Instant::now());
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, now));
    let old = started(&action);
    state.remove_function(&f);
    // The function's next state (a new generation) compiles `a` itself.
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, now));
    assert_ne!(started(&action).generation, old.generation);
    state.abandon_compile(CompileId {
        func: &f,
        sig: &a,
        generation: old.generation,
    });
    let stats = state.stats(&config);
    let row = stats.function(&f).expect("a row for f");
    assert_eq!(
        (row.counters.compiles, row.counters.failed_compiles),
        (0, 0)
    );
    assert_eq!((stats.total.compiles, stats.total.failed_compiles), (1, 1));
    // The new generation's compile is still in flight.
    let (reason, _) = miss_action(call(&mut state, &config, &f, &a, now));
    assert!(matches!(reason, MissReason::CompileInFlight));
}

#[test]
fn with_in_flight_interpret_a_blocking_miss_of_a_compiling_signature_interprets() {
    let config = CacheConfig {
        in_flight: crate::config::InFlightPolicy::Interpret,
        ..config()
    };
    let mut state = State::new(&config, false);
    let (f, a) = (FunctionId::new("f", 1), sig(1));
    let now = (Caller::Blocking, Instant::now());
    let (_, action) = miss_action(call(&mut state, &config, &f, &a, now));
    started(&action);
    let (reason, action) = miss_action(call(&mut state, &config, &f, &a, now));
    assert!(matches!(reason, MissReason::CompileInFlight));
    assert!(matches!(
        action,
        MissAction::Interpret(FallbackReason::CompileInFlight)
    ));
    assert_eq!(state.stats(&config).total.fallback_calls, 1);
}

#[test]
fn a_fetched_executable_counts_as_a_fetch_and_stays_out_of_the_compile_time() {
    let config = config();
    let mut state = State::new(&config, false);
    let (f, a, b) = (FunctionId::new("f", 1), sig(1), sig(2));
    let now = (Caller::Blocking, Instant::now());
    for (signature, fetched) in [(&a, true), (&b, false)] {
        let (_, action) = miss_action(call(&mut state, &config, &f, signature, now));
        let report = CompileReport {
            sig: signature,
            call: Some(signature),
            started: started(&action),
            result: &Ok((Arc::new(1), 8)),
            elapsed: Duration::from_millis(if fetched { 1 } else { 700 }),
            fetched,
        };
        state.finish_compile(&f, &report, &config);
    }
    let total = state.stats(&config).total;
    assert_eq!((total.compiles, total.fetches), (1, 1));
    assert_eq!(total.compile_time, Duration::from_millis(700));
    assert_eq!(total.live_entries, 2, "a fetch is cached like a compile");
    // The compile-time estimate has the compile's sample alone.
    assert_eq!(state.compiled.get(), Some(Duration::from_millis(700)));
}
