//! The cache's state behind its one lock, and the decisions taken under it.
//!
//! Nothing here runs user code: compile callbacks, executable drops and
//! logging all happen in `cache/` after the lock is released.
//!
//! - `mod.rs`: [`CacheState`], the cache-wide state (all functions, the
//!   global budget, the recency order) and the bookkeeping of compiles.
//! - `function.rs`: `FunctionState`, one function's state, and its hits.
//! - `miss.rs`: a miss's decisions, step by step.
//! - `context.rs`: `CallContext`, the cache-wide inputs of one call's
//!   decisions, taken by `FunctionState` as one argument.
//! - `step.rs`: what the decisions hand back to `cache/`.
//!
//! Each counter has one home: a function's events are counted in its
//! `FunctionState`; those of functions forgotten since, and those of
//! compiles that outlived their function's state, in
//! [`CacheState::retired`]. The totals are their sum, made when asked.

mod context;
mod function;
mod miss;
mod step;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admission::{Admit, PayOff};
use crate::budget::{least_recent, Budget};
use crate::config::{CacheConfig, CachePolicy};
use crate::function_cache::{Entry, Evicted, Eviction};
use crate::function_id::FunctionId;
use crate::hashing::PrecomputedState;
use crate::learned::LearnedPolicy;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::stats::{CacheStats, Counters, FunctionStats};
use crate::wait_rule::Mean;

use context::CallContext;
use function::FunctionState;
pub(crate) use step::{
    Caller, CompileId, CompileReport, CompileResult, Finished, Miss, MissAction, NotCached, Note,
    Progress, Specialization, Started, Step, Withdrawal,
};

/// What one finished compile adds to the counters.
struct CompileCount {
    compiles: u64,
    failed: u64,
    refusals: u64,
    time: Duration,
    fallback: u64,
}

impl CompileCount {
    fn add_to(&self, counters: &mut Counters) {
        counters.compiles += self.compiles;
        counters.failed_compiles += self.failed;
        counters.refusals += self.refusals;
        counters.compile_time += self.time;
        counters.fallback_calls += self.fallback;
    }
}

/// The states of all functions, and what makes a new one.
#[derive(Debug)]
struct Functions<E> {
    map: HashMap<FunctionId, FunctionState<E>, PrecomputedState>,
    next_generation: u64,
    /// The cache keeps what its policy learns (it has a
    /// [`PolicyMemory`](crate::PolicyMemory)): a function is recalled
    /// before its state is made, and what it learns is kept.
    remembers: bool,
}

impl<E> Functions<E> {
    /// Makes the state of `func` in the next generation, with what an
    /// earlier process learned of it.
    fn make(
        &mut self,
        func: &FunctionId,
        recalled: Option<LearnedPolicy>,
        config: &CacheConfig,
    ) -> &mut FunctionState<E> {
        self.next_generation += 1;
        let state =
            FunctionState::new(func, self.next_generation, config, recalled, self.remembers);
        self.map.entry(func.clone()).or_insert(state)
    }

    /// The state of `func`, made if there is none (with nothing recalled:
    /// a cache that `remembers` recalls a function before it makes its
    /// state, see [`CacheState::recalled`]).
    fn get_or_make(&mut self, func: &FunctionId, config: &CacheConfig) -> &mut FunctionState<E> {
        if !self.map.contains_key(func) {
            return self.make(func, None, config);
        }
        self.map.get_mut(func).expect("just checked")
    }

    /// The state of `func` of `generation`, unless it was forgotten since.
    fn current(&mut self, func: &FunctionId, generation: u64) -> Option<&mut FunctionState<E>> {
        self.map
            .get_mut(func)
            .filter(|s| s.generation == generation)
    }
}

/// All functions, the global budget and the global counters.
#[derive(Debug)]
pub(crate) struct CacheState<E> {
    functions: Functions<E>,
    budget: Budget,
    /// Global use counter: orders entries of all functions by recency.
    tick: u64,
    /// The counters of the functions forgotten since, and of the compiles
    /// that finished (or were dropped) after their function's state was:
    /// with the live functions' own, the totals.
    retired: Counters,
    /// Successful compiles' times, over all functions.
    compiled: Mean,
}

impl<E> CacheState<E> {
    pub(crate) fn new(config: &CacheConfig, remembers: bool) -> Self {
        CacheState {
            functions: Functions {
                map: HashMap::with_hasher(PrecomputedState),
                next_generation: 0,
                remembers,
            },
            budget: Budget::new(config.max_total_entries, config.max_total_bytes),
            tick: 0,
            retired: Counters::default(),
            compiled: Mean::default(),
        }
    }

    /// Whether `func` is to be recalled before anything is done with it:
    /// the cache remembers, and has no state for it.
    pub(crate) fn needs_recall(&self, func: &FunctionId) -> bool {
        self.functions.remembers && !self.functions.map.contains_key(func)
    }

    /// Makes the state of `func`, first seen, with what an earlier process
    /// learned about it (`recalled`); nothing changes if another call made
    /// it meanwhile.
    pub(crate) fn recalled(
        &mut self,
        func: &FunctionId,
        recalled: Option<LearnedPolicy>,
        config: &CacheConfig,
    ) {
        if !self.functions.map.contains_key(func) {
            self.functions.make(func, recalled, config);
        }
    }

    /// Whether `func` has `sig` cached.
    pub(crate) fn contains(&self, func: &FunctionId, sig: &Signature) -> bool {
        self.functions
            .map
            .get(func)
            .is_some_and(|state| state.cache.contains(sig))
    }

    /// Caches an executable compiled outside a call (ahead of time), as a
    /// compile of `func` would; `None` when `sig` is cached or being
    /// compiled already (nothing changes).
    pub(crate) fn insert_compiled(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        compiled: (Arc<E>, usize),
        elapsed: Duration,
        config: &CacheConfig,
    ) -> Option<Finished<E>> {
        let state = self.functions.get_or_make(func, config);
        if state.cache.contains(sig) || state.in_flight.contains_key(sig) {
            return None;
        }
        let started = Started {
            generation: state.generation,
            admitted: Some(Admit::Requested),
            caller: Caller::Blocking,
        };
        let report = CompileReport {
            sig,
            call: None,
            started,
            result: &Ok(compiled),
            elapsed,
        };
        Some(self.finish_compile(func, &report, config))
    }

    /// Counts a call and decides what it does; `None` (and nothing
    /// counted) when the cache remembers and `func` is first seen: recall
    /// it ([`recalled`](Self::recalled)), then call again.
    #[inline]
    pub(crate) fn begin_call(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        config: &CacheConfig,
        caller: Caller,
    ) -> Option<Step<E>> {
        self.begin_call_at(func, sig, config, caller, None)
    }

    /// [`begin_call`](Self::begin_call), at `now` when it is given.
    #[inline]
    fn begin_call_at(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        config: &CacheConfig,
        caller: Caller,
        now: Option<Instant>,
    ) -> Option<Step<E>> {
        if self.functions.remembers && !self.functions.map.contains_key(func) {
            return None;
        }
        self.tick += 1;
        let state = self.functions.get_or_make(func, config);
        let mut ctx = CallContext {
            tick: self.tick,
            budget: &mut self.budget,
            compiled: &self.compiled,
            config,
            caller,
            now,
        };
        Some(state.call(sig, &mut ctx))
    }

    /// Records how long interpreting a call of `func` took.
    pub(crate) fn report_interpreted(
        &mut self,
        func: &FunctionId,
        took: Duration,
        config: &CacheConfig,
    ) {
        self.functions
            .get_or_make(func, config)
            .interpreted
            .record(took);
    }

    /// Records a compile's result: caches the executable (evicting what the
    /// capacity and budgets require) or remembers the failure.
    pub(crate) fn finish_compile(
        &mut self,
        func: &FunctionId,
        report: &CompileReport<'_, E>,
        config: &CacheConfig,
    ) -> Finished<E> {
        let &CompileReport {
            sig,
            call,
            started,
            result,
            elapsed,
        } = report;
        let failed = result.is_err();
        // A refusal is no compile: no compiler ran.
        let refused = matches!(result, Err(e) if e.is_refusal());
        let compiled = CompileCount {
            compiles: u64::from(!refused),
            failed: u64::from(failed && !refused),
            refusals: u64::from(refused),
            time: if refused { Duration::ZERO } else { elapsed },
            // A failed compile sends its call to the interpreter (a queued
            // one's call ran there already).
            fallback: u64::from(failed && started.caller == Caller::Blocking),
        };
        // What a compile run for a call takes, for the wait rule (one
        // compiled ahead reports a time of its caller's choosing).
        let measured = result.is_ok() && call.is_some();
        if measured {
            self.compiled.record(elapsed);
        }
        let mut finished = Finished {
            evicted: Vec::new(),
            not_cached: None,
            notes: Vec::new(),
            static_again: false,
            learned: Vec::new(),
        };
        let Some(state) = self.functions.current(func, started.generation) else {
            compiled.add_to(&mut self.retired);
            finished.not_cached = Some(NotCached::FunctionEvicted);
            return finished;
        };
        state.land(sig, &mut self.budget);
        compiled.add_to(&mut state.counters);
        if measured {
            state.compiled.record(elapsed);
        }
        let (exe, bytes) = match result {
            Err(error) => {
                // A call refused as itself (checked before compiling its
                // generalization) counts for nothing: the failure is its
                // own signature's, and the class keeps its dynamic dims.
                let failed_sig = match call {
                    Some(call) if error.is_call_refusal() => {
                        // Not a generalization after all.
                        if sig != call {
                            state.counters.generalizations =
                                state.counters.generalizations.saturating_sub(1);
                            state.last_generalization = state.earlier_generalization.take();
                        }
                        call
                    }
                    _ => sig,
                };
                if failed_sig.has_dynamic_dims() {
                    if let Some(generalizer) = &mut state.generalizer {
                        finished.static_again = generalizer.failed(failed_sig);
                    }
                }
                state.failures.record(
                    failed_sig.clone(),
                    Arc::clone(error),
                    config.failed_compile_retry_after,
                );
                finished
                    .learned
                    .extend(state.learned_if_changed().map(|l| (func.clone(), l)));
                return finished;
            }
            Ok((exe, bytes)) => (Arc::clone(exe), *bytes),
        };
        if let (Some(generalizer), Some(call)) = (&mut state.generalizer, call) {
            generalizer.commit(call);
        }
        if !self.budget.admits(bytes) {
            finished.not_cached = Some(NotCached::TooLarge);
            finished
                .learned
                .extend(state.learned_if_changed().map(|l| (func.clone(), l)));
            return finished;
        }
        self.tick += 1;
        self.budget.add(bytes);
        let (tick, call) = (self.tick, state.counters.calls);
        let eviction = match (state.policy, started.admitted) {
            (CachePolicy::LruCoolDown, _) => Eviction::LeastRecent,
            (CachePolicy::Adaptive, Some(admit)) if admit.evicts_least_recent() => {
                Eviction::LeastRecent
            }
            (CachePolicy::Adaptive, _) => Eviction::LeastFrequent {
                epoch: state.admission.epoch(call),
            },
        };
        let entry = Entry {
            exe,
            bytes,
            tick,
            frequency: state.admission.take(sig.precomputed_hash()),
            last_call: call,
            hits: 0,
            pay_off: match started.admitted {
                Some(admit) if admit.owes_pay_off() => state.admission.due(call),
                _ => PayOff::Nothing,
            },
        };
        if let Some(out) = state.cache.insert(sig.clone(), entry, eviction) {
            state.counters.evictions += 1;
            self.budget.remove(out.bytes);
            if let Some(change) = state.left(&out) {
                finished.notes.push((func.clone(), state.noted(change)));
            }
            finished.evicted.push((func.clone(), out));
        }
        self.enforce_budget(&mut finished);
        self.collect_learned(func, &mut finished);
        finished
    }

    /// Adds to `finished` what the policy of `func`, and of the functions
    /// whose entries it evicted, learned since it was last kept.
    fn collect_learned(&mut self, func: &FunctionId, finished: &mut Finished<E>) {
        if !self.functions.remembers {
            return;
        }
        let mut changed: Vec<&FunctionId> = vec![func];
        for (owner, _) in &finished.evicted {
            if !changed.contains(&owner) {
                changed.push(owner);
            }
        }
        for id in changed {
            let learned = self
                .functions
                .map
                .get_mut(id)
                .and_then(FunctionState::learned_if_changed);
            finished.learned.extend(learned.map(|l| (id.clone(), l)));
        }
    }

    /// Evicts the least recently used entry of all functions until both
    /// budgets hold. The entry just inserted is the most recent of all and
    /// fits alone, so it is never the one chosen.
    fn enforce_budget(&mut self, finished: &mut Finished<E>) {
        while let Some(cause) = self.budget.overflow() {
            let victim = least_recent(
                self.functions
                    .map
                    .iter()
                    .filter_map(|(id, s)| s.cache.lru_tick().map(|t| (id, t))),
            )
            .cloned();
            let Some(victim) = victim else { break };
            let Some(state) = self.functions.map.get_mut(&victim) else {
                break;
            };
            let Some(evicted) = state.cache.pop_lru(cause) else {
                break;
            };
            state.counters.evictions += 1;
            self.budget.remove(evicted.bytes);
            if let Some(change) = state.left(&evicted) {
                finished.notes.push((victim.clone(), state.noted(change)));
            }
            finished.evicted.push((victim, evicted));
        }
    }

    /// The counters that book an event of the compile `id`: its function's
    /// state's, or the retired ones once that state is gone.
    fn counters_of(&mut self, id: CompileId<'_>) -> &mut Counters {
        match self.functions.current(id.func, id.generation) {
            Some(state) => &mut state.counters,
            None => &mut self.retired,
        }
    }

    /// Removes the compile `id` from its function's compiles in flight,
    /// if its state is still there.
    fn land(&mut self, id: CompileId<'_>) {
        if let Some(state) = self.functions.current(id.func, id.generation) {
            state.land(id.sig, &mut self.budget);
        }
    }

    /// Removes the in-flight marker of a compile whose call unwound before
    /// reporting; no failure is remembered, so the next call compiles again.
    pub(crate) fn abandon_compile(&mut self, id: CompileId<'_>) {
        self.land(id);
        let counters = self.counters_of(id);
        counters.compiles += 1;
        counters.failed_compiles += 1;
    }

    /// Whether a queued compile is still wanted (its function was not
    /// forgotten, or redefined and forgotten, since it was queued); if it
    /// is, it runs from `now` on.
    pub(crate) fn start_queued(&mut self, id: CompileId<'_>, now: Instant) -> bool {
        let in_flight = self
            .functions
            .current(id.func, id.generation)
            .and_then(|s| s.in_flight.get_mut(id.sig));
        match in_flight {
            Some(in_flight) => {
                in_flight.progress = Progress::Running(now);
                true
            }
            None => false,
        }
    }

    /// Counts a queueing call whose compile `id` (in `flight`) is queued
    /// with `ticket`, and whether it runs in the interpreter meanwhile (or
    /// waits); notes the ticket, unless the compile started already.
    pub(crate) fn queued(
        &mut self,
        id: CompileId<'_>,
        flight: &Arc<Flight<CompileResult<E>>>,
        ticket: u64,
        interprets: bool,
    ) {
        let counters = self.counters_of(id);
        counters.compiles_queued += 1;
        counters.fallback_calls += u64::from(interprets);
        let in_flight = self
            .functions
            .current(id.func, id.generation)
            .and_then(|s| s.in_flight.get_mut(id.sig));
        if let Some(in_flight) = in_flight {
            // The compile may be done already, and another one of `sig`
            // in flight since.
            if Arc::ptr_eq(&in_flight.flight, flight) && in_flight.progress == Progress::Preparing {
                in_flight.progress = Progress::Queued(ticket);
            }
        }
    }

    /// Removes the in-flight marker of a queued compile that will not run:
    /// the queue was full (its call runs in the interpreter), or its
    /// function was forgotten, or the cache is shutting down. Nothing is
    /// remembered: a later miss queues it again.
    pub(crate) fn withdraw_compile(&mut self, id: CompileId<'_>, why: Withdrawal) {
        let (queue_full, interprets) = match why {
            Withdrawal::QueueFull { interprets } => (true, interprets),
            Withdrawal::NotWanted => (false, false),
        };
        self.land(id);
        let counters = self.counters_of(id);
        counters.compiles_withdrawn += u64::from(!queue_full);
        counters.queue_full += u64::from(queue_full);
        counters.fallback_calls += u64::from(interprets);
    }

    /// Counts a call that ran in the interpreter after its miss: it waited
    /// for a compile that failed, or a queueing call chose not to wait.
    pub(crate) fn count_fallback(&mut self, func: &FunctionId) {
        match self.functions.map.get_mut(func) {
            Some(state) => state.counters.fallback_calls += 1,
            None => self.retired.fallback_calls += 1,
        }
    }

    /// Forgets `func`: its entries, failures, thrash state and counters (the
    /// totals keep them). Compiles in flight finish without being cached.
    pub(crate) fn remove_function(&mut self, func: &FunctionId) -> Vec<(FunctionId, Evicted<E>)> {
        let Some(mut state) = self.functions.map.remove(func) else {
            return Vec::new();
        };
        self.drained(func, &mut state)
    }

    /// Forgets every function, as `remove_function`.
    pub(crate) fn remove_all(&mut self) -> Vec<(FunctionId, Evicted<E>)> {
        let functions = std::mem::replace(
            &mut self.functions.map,
            HashMap::with_hasher(PrecomputedState),
        );
        let mut out = Vec::new();
        for (func, mut state) in functions {
            out.extend(self.drained(&func, &mut state));
        }
        out
    }

    /// Evicts the entries of a forgotten function's `state` and retires its
    /// counters.
    fn drained(
        &mut self,
        func: &FunctionId,
        state: &mut FunctionState<E>,
    ) -> Vec<(FunctionId, Evicted<E>)> {
        // Its compiles in flight finish uncached: the room they held goes.
        for in_flight in state.in_flight.values() {
            if let Some(bytes) = in_flight.reserved {
                self.budget.release(bytes);
            }
        }
        let evicted = state.cache.drain();
        state.counters.evictions += evicted.len() as u64;
        self.retired.add(&state.counters);
        for e in &evicted {
            self.budget.remove(e.bytes);
        }
        evicted.into_iter().map(|e| (func.clone(), e)).collect()
    }

    /// Forgets every remembered compile failure; returns how many.
    pub(crate) fn clear_failures(&mut self) -> usize {
        self.functions
            .map
            .values_mut()
            .map(|s| s.failures.clear())
            .sum()
    }

    /// The counters over all functions, those forgotten included.
    fn total(&self) -> Counters {
        let mut total = self.retired.clone();
        for state in self.functions.map.values() {
            total.add(&state.counters);
        }
        total.live_entries = self.budget.entries();
        total.live_bytes = self.budget.bytes();
        total
    }

    pub(crate) fn stats(&self, config: &CacheConfig) -> CacheStats {
        let mut functions: Vec<FunctionStats> = self
            .functions
            .map
            .iter()
            .map(|(id, s)| s.snapshot(id))
            .collect();
        functions.sort_by(|a, b| a.function.cmp(&b.function));
        CacheStats {
            total: self.total(),
            functions,
            max_total_entries: config.max_total_entries,
            max_total_bytes: config.max_total_bytes,
        }
    }

    /// Every cached executable with its function and signature.
    pub(crate) fn entries(&self) -> Vec<(FunctionId, Signature, Arc<E>)> {
        self.functions
            .map
            .iter()
            .flat_map(|(id, state)| {
                state
                    .cache
                    .iter()
                    .map(move |(sig, exe)| (id.clone(), sig.clone(), Arc::clone(exe)))
            })
            .collect()
    }

    pub(crate) fn live_entries(&self) -> usize {
        self.budget.entries()
    }
}
