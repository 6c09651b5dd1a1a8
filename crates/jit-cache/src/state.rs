//! The cache's state behind its one lock, and the decisions taken under it.
//!
//! Nothing here runs user code: compile callbacks, executable drops and
//! logging all happen in `cache.rs` after the lock is released.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::admission::{Admission, Admit, BudgetChange, PayOff, Refusal, Settled};
use crate::budget::{least_recent, Budget};
use crate::config::{CacheConfig, CachePolicy, InFlightPolicy};
use crate::dispatch::FallbackReason;
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::failures::{FailureCheck, Failures};
use crate::function_cache::{Entry, Evicted, Eviction, FunctionCache};
use crate::function_id::FunctionId;
use crate::generalize::{Generalization, Generalizer};
use crate::hashing::PrecomputedState;
use crate::learned::{self, LearnedPolicy, Recalled};
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::stats::{CacheStats, Counters, FunctionStats};
use crate::thrash::{FunctionMode, ThrashGuard, ThrashSettings, Transition, Verdict};
use crate::wait_rule::{Estimates, Ewma, Mean};

/// The result of one compile, shared with every call that waited for it.
pub(crate) type CompileResult<E> = Result<Arc<E>, Arc<CompileFailure>>;

/// A change of a function's mode, to log once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ModeChange {
    /// Of [`CachePolicy::LruCoolDown`]'s cool-down.
    CoolDown(Transition),
    /// Of [`CachePolicy::Adaptive`]'s compile budget.
    Budget(BudgetChange),
}

impl ModeChange {
    /// Logs the change once, at warn level, with the last miss.
    pub(crate) fn log(self, func: &FunctionId, last_miss: Option<&MissReason>) {
        match self {
            ModeChange::CoolDown(transition) => transition.log(func, last_miss),
            ModeChange::Budget(change) => change.log(func, last_miss),
        }
    }
}

/// A mode change to log, with the miss that explains it.
#[derive(Debug)]
pub(crate) struct Note {
    pub(crate) change: ModeChange,
    pub(crate) last_miss: Option<MissReason>,
}

/// What a call does, decided under the lock.
#[derive(Debug)]
pub(crate) enum Step<E> {
    Hit {
        exe: Arc<E>,
        notes: Vec<Note>,
        /// The call's size is hot and a variant with dynamic dims served
        /// it: the call queues the compile of its own signature.
        specialize: Option<Box<Specialization<E>>>,
    },
    Miss(Miss<E>),
}

/// The compile of a hot size's own signature, beside the variant with
/// dynamic dims that serves it meanwhile ([`CacheConfig::specialize_hot_sizes`]).
/// It is in flight from now on: the call queues it (or completes it).
#[derive(Debug)]
pub(crate) struct Specialization<E> {
    pub(crate) started: Started,
    pub(crate) flight: Arc<Flight<CompileResult<E>>>,
    /// Why it compiles ([`MissReason::HotSize`]).
    pub(crate) reason: MissReason,
}

/// A miss: why, and what the call does about it.
#[derive(Debug)]
pub(crate) struct Miss<E> {
    /// 1 for the function's first miss.
    pub number: u64,
    pub reason: MissReason,
    pub action: MissAction<E>,
    pub notes: Vec<Note>,
    /// For a queueing call, once its function's interpreted time is known:
    /// what it weighs to wait for its compile or interpret (`wait_rule`),
    /// when it queues the compile or finds it in flight.
    pub estimates: Option<Estimates>,
    /// What the function's policy learned, to keep: this miss made a dim
    /// vary (a call the policy did not compile counts).
    pub learned: Option<LearnedPolicy>,
}

#[derive(Debug)]
pub(crate) enum MissAction<E> {
    /// This call compiles; it must publish the result in `flight` and
    /// report it with `started`. It compiles the call's signature, or the
    /// generalization's when there is one.
    Compile {
        started: Started,
        flight: Arc<Flight<CompileResult<E>>>,
        generalization: Option<Box<Generalization>>,
    },
    /// Another call compiles: a blocking call waits for it; a queueing
    /// one (which has [`Miss::estimates`]) waits or interprets by how far
    /// the compile got.
    Wait {
        flight: Arc<Flight<CompileResult<E>>>,
        progress: Progress,
    },
    Interpret(FallbackReason),
}

/// How far a compile in flight got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// A queueing call prepares it on its own thread; not queued yet.
    Preparing,
    /// Queued on the pool, with this ticket.
    Queued(u64),
    /// Compiling since then.
    Running(Instant),
}

/// A compile in flight.
#[derive(Debug)]
struct InFlight<E> {
    flight: Arc<Flight<CompileResult<E>>>,
    /// The signature of the call that started it: until the compile ends,
    /// its dims count towards its class's dims varying (pending).
    call: Signature,
    progress: Progress,
    /// Bytes of the global budget held for it (a hot-size specialization,
    /// which must not evict), released when it leaves the map.
    reserved: Option<usize>,
}

/// Whether the calling thread compiles (and waits for compiles in flight),
/// or queues the compile and runs the interpreter meanwhile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Caller {
    Blocking,
    Background,
}

/// Why a queued compile does not run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Withdrawal {
    /// The queue was full when it was submitted; the call that submitted
    /// it `interprets` (a miss), or runs compiled code (a hot size's
    /// specialization).
    QueueFull { interprets: bool },
    /// Its function was evicted, or the cache dropped, before it ran.
    NotWanted,
}

/// What a started compile reports back with its result.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Started {
    /// The generation of the function's state it was started in.
    pub(crate) generation: u64,
    /// Why it replaces a cached signature, if the function was at capacity.
    pub(crate) admitted: Option<Admit>,
    /// `Blocking`: the call that started it takes the result, and its
    /// failure sends that call to the interpreter (counted with the
    /// result). `Background`: queued, by a call that counted itself.
    pub(crate) caller: Caller,
}

/// What became of a finished compile.
#[derive(Debug)]
pub(crate) struct Finished<E> {
    /// Entries evicted to make room, with their owner.
    pub(crate) evicted: Vec<(FunctionId, Evicted<E>)>,
    /// The executable was not cached: larger than the byte budget, or the
    /// function was evicted while it compiled.
    pub(crate) not_cached: Option<NotCached>,
    /// Mode changes the evictions caused, with their function.
    pub(crate) notes: Vec<(FunctionId, Note)>,
    /// A compile with dynamic dims failed: its shape class compiles static
    /// signatures from now on.
    pub(crate) static_again: bool,
    /// What the policy learned, to keep, for each function whose learning
    /// this compile changed (its own, and those whose entries it evicted).
    pub(crate) learned: Vec<(FunctionId, LearnedPolicy)>,
}

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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotCached {
    TooLarge,
    FunctionEvicted,
}

/// Everything the cache knows about one function.
#[derive(Debug)]
struct FunctionState<E> {
    /// Distinguishes this state from one created after an eviction of the
    /// same function, so a compile that outlived it is not inserted.
    generation: u64,
    cache: FunctionCache<E>,
    policy: CachePolicy,
    admission: Admission,
    /// [`CachePolicy::LruCoolDown`]'s fallback.
    cool_down: Option<ThrashGuard>,
    failures: Failures,
    in_flight: HashMap<Signature, InFlight<E>, PrecomputedState>,
    counters: Counters,
    /// Its successful compiles' times (those of compiles run by the cache).
    compiled: Mean,
    /// Its interpreted time, as reported (`JitCache::report_interpreted`).
    interpreted: Ewma,
    last_miss: Option<MissReason>,
    last_refusal: Option<Refusal>,
    /// Tracks varying dims, when the function may get dynamic ones.
    generalizer: Option<Generalizer>,
    last_generalization: Option<Generalization>,
    /// The one before it: what `last_generalization` goes back to when a
    /// call's own signature is refused before its generalization compiles
    /// (the call counts for nothing).
    earlier_generalization: Option<Generalization>,
    /// Signatures an earlier process had cached, not compiled in this one
    /// yet, with their recalled call counts and whether this process called
    /// them: a miss of one compiles that very signature, not its
    /// generalization.
    remembered: Recalled,
    /// When the cache keeps what its policy learns: the fingerprint of
    /// what was kept (or recalled) last.
    kept: Option<u64>,
}

impl<E> FunctionState<E> {
    /// The state of a function first seen, with what an earlier process
    /// learned about it, if anything; `remembers` when the cache keeps
    /// what its policy learns.
    fn new(
        func: &FunctionId,
        generation: u64,
        config: &CacheConfig,
        (recalled, remembers): (Option<LearnedPolicy>, bool),
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
    fn learned(&self, sequence: u64) -> LearnedPolicy {
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
    fn learned_if_changed(&mut self) -> Option<LearnedPolicy> {
        let kept = self.kept?;
        let learned = self.learned(learned::next_sequence());
        let fingerprint = learned.fingerprint();
        (fingerprint != kept || self.remembered.stale()).then(|| {
            self.kept = Some(fingerprint);
            self.remembered.kept();
            learned
        })
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn call(
        &mut self,
        sig: &Signature,
        tick: u64,
        (total, budget): (&mut Counters, &mut Budget),
        compiled: &Mean,
        config: &CacheConfig,
        caller: Caller,
    ) -> Step<E> {
        self.counters.calls += 1;
        let call = self.counters.calls;
        let mut notes = Vec::new();
        if let Some(transition) = self.cool_down.as_mut().and_then(|g| g.on_call(call)) {
            self.note(&mut notes, ModeChange::CoolDown(transition));
        }
        let epoch = self.admission.epoch(call);
        let pay_off = self.admission.pay_off_calls();
        if let Some(hit) = self.cache.hit(sig, tick, call, epoch, pay_off) {
            self.counters.hits += 1;
            total.hits += 1;
            if hit.dynamic {
                self.counters.dynamic_hits += 1;
                total.dynamic_hits += 1;
                self.remembered.called(sig);
            }
            if let Some(change) = hit.settled.and_then(|s| self.settle(s)) {
                self.note(&mut notes, change);
            }
            let specialize =
                (hit.dynamic && caller == Caller::Background && config.specialize_hot_sizes)
                    .then(|| self.specialize_if_hot(sig, call, total, budget))
                    .flatten();
            return Step::Hit {
                exe: hit.exe,
                notes,
                specialize,
            };
        }
        self.miss(sig, call, notes, total, compiled, config, caller)
    }

    /// Removes the compile of `sig` from those in flight, releasing the
    /// room it held in `budget`.
    fn land(&mut self, sig: &Signature, budget: &mut Budget) {
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
        total: &mut Counters,
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
        total.specializations += 1;
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

    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn miss(
        &mut self,
        sig: &Signature,
        call: u64,
        mut notes: Vec<Note>,
        total: &mut Counters,
        compiled: &Mean,
        config: &CacheConfig,
        caller: Caller,
    ) -> Step<E> {
        self.counters.misses += 1;
        total.misses += 1;
        self.remembered.called(sig);
        // The signature to compile: the call's, or its generalization once
        // some of its dims vary, counting the dims of the calls whose
        // compile succeeded or is in flight, and the call's own. The
        // call's dims are committed only if its compile succeeds
        // (`finish_compile`), and the compile callback checks the call's
        // own signature before compiling a generalization: a call whose
        // dims do not fit together never counts towards a dim varying. A
        // call already refused as itself asks for no generalization. A
        // signature an earlier process had cached comes back as it was:
        // its own variant, not its generalization.
        let in_flight = &self.in_flight;
        let generalization = self
            .generalizer
            .as_mut()
            .filter(|_| !self.remembered.contains(sig) && !self.failures.contains(sig))
            .and_then(|g| g.generalize(sig, in_flight.values().map(|f| &f.call)))
            .map(Box::new);
        // Only a queueing call may wait or not, and only once its
        // function's interpreted time is known.
        let estimates = match caller {
            Caller::Background => {
                Estimates::new(self.interpreted.get(), self.compiled.get(), compiled.get())
            }
            Caller::Blocking => None,
        };
        let target = generalization
            .as_deref()
            .map_or(sig, Generalization::signature);
        // Every miss counts towards the frequency of what it would compile,
        // whatever it then does.
        let candidate = self.admission.record_miss(target.precomputed_hash(), call);
        let (reason, action) = match self.failures.check(target) {
            FailureCheck::Blocked {
                error,
                retry_in_calls,
            } => (
                MissReason::CompileFailedEarlier {
                    error: Arc::clone(&error),
                    retry_in_calls,
                },
                MissAction::Interpret(FallbackReason::CompileFailed(error)),
            ),
            check => {
                if let Some(in_flight) = self.in_flight.get(target) {
                    let wait = MissAction::Wait {
                        flight: Arc::clone(&in_flight.flight),
                        progress: in_flight.progress,
                    };
                    let action = match (caller, config.in_flight) {
                        (Caller::Blocking, InFlightPolicy::Wait) => wait,
                        (Caller::Background, _) if estimates.is_some() => wait,
                        (Caller::Background, _) | (_, InFlightPolicy::Interpret) => {
                            MissAction::Interpret(FallbackReason::CompileInFlight)
                        }
                    };
                    (MissReason::CompileInFlight, action)
                } else {
                    let reason = if matches!(check, FailureCheck::Retry) {
                        MissReason::RetryAfterFailure
                    } else {
                        self.cache.explain_miss(sig, self.counters.misses == 1)
                    };
                    let action = self.decide_compile(
                        sig,
                        generalization,
                        call,
                        candidate,
                        &reason,
                        &mut notes,
                        caller,
                    );
                    (reason, action)
                }
            }
        };
        self.last_refusal = None;
        let mut action = action;
        let mut learned = None;
        if let MissAction::Compile {
            generalization: Some(generalization),
            ..
        } = &action
        {
            self.counters.generalizations += 1;
            total.generalizations += 1;
            self.earlier_generalization = self
                .last_generalization
                .replace(Generalization::clone(generalization));
        }
        if let (MissAction::Compile { started, .. }, Caller::Background) = (&mut action, caller) {
            // The compile is to be queued; the call counts how it ran once
            // it knows (`JitCache::get_or_queue`).
            started.caller = Caller::Background;
        }
        if let MissAction::Interpret(why) = &action {
            self.counters.fallback_calls += 1;
            total.fallback_calls += 1;
            if let FallbackReason::NotAdmitted { refusal, .. } = why {
                self.counters.admissions_refused += 1;
                total.admissions_refused += 1;
                self.last_refusal = Some(*refusal);
            }
            // Nothing is known against a call the policy did not compile
            // (at capacity, in a cool-down): its dims count, so that a
            // class's misses gather on one dynamic variant, which is then
            // admitted by its frequency. A call blocked by a failure, or
            // whose compile is in flight, adds nothing.
            if matches!(
                why,
                FallbackReason::NotAdmitted { .. } | FallbackReason::Thrashing { .. }
            ) {
                let varies = self
                    .generalizer
                    .as_mut()
                    .is_some_and(|generalizer| generalizer.commit(sig));
                if varies {
                    learned = self.learned_if_changed();
                }
            }
        }
        self.last_miss = Some(reason.clone());
        Step::Miss(Miss {
            number: self.counters.misses,
            reason,
            action,
            notes,
            estimates,
            learned,
        })
    }

    /// Compiles the call's signature `sig`, or its generalization, unless
    /// admission refuses it at capacity or the cool-down sends it to the
    /// interpreter.
    #[allow(clippy::too_many_arguments)]
    fn decide_compile(
        &mut self,
        sig: &Signature,
        generalization: Option<Box<Generalization>>,
        call: u64,
        candidate: u32,
        reason: &MissReason,
        notes: &mut Vec<Note>,
        caller: Caller,
    ) -> MissAction<E> {
        let call_sig = sig;
        let sig = generalization
            .as_deref()
            .map_or(sig, Generalization::signature);
        let mut admitted = None;
        let at_capacity = self.cache.len() >= self.cache.capacity();
        if self.policy == CachePolicy::Adaptive && at_capacity && self.remembered.contains(sig) {
            admitted = Some(Admit::Recalled);
        } else if self.policy == CachePolicy::Adaptive && at_capacity {
            let victim = self
                .cache
                .least_frequent(self.admission.epoch(call))
                .unwrap_or(0);
            let cache = &self.cache;
            match self
                .admission
                .decide(sig.precomputed_hash(), call, candidate, victim, |since| {
                    cache.used_since(since)
                }) {
                Ok(admit) => admitted = Some(admit),
                Err(refusal) => {
                    return MissAction::Interpret(FallbackReason::NotAdmitted {
                        miss: reason.clone(),
                        refusal,
                    })
                }
            }
        }
        if let Some(guard) = &mut self.cool_down {
            if let Verdict::Interpret {
                remaining_cool_down,
                transition,
            } = guard.on_miss(call)
            {
                if let Some(transition) = transition {
                    notes.push(Note {
                        change: ModeChange::CoolDown(transition),
                        last_miss: Some(reason.clone()),
                    });
                }
                return MissAction::Interpret(FallbackReason::Thrashing {
                    miss: reason.clone(),
                    remaining_cool_down,
                });
            }
        }
        let flight = Flight::new();
        self.remembered.remove(sig);
        self.in_flight.insert(
            sig.clone(),
            InFlight {
                flight: Arc::clone(&flight),
                call: call_sig.clone(),
                reserved: None,
                progress: match caller {
                    Caller::Blocking => Progress::Running(Instant::now()),
                    Caller::Background => Progress::Preparing,
                },
            },
        );
        MissAction::Compile {
            started: Started {
                generation: self.generation,
                admitted,
                caller: Caller::Blocking,
            },
            flight,
            generalization,
        }
    }

    fn note(&self, notes: &mut Vec<Note>, change: ModeChange) {
        notes.push(self.noted(change));
    }

    fn noted(&self, change: ModeChange) -> Note {
        Note {
            change,
            last_miss: self.last_miss.clone(),
        }
    }

    /// Accounts for an entry that left the cache: its frequency is kept, and
    /// an admission still due is wasted.
    fn left(&mut self, evicted: &Evicted<E>) -> Option<ModeChange> {
        let call = self.counters.calls;
        self.admission
            .keep(evicted.sig.precomputed_hash(), evicted.frequency, call);
        evicted.pay_off.on_leave().and_then(|s| self.settle(s))
    }

    /// Accounts for a settled admission.
    fn settle(&mut self, settled: Settled) -> Option<ModeChange> {
        self.counters.wasted_compiles += u64::from(settled == Settled::Wasted);
        self.admission.settle(settled).map(ModeChange::Budget)
    }

    fn snapshot(&self, function: &FunctionId) -> FunctionStats {
        let mut counters = self.counters.clone();
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

/// The state of `func` in `functions`, made (in the next generation) if
/// there is none (with nothing recalled: a cache that `remembers` recalls
/// a function before it makes its state, see [`CacheState::recalled`]).
fn function<'a, E>(
    functions: &'a mut HashMap<FunctionId, FunctionState<E>, PrecomputedState>,
    next_generation: &mut u64,
    func: &FunctionId,
    (config, remembers): (&CacheConfig, bool),
) -> &'a mut FunctionState<E> {
    functions.entry(func.clone()).or_insert_with(|| {
        *next_generation += 1;
        FunctionState::new(func, *next_generation, config, (None, remembers))
    })
}

/// All functions, the global budget and the global counters.
#[derive(Debug)]
pub(crate) struct CacheState<E> {
    functions: HashMap<FunctionId, FunctionState<E>, PrecomputedState>,
    budget: Budget,
    /// Global use counter: orders entries of all functions by recency.
    tick: u64,
    next_generation: u64,
    total: Counters,
    /// Successful compiles' times, over all functions.
    compiled: Mean,
    /// The cache keeps what its policy learns (it has a
    /// [`PolicyMemory`](crate::PolicyMemory)): a function is recalled
    /// before its state is made, and what it learns is kept.
    remembers: bool,
}

impl<E> CacheState<E> {
    pub(crate) fn new(config: &CacheConfig, remembers: bool) -> Self {
        CacheState {
            functions: HashMap::with_hasher(PrecomputedState),
            budget: Budget::new(config.max_total_entries, config.max_total_bytes),
            tick: 0,
            next_generation: 0,
            total: Counters::default(),
            compiled: Mean::default(),
            remembers,
        }
    }

    /// Whether `func` is to be recalled before anything is done with it:
    /// the cache remembers, and has no state for it.
    pub(crate) fn needs_recall(&self, func: &FunctionId) -> bool {
        self.remembers && !self.functions.contains_key(func)
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
        if !self.functions.contains_key(func) {
            self.next_generation += 1;
            let state = FunctionState::new(
                func,
                self.next_generation,
                config,
                (recalled, self.remembers),
            );
            self.functions.insert(func.clone(), state);
        }
    }

    /// Whether `func` has `sig` cached.
    pub(crate) fn contains(&self, func: &FunctionId, sig: &Signature) -> bool {
        self.functions
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
        let remembers = self.remembers;
        let state = function(
            &mut self.functions,
            &mut self.next_generation,
            func,
            (config, remembers),
        );
        if state.cache.contains(sig) || state.in_flight.contains_key(sig) {
            return None;
        }
        let started = Started {
            generation: state.generation,
            admitted: Some(Admit::Requested),
            caller: Caller::Blocking,
        };
        Some(self.finish_compile(func, sig, None, started, &Ok(compiled), elapsed, config))
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
        if let Some(state) = self.functions.get_mut(func) {
            self.tick += 1;
            self.total.calls += 1;
            return Some(state.call(
                sig,
                self.tick,
                (&mut self.total, &mut self.budget),
                &self.compiled,
                config,
                caller,
            ));
        }
        if self.remembers {
            return None;
        }
        self.tick += 1;
        self.total.calls += 1;
        let state = function(
            &mut self.functions,
            &mut self.next_generation,
            func,
            (config, false),
        );
        Some(state.call(
            sig,
            self.tick,
            (&mut self.total, &mut self.budget),
            &self.compiled,
            config,
            caller,
        ))
    }

    /// Records how long interpreting a call of `func` took.
    pub(crate) fn report_interpreted(
        &mut self,
        func: &FunctionId,
        took: Duration,
        config: &CacheConfig,
    ) {
        let remembers = self.remembers;
        function(
            &mut self.functions,
            &mut self.next_generation,
            func,
            (config, remembers),
        )
        .interpreted
        .record(took);
    }

    /// Records a compile's result: caches the executable (evicting what the
    /// capacity and budgets require) or remembers the failure. `sig` is the
    /// signature compiled; `call`, the signature of the call whose miss
    /// compiled it (`None` for one compiled ahead), whose dims a successful
    /// compile commits to its shape class.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_compile(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        call: Option<&Signature>,
        started: Started,
        result: &Result<(Arc<E>, usize), Arc<CompileFailure>>,
        elapsed: Duration,
        config: &CacheConfig,
    ) -> Finished<E> {
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
        compiled.add_to(&mut self.total);
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
        let Some(state) = self
            .functions
            .get_mut(func)
            .filter(|s| s.generation == started.generation)
        else {
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
                            self.total.generalizations =
                                self.total.generalizations.saturating_sub(1);
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
            self.total.evictions += 1;
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
        if !self.remembers {
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
                    .iter()
                    .filter_map(|(id, s)| s.cache.lru_tick().map(|t| (id, t))),
            )
            .cloned();
            let Some(victim) = victim else { break };
            let Some(state) = self.functions.get_mut(&victim) else {
                break;
            };
            let Some(evicted) = state.cache.pop_lru(cause) else {
                break;
            };
            state.counters.evictions += 1;
            self.total.evictions += 1;
            self.budget.remove(evicted.bytes);
            if let Some(change) = state.left(&evicted) {
                finished.notes.push((victim.clone(), state.noted(change)));
            }
            finished.evicted.push((victim, evicted));
        }
    }

    /// Removes the in-flight marker of a compile whose call unwound before
    /// reporting; no failure is remembered, so the next call compiles again.
    pub(crate) fn abandon_compile(&mut self, func: &FunctionId, sig: &Signature, generation: u64) {
        self.total.compiles += 1;
        self.total.failed_compiles += 1;
        if let Some(state) = self
            .functions
            .get_mut(func)
            .filter(|s| s.generation == generation)
        {
            state.land(sig, &mut self.budget);
            state.counters.compiles += 1;
            state.counters.failed_compiles += 1;
        }
    }

    /// Whether a queued compile is still wanted (its function was not
    /// forgotten, or redefined and forgotten, since it was queued); if it
    /// is, it runs from `now` on.
    pub(crate) fn start_queued(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        generation: u64,
        now: Instant,
    ) -> bool {
        let in_flight = self
            .functions
            .get_mut(func)
            .filter(|s| s.generation == generation)
            .and_then(|s| s.in_flight.get_mut(sig));
        match in_flight {
            Some(in_flight) => {
                in_flight.progress = Progress::Running(now);
                true
            }
            None => false,
        }
    }

    /// Counts a queueing call whose compile (of `sig`, in `flight`) is
    /// queued with `ticket`, and whether it runs in the interpreter
    /// meanwhile (or waits); notes the ticket, unless the compile started
    /// already.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn queued(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        generation: u64,
        flight: &Arc<Flight<CompileResult<E>>>,
        ticket: u64,
        interprets: bool,
    ) {
        self.total.compiles_queued += 1;
        self.total.fallback_calls += u64::from(interprets);
        let Some(state) = self
            .functions
            .get_mut(func)
            .filter(|s| s.generation == generation)
        else {
            return;
        };
        state.counters.compiles_queued += 1;
        state.counters.fallback_calls += u64::from(interprets);
        if let Some(in_flight) = state.in_flight.get_mut(sig) {
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
    pub(crate) fn withdraw_compile(
        &mut self,
        func: &FunctionId,
        sig: &Signature,
        generation: u64,
        why: Withdrawal,
    ) {
        let (queue_full, interprets) = match why {
            Withdrawal::QueueFull { interprets } => (true, interprets),
            Withdrawal::NotWanted => (false, false),
        };
        self.total.compiles_withdrawn += u64::from(!queue_full);
        self.total.queue_full += u64::from(queue_full);
        self.total.fallback_calls += u64::from(interprets);
        if let Some(state) = self
            .functions
            .get_mut(func)
            .filter(|s| s.generation == generation)
        {
            state.land(sig, &mut self.budget);
            state.counters.compiles_withdrawn += u64::from(!queue_full);
            state.counters.queue_full += u64::from(queue_full);
            state.counters.fallback_calls += u64::from(interprets);
        }
    }

    /// Counts a call that ran in the interpreter after its miss: it waited
    /// for a compile that failed, or a queueing call chose not to wait.
    pub(crate) fn count_fallback(&mut self, func: &FunctionId) {
        self.total.fallback_calls += 1;
        if let Some(state) = self.functions.get_mut(func) {
            state.counters.fallback_calls += 1;
        }
    }

    /// Forgets `func`: its entries, failures, thrash state and counters (the
    /// totals keep them). Compiles in flight finish without being cached.
    pub(crate) fn remove_function(&mut self, func: &FunctionId) -> Vec<(FunctionId, Evicted<E>)> {
        let Some(mut state) = self.functions.remove(func) else {
            return Vec::new();
        };
        self.drained(func, &mut state)
    }

    /// Forgets every function, as `remove_function`.
    pub(crate) fn remove_all(&mut self) -> Vec<(FunctionId, Evicted<E>)> {
        let functions =
            std::mem::replace(&mut self.functions, HashMap::with_hasher(PrecomputedState));
        let mut out = Vec::new();
        for (func, mut state) in functions {
            out.extend(self.drained(&func, &mut state));
        }
        out
    }

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
        self.total.evictions += evicted.len() as u64;
        for e in &evicted {
            self.budget.remove(e.bytes);
        }
        evicted.into_iter().map(|e| (func.clone(), e)).collect()
    }

    /// Forgets every remembered compile failure; returns how many.
    pub(crate) fn clear_failures(&mut self) -> usize {
        self.functions
            .values_mut()
            .map(|s| s.failures.clear())
            .sum()
    }

    pub(crate) fn stats(&self, config: &CacheConfig) -> CacheStats {
        let mut functions: Vec<FunctionStats> = self
            .functions
            .iter()
            .map(|(id, s)| s.snapshot(id))
            .collect();
        functions.sort_by(|a, b| a.function.cmp(&b.function));
        let mut total = self.total.clone();
        total.live_entries = self.budget.entries();
        total.live_bytes = self.budget.bytes();
        CacheStats {
            total,
            functions,
            max_total_entries: config.max_total_entries,
            max_total_bytes: config.max_total_bytes,
        }
    }

    /// Every cached executable with its function and signature.
    pub(crate) fn entries(&self) -> Vec<(FunctionId, Signature, Arc<E>)> {
        self.functions
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
