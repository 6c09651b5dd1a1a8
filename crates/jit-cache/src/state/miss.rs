//! A miss, decided in named steps: what to compile (the call's signature
//! or its generalization), whether a failure blocks it, whether a compile
//! of it is in flight, whether admission or the cool-down lets it compile,
//! and what the miss counts.

use std::sync::Arc;

use crate::admission::{Admit, Refusal};
use crate::config::{CachePolicy, InFlightPolicy};
use crate::dispatch::FallbackReason;
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::failures::FailureCheck;
use crate::generalize::Generalization;
use crate::learned::LearnedPolicy;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::thrash::Verdict;
use crate::wait_rule::Estimates;

use super::context::CallContext;
use super::function::FunctionState;
use super::step::{Caller, InFlight, Miss, MissAction, ModeChange, Note, Progress, Started, Step};

/// What a miss would compile, once it is known not to be blocked or in
/// flight.
struct Wanted<'s> {
    /// The call's own signature.
    call: &'s Signature,
    /// Its generalization, compiled instead when there is one.
    generalization: Option<Box<Generalization>>,
    /// The recent frequency of what it would compile, this miss included.
    candidate: u32,
}

impl Wanted<'_> {
    /// The signature compiled: the generalization's, or the call's.
    fn target(&self) -> &Signature {
        self.generalization
            .as_deref()
            .map_or(self.call, Generalization::signature)
    }
}

impl<E> FunctionState<E> {
    /// A miss of `sig`, the function's `call`-th call: counts it, decides
    /// what the call does, and what the policy learns from it.
    #[cold]
    #[inline(never)]
    pub(super) fn miss(
        &mut self,
        sig: &Signature,
        call: u64,
        mut notes: Vec<Note>,
        ctx: &CallContext<'_>,
    ) -> Step<E> {
        self.counters.misses += 1;
        self.remembered.called(sig);
        let generalization = self.generalization_of(sig);
        let estimates = self.estimates(ctx);
        // Every miss counts towards the frequency of what it would compile,
        // whatever it then does.
        let target = generalization
            .as_deref()
            .map_or(sig, Generalization::signature);
        let candidate = self.admission.record_miss(target.precomputed_hash(), call);
        let wanted = Wanted {
            call: sig,
            generalization,
            candidate,
        };
        let (reason, action) = match self.failures.check(wanted.target()) {
            FailureCheck::Blocked {
                error,
                retry_in_calls,
            } => blocked(error, retry_in_calls),
            check => match self.join(wanted.target(), ctx, estimates.is_some()) {
                Some(wait) => (MissReason::CompileInFlight, wait),
                None => {
                    let reason = if matches!(check, FailureCheck::Retry) {
                        MissReason::RetryAfterFailure
                    } else {
                        self.cache.explain_miss(sig, self.counters.misses == 1)
                    };
                    let action = self.decide_compile(wanted, call, &reason, &mut notes, ctx);
                    (reason, action)
                }
            },
        };
        let action = self.book(action, ctx.caller);
        let learned = self.learn_from_interpreted(sig, &action);
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

    /// The generalization of `sig` to compile instead of it, once some of
    /// its dims vary, counting the dims of the calls whose compile
    /// succeeded or is in flight, and the call's own. The call's dims are
    /// committed only if its compile succeeds (`finish_compile`), and the
    /// compile callback checks the call's own signature before compiling a
    /// generalization: a call whose dims do not fit together never counts
    /// towards a dim varying. A call already refused as itself asks for no
    /// generalization. A signature an earlier process had cached comes back
    /// as it was: its own variant, not its generalization.
    fn generalization_of(&mut self, sig: &Signature) -> Option<Box<Generalization>> {
        let in_flight = &self.in_flight;
        self.generalizer
            .as_mut()
            .filter(|_| !self.remembered.contains(sig) && !self.failures.contains(sig))
            .and_then(|g| g.generalize(sig, in_flight.values().map(|f| &f.call)))
            .map(Box::new)
    }

    /// What a queueing call weighs to wait for its compile or interpret:
    /// only a queueing call may wait or not, and only once its function's
    /// interpreted time is known.
    fn estimates(&self, ctx: &CallContext<'_>) -> Option<Estimates> {
        match ctx.caller {
            Caller::Background => Estimates::new(
                self.interpreted.get(),
                self.compiled.get(),
                ctx.compiled.get(),
            ),
            Caller::Blocking => None,
        }
    }

    /// What a miss does when `target` is compiling already: wait for it
    /// (a blocking call, unless the policy says interpret; a queueing one
    /// that may weigh it), or interpret. `None` when it is not in flight.
    fn join(
        &self,
        target: &Signature,
        ctx: &CallContext<'_>,
        may_wait: bool,
    ) -> Option<MissAction<E>> {
        let in_flight = self.in_flight.get(target)?;
        let wait = MissAction::Wait {
            flight: Arc::clone(&in_flight.flight),
            progress: in_flight.progress,
        };
        Some(match (ctx.caller, ctx.config.in_flight) {
            (Caller::Blocking, InFlightPolicy::Wait) => wait,
            (Caller::Background, _) if may_wait => wait,
            (Caller::Background, _) | (_, InFlightPolicy::Interpret) => {
                MissAction::Interpret(FallbackReason::CompileInFlight)
            }
        })
    }

    /// Compiles what `wanted` names, unless admission refuses it at
    /// capacity or the cool-down sends it to the interpreter.
    fn decide_compile(
        &mut self,
        wanted: Wanted<'_>,
        call: u64,
        reason: &MissReason,
        notes: &mut Vec<Note>,
        ctx: &CallContext<'_>,
    ) -> MissAction<E> {
        let admitted = match self.admit(&wanted, call) {
            Ok(admitted) => admitted,
            Err(refusal) => {
                return MissAction::Interpret(FallbackReason::NotAdmitted {
                    miss: reason.clone(),
                    refusal,
                })
            }
        };
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
        let sig = wanted.target();
        self.remembered.remove(sig);
        self.in_flight.insert(
            sig.clone(),
            InFlight {
                flight: Arc::clone(&flight),
                call: wanted.call.clone(),
                reserved: None,
                progress: match ctx.caller {
                    Caller::Blocking => Progress::Running(ctx.now()),
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
            generalization: wanted.generalization,
        }
    }

    /// Whether [`CachePolicy::Adaptive`] admits what `wanted` names: below
    /// capacity, with no reason (`None`); at capacity, a signature an
    /// earlier process had cached, or one that admission prefers to the
    /// least frequent cached one.
    fn admit(&mut self, wanted: &Wanted<'_>, call: u64) -> Result<Option<Admit>, Refusal> {
        let at_capacity = self.cache.len() >= self.cache.capacity();
        if self.policy != CachePolicy::Adaptive || !at_capacity {
            return Ok(None);
        }
        let sig = wanted.target();
        if self.remembered.contains(sig) {
            return Ok(Some(Admit::Recalled));
        }
        let victim = self
            .cache
            .least_frequent(self.admission.epoch(call))
            .unwrap_or(0);
        let cache = &self.cache;
        self.admission
            .decide(
                sig.precomputed_hash(),
                call,
                wanted.candidate,
                victim,
                |since| cache.used_since(since),
            )
            .map(Some)
    }

    /// Counts what the miss does (a generalization compiled, a call sent
    /// to the interpreter, a refusal), and marks a queueing call's compile
    /// as queued.
    fn book(&mut self, mut action: MissAction<E>, caller: Caller) -> MissAction<E> {
        self.last_refusal = None;
        match &mut action {
            MissAction::Compile {
                generalization,
                started,
                ..
            } => {
                if let Some(generalization) = generalization {
                    self.counters.generalizations += 1;
                    self.earlier_generalization = self
                        .last_generalization
                        .replace(Generalization::clone(generalization));
                }
                if caller == Caller::Background {
                    // The compile is to be queued; the call counts how it
                    // ran once it knows (`JitCache::get_or_queue`).
                    started.caller = Caller::Background;
                }
            }
            MissAction::Interpret(why) => {
                self.counters.fallback_calls += 1;
                if let FallbackReason::NotAdmitted { refusal, .. } = why {
                    self.counters.admissions_refused += 1;
                    self.last_refusal = Some(*refusal);
                }
            }
            MissAction::Wait { .. } => {}
        }
        action
    }

    /// Nothing is known against a call the policy did not compile (at
    /// capacity, in a cool-down): its dims count, so that a class's misses
    /// gather on one dynamic variant, which is then admitted by its
    /// frequency. A call blocked by a failure, or whose compile is in
    /// flight, adds nothing. Returns what the policy learned, if that
    /// changed.
    fn learn_from_interpreted(
        &mut self,
        sig: &Signature,
        action: &MissAction<E>,
    ) -> Option<LearnedPolicy> {
        let MissAction::Interpret(
            FallbackReason::NotAdmitted { .. } | FallbackReason::Thrashing { .. },
        ) = action
        else {
            return None;
        };
        let varies = self
            .generalizer
            .as_mut()
            .is_some_and(|generalizer| generalizer.commit(sig));
        if varies {
            self.learned_if_changed()
        } else {
            None
        }
    }
}

/// A miss of a signature whose compile failed recently: interpret, and say
/// when it is tried again.
fn blocked<E>(error: Arc<CompileFailure>, retry_in_calls: u64) -> (MissReason, MissAction<E>) {
    (
        MissReason::CompileFailedEarlier {
            error: Arc::clone(&error),
            retry_in_calls,
        },
        MissAction::Interpret(FallbackReason::CompileFailed(error)),
    )
}
