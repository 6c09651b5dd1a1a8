//! The bookkeeping of compiles: a finished compile's result cached
//! (evicting what the function's capacity and the global budgets require)
//! or its failure remembered, and a compile queued, started, withdrawn or
//! abandoned.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admission::PayOff;
use crate::budget::least_recent;
use crate::config::{CacheConfig, CachePolicy};
use crate::function_cache::{Entry, Eviction};
use crate::function_id::FunctionId;
use crate::single_flight::Flight;
use crate::stats::Counters;

use super::function::FunctionState;
use super::step::{
    Caller, CompileId, CompileReport, CompileResult, Finished, NotCached, Progress, Withdrawal,
};
use super::CacheState;

/// What one finished compile adds to the counters.
struct CompileCount {
    compiles: u64,
    fetches: u64,
    failed: u64,
    refusals: u64,
    time: Duration,
    fallback: u64,
}

impl CompileCount {
    fn add_to(&self, counters: &mut Counters) {
        counters.compiles += self.compiles;
        counters.fetches += self.fetches;
        counters.failed_compiles += self.failed;
        counters.refusals += self.refusals;
        counters.compile_time += self.time;
        counters.fallback_calls += self.fallback;
    }
}

impl<E> CacheState<E> {
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
            fetched,
        } = report;
        let failed = result.is_err();
        // A refusal is no compile: no compiler ran.
        let refused = matches!(result, Err(e) if e.is_refusal());
        // A fetch (a ready-made executable) is no compile either.
        let compiled_now = !refused && !fetched;
        let compiled = CompileCount {
            compiles: u64::from(compiled_now),
            fetches: u64::from(fetched),
            failed: u64::from(failed && !refused),
            refusals: u64::from(refused),
            time: if compiled_now {
                elapsed
            } else {
                Duration::ZERO
            },
            // A failed compile sends its call to the interpreter (a queued
            // one's call ran there already).
            fallback: u64::from(failed && started.caller == Caller::Blocking),
        };
        // What a compile run for a call takes, for the wait rule (one
        // compiled ahead reports a time of its caller's choosing).
        let measured = compiled_now && result.is_ok() && call.is_some();
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
}
