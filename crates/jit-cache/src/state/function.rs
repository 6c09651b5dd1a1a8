//! [`FunctionState`]: everything the cache knows about one function, and
//! the decisions on a call of it that need nothing but the function and
//! the call's [`CallContext`] (hits, hot sizes, what the policy learned,
//! what an eviction settles). A miss's decisions are in `miss.rs`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::admission::{Admission, Refusal, Settled};
use crate::budget::Budget;
use crate::config::{CacheConfig, CachePolicy};
use crate::explain::MissReason;
use crate::failures::{FailureCheck, Failures};
use crate::function_cache::{Evicted, FunctionCache};
use crate::function_id::FunctionId;
use crate::generalize::{Generalization, Generalizer};
use crate::hashing::PrecomputedState;
use crate::learned::{self, LearnedPolicy, Recalled};
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::stats::{Counters, FunctionStats};
use crate::thrash::{FunctionMode, ThrashGuard, ThrashSettings};
use crate::wait_rule::{Ewma, Mean};

use super::context::CallContext;
use super::step::{Caller, InFlight, ModeChange, Note, Progress, Specialization, Started, Step};

/// Everything the cache knows about one function.
#[derive(Debug)]
pub(super) struct FunctionState<E> {
    /// Distinguishes this state from one created after an eviction of the
    /// same function, so a compile that outlived it is not inserted.
    pub(super) generation: u64,
    pub(super) cache: FunctionCache<E>,
    pub(super) policy: CachePolicy,
    pub(super) admission: Admission,
    /// [`CachePolicy::LruCoolDown`]'s fallback.
    pub(super) cool_down: Option<ThrashGuard>,
    pub(super) failures: Failures,
    pub(super) in_flight: HashMap<Signature, InFlight<E>, PrecomputedState>,
    /// Its events; `wasted_compiles` aside, which admission counts
    /// (read them with [`counters`](Self::counters)).
    pub(super) counters: Counters,
    /// Its successful compiles' times (those of compiles run by the cache).
    pub(super) compiled: Mean,
    /// Its interpreted time, as reported (`JitCache::report_interpreted`).
    pub(super) interpreted: Ewma,
    pub(super) last_miss: Option<MissReason>,
    pub(super) last_refusal: Option<Refusal>,
    /// Tracks varying dims, when the function may get dynamic ones.
    pub(super) generalizer: Option<Generalizer>,
    pub(super) last_generalization: Option<Generalization>,
    /// The one before it: what `last_generalization` goes back to when a
    /// call's own signature is refused before its generalization compiles
    /// (the call counts for nothing).
    pub(super) earlier_generalization: Option<Generalization>,
    /// Signatures an earlier process had cached, not compiled in this one
    /// yet, with their recalled call counts and whether this process called
    /// them: a miss of one compiles that very signature, not its
    /// generalization.
    pub(super) remembered: Recalled,
    /// When the cache keeps what its policy learns: the fingerprint of
    /// what was kept (or recalled) last.
    pub(super) kept: Option<u64>,
}

impl<E> FunctionState<E> {
    /// The state of a function first seen, with what an earlier process
    /// learned about it, if anything; `remembers` when the cache keeps
    /// what its policy learns.
    pub(super) fn new(
        func: &FunctionId,
        generation: u64,
        config: &CacheConfig,
        recalled: Option<LearnedPolicy>,
        remembers: bool,
    ) -> Self {
        let name = func.name();
        let capacity = config.capacity_for(name);
        let mut state = FunctionState {
            generation,
            cache: FunctionCache::new(capacity),
            policy: config.policy,
            admission: Admission::new(capacity),
            cool_down: (config.policy == CachePolicy::LruCoolDown).then(|| {
                ThrashGuard::new(ThrashSettings {
                    window: config.thrash_window,
                    threshold: config.thrash_threshold.max(capacity),
                    cool_down: config.thrash_cool_down,
                    cool_down_cap: config.thrash_cool_down_cap,
                })
            }),
            failures: Failures::new(config.max_failures_per_function),
            in_flight: HashMap::with_hasher(PrecomputedState),
            counters: Counters::default(),
            compiled: Mean::default(),
            interpreted: Ewma::default(),
            last_miss: None,
            last_refusal: None,
            generalizer: (func.accepts_dynamic_dims() && config.dynamic_dims_for(name))
                .then(|| Generalizer::new(config.dynamic_dims_after)),
            last_generalization: None,
            earlier_generalization: None,
            remembered: Recalled::default(),
            kept: None,
        };
        if let Some(recalled) = recalled {
            state.recall(&recalled);
        }
        if remembers {
            // What was recalled, as it was: kept again once this process
            // learns otherwise (what it compiles, what it does not call).
            let recalled = state.remembered.as_recalled();
            let hot = recalled.map(|(sig, count)| (sig.clone(), count)).collect();
            state.kept = Some(LearnedPolicy::new(state.varying(), hot, 0).fingerprint());
        }
        state
    }

    /// Applies what an earlier process learned: its varying dims vary, and
    /// its hot signatures (up to the capacity) count as called and are
    /// remembered. A signature with dynamic dims, or a class, that this
    /// function cannot get (dynamic dims are off for it) is left out.
    fn recall(&mut self, recalled: &LearnedPolicy) {
        if let Some(generalizer) = &mut self.generalizer {
            for (class, dims) in recalled.dynamic_dims() {
                generalizer.recall(class, dims);
            }
        }
        let reachable = |sig: &Signature| !sig.has_dynamic_dims() || self.generalizer.is_some();
        let hot: Vec<(Signature, u32)> = recalled
            .hot()
            .iter()
            .filter(|(sig, _)| reachable(sig))
            .take(self.cache.capacity())
            .cloned()
            .collect();
        for (sig, count) in hot {
            self.admission.recall(sig.precomputed_hash(), count);
            self.remembered.insert(sig, count);
        }
    }

    /// Its classes whose dims vary, and those dims.
    fn varying(&self) -> Vec<(Signature, Vec<(usize, usize)>)> {
        self.generalizer
            .as_ref()
            .map(Generalizer::varying)
            .unwrap_or_default()
    }

    /// What the policy learned about this function, as of `sequence`: its
    /// varying dims, and the signatures it has cached (the most called
    /// first), then those recalled and called, then those recalled and
    /// not called, ranked last (see `learned/recalled.rs`), up to its
    /// capacity.
    pub(super) fn learned(&self, sequence: u64) -> LearnedPolicy {
        let epoch = self.admission.epoch(self.counters.calls);
        let cached = self
            .cache
            .counts(epoch)
            .map(|(sig, count)| (sig.clone(), count));
        let hot = self.remembered.ranked(
            cached,
            |sig| self.cache.contains(sig),
            self.cache.capacity(),
        );
        LearnedPolicy::new(self.varying(), hot, sequence)
    }

    /// What the policy learned, when the cache keeps it and it changed
    /// since it was last kept (dims that vary, signatures hot; counts
    /// aside), or a signature the policy kept last ranked unused was called
    /// since.
    pub(super) fn learned_if_changed(&mut self) -> Option<LearnedPolicy> {
        let kept = self.kept?;
        let learned = self.learned(learned::next_sequence());
        let fingerprint = learned.fingerprint();
        (fingerprint != kept || self.remembered.stale()).then(|| {
            self.kept = Some(fingerprint);
            self.remembered.kept();
            learned
        })
    }

    /// Counts a call of `sig` and decides what it does: a hit, or a miss
    /// ([`miss`](Self::miss)).
    #[inline]
    pub(super) fn call(&mut self, sig: &Signature, ctx: &mut CallContext<'_>) -> Step<E> {
        self.counters.calls += 1;
        let call = self.counters.calls;
        let mut notes = Vec::new();
        if let Some(transition) = self.cool_down.as_mut().and_then(|g| g.on_call(call)) {
            self.note(&mut notes, ModeChange::CoolDown(transition));
        }
        let epoch = self.admission.epoch(call);
        let pay_off = self.admission.pay_off_calls();
        if let Some(hit) = self.cache.hit(sig, ctx.tick, call, epoch, pay_off) {
            self.counters.hits += 1;
            if hit.dynamic {
                self.counters.dynamic_hits += 1;
                self.remembered.called(sig);
            }
            if let Some(change) = hit.settled.and_then(|s| self.settle(s)) {
                self.note(&mut notes, change);
            }
            let specialize = (hit.dynamic
                && ctx.caller == Caller::Background
                && ctx.config.specialize_hot_sizes)
                .then(|| self.specialize_if_hot(sig, call, ctx.budget))
                .flatten();
            return Step::Hit {
                exe: hit.exe,
                notes,
                specialize,
            };
        }
        self.miss(sig, call, notes, ctx)
    }

    /// Removes the compile of `sig` from those in flight, releasing the
    /// room it held in `budget`.
    pub(super) fn land(&mut self, sig: &Signature, budget: &mut Budget) {
        if let Some(InFlight {
            reserved: Some(bytes),
            ..
        }) = self.in_flight.remove(sig)
        {
            budget.release(bytes);
        }
    }

    /// Counts a call of `sig` that a variant with dynamic dims served; once
    /// `sig` is hot (as admission counts it: called more than once every
    /// capacity + 1 calls recently), starts the compile of its own
    /// signature, if the function's cache and the global budgets have room
    /// for one more entry of the serving variant's size, and it is not
    /// compiling or failed already.
    fn specialize_if_hot(
        &mut self,
        sig: &Signature,
        call: u64,
        budget: &mut Budget,
    ) -> Option<Box<Specialization<E>>> {
        let calls = self
            .admission
            .record_served(sig.precomputed_hash(), call)
            .saturating_add(1);
        // Compiles in flight may take the function's free slots.
        if calls < self.admission.hot(call)
            || self.in_flight.contains_key(sig)
            || self.cache.len() + self.in_flight.len() >= self.cache.capacity()
        {
            return None;
        }
        let (serving, bytes) = self.cache.serving(sig)?;
        if let FailureCheck::Blocked { .. } = self.failures.check(sig) {
            return None;
        }
        if !budget.reserve(bytes) {
            return None;
        }
        let reason = MissReason::HotSize {
            served_by: Box::new(serving.clone()),
            calls,
        };
        let flight = Flight::new();
        self.in_flight.insert(
            sig.clone(),
            InFlight {
                flight: Arc::clone(&flight),
                call: sig.clone(),
                progress: Progress::Preparing,
                reserved: Some(bytes),
            },
        );
        self.counters.specializations += 1;
        Some(Box::new(Specialization {
            started: Started {
                generation: self.generation,
                admitted: None,
                caller: Caller::Background,
            },
            flight,
            reason,
        }))
    }

    pub(super) fn note(&self, notes: &mut Vec<Note>, change: ModeChange) {
        notes.push(self.noted(change));
    }

    pub(super) fn noted(&self, change: ModeChange) -> Note {
        Note {
            change,
            last_miss: self.last_miss.clone(),
        }
    }

    /// Accounts for an entry that left the cache: its frequency is kept, and
    /// an admission still due is wasted.
    pub(super) fn left(&mut self, evicted: &Evicted<E>) -> Option<ModeChange> {
        let call = self.counters.calls;
        self.admission
            .keep(evicted.sig.precomputed_hash(), evicted.frequency, call);
        evicted.pay_off.on_leave().and_then(|s| self.settle(s))
    }

    /// Accounts for a settled admission.
    pub(super) fn settle(&mut self, settled: Settled) -> Option<ModeChange> {
        self.admission.settle(settled).map(ModeChange::Budget)
    }

    /// Its event counters, with the wasted compiles that admission counts
    /// (their one count: admission needs it for its budget).
    pub(super) fn counters(&self) -> Counters {
        Counters {
            wasted_compiles: self.admission.wasted(),
            ..self.counters.clone()
        }
    }

    pub(super) fn snapshot(&self, function: &FunctionId) -> FunctionStats {
        let mut counters = self.counters();
        counters.live_entries = self.cache.len();
        counters.live_bytes = self.cache.bytes();
        FunctionStats {
            function: function.clone(),
            capacity: self.cache.capacity(),
            counters,
            mode: match &self.cool_down {
                Some(guard) => guard.mode(self.counters.calls),
                None if self.admission.spent() => FunctionMode::Restricted {
                    wasted_compiles: self.admission.wasted(),
                    hot_threshold: self.admission.hot(self.counters.calls),
                },
                None => FunctionMode::Normal,
            },
            last_miss: self.last_miss.clone(),
            last_refusal: self.last_refusal,
            last_generalization: self.last_generalization.clone(),
        }
    }
}
