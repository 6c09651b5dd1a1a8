//! The cache's state behind its one lock, and the decisions taken under it.
//!
//! Nothing here runs user code: compile callbacks, executable drops and
//! logging all happen in `cache/` after the lock is released.
//!
//! - `mod.rs`: [`CacheState`], the cache-wide state (all functions, the
//!   global budget, the recency order, the totals).
//! - `compiles.rs`: the bookkeeping of compiles (finished, queued,
//!   withdrawn, abandoned).
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

mod compiles;
mod context;
mod function;
mod miss;
mod step;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admission::Admit;
use crate::budget::Budget;
use crate::cached::CachedEntry;
use crate::config::CacheConfig;
use crate::function_cache::Evicted;
use crate::function_id::FunctionId;
use crate::hashing::PrecomputedState;
use crate::learned::LearnedPolicy;
use crate::signature::Signature;
use crate::stats::{CacheStats, Counters, FunctionStats};
use crate::wait_rule::Mean;

use context::CallContext;
use function::FunctionState;
pub(crate) use step::{
    Caller, CompileId, CompileReport, CompileResult, Finished, Miss, MissAction, NotCached, Note,
    Progress, Specialization, Started, Step, Withdrawal,
};

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
        (compiled, fetched): ((Arc<E>, usize), bool),
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
            fetched,
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
        self.retired.add(&state.counters());
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
            total.add(&state.counters());
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

    /// What is cached, of `only` that function or of all: by function
    /// name, then most recently used first.
    pub(crate) fn cached(&self, only: Option<&FunctionId>) -> Vec<CachedEntry<E>> {
        let mut functions: Vec<(&FunctionId, &FunctionState<E>)> = match only {
            Some(func) => self.functions.map.get_key_value(func).into_iter().collect(),
            None => self.functions.map.iter().collect(),
        };
        functions.sort_by_key(|(func, _)| *func);
        functions
            .into_iter()
            .flat_map(|(func, state)| {
                let calls = state.counters.calls;
                state.cache.entries().map(move |(sig, entry)| CachedEntry {
                    function: func.clone(),
                    signature: sig.clone(),
                    executable: Arc::clone(&entry.exe),
                    bytes: entry.bytes,
                    hits: entry.hits,
                    calls_since_use: calls.saturating_sub(entry.last_call),
                })
            })
            .collect()
    }

    pub(crate) fn live_entries(&self) -> usize {
        self.budget.entries()
    }
}
