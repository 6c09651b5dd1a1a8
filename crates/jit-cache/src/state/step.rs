//! What the state decides and hands back to `cache/`: a call's [`Step`],
//! a miss's [`MissAction`], a started compile's [`Started`] and a finished
//! one's [`Finished`], with the mode changes to log ([`Note`]).

use std::sync::Arc;
use std::time::Instant;

use crate::admission::{Admit, BudgetChange};
use crate::dispatch::FallbackReason;
use crate::error::CompileFailure;
use crate::explain::MissReason;
use crate::function_cache::Evicted;
use crate::function_id::FunctionId;
use crate::generalize::Generalization;
use crate::learned::LearnedPolicy;
use crate::signature::Signature;
use crate::single_flight::Flight;
use crate::thrash::Transition;
use crate::wait_rule::Estimates;

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
pub(super) struct InFlight<E> {
    pub(super) flight: Arc<Flight<CompileResult<E>>>,
    /// The signature of the call that started it: until the compile ends,
    /// its dims count towards its class's dims varying (pending).
    pub(super) call: Signature,
    pub(super) progress: Progress,
    /// Bytes of the global budget held for it (a hot-size specialization,
    /// which must not evict), released when it leaves the map.
    pub(super) reserved: Option<usize>,
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

/// Why a successful compile's executable was not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotCached {
    TooLarge,
    FunctionEvicted,
}

/// A compile started under the lock, as later calls name it: its
/// function, the signature compiled, and the generation of the function's
/// state it was started in (a state made since does not take it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CompileId<'a> {
    pub(crate) func: &'a FunctionId,
    pub(crate) sig: &'a Signature,
    pub(crate) generation: u64,
}

/// A compile's result, as its caller reports it to
/// [`CacheState::finish_compile`](super::CacheState::finish_compile).
#[derive(Debug)]
pub(crate) struct CompileReport<'a, E> {
    /// The signature compiled.
    pub(crate) sig: &'a Signature,
    /// The signature of the call whose miss compiled it (`None` for one
    /// compiled ahead), whose dims a successful compile commits to its
    /// shape class.
    pub(crate) call: Option<&'a Signature>,
    pub(crate) started: Started,
    /// The executable with its size, or the failure.
    pub(crate) result: &'a Result<(Arc<E>, usize), Arc<CompileFailure>>,
    /// How long it took (what its caller says, for one compiled ahead).
    pub(crate) elapsed: std::time::Duration,
    /// Whether the executable was fetched ready-made, not compiled
    /// ([`Executable::fetched`](crate::Executable::fetched)).
    pub(crate) fetched: bool,
}
