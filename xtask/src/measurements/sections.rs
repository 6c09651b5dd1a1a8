//! The sections of `docs/measurements.md`, defined once: each one's id,
//! title, prose and command. The prose says what the command measures and
//! how to read its output; it states no figures, since figures belong to a
//! run (the record under the command, written by `cargo xtask
//! measurements`).

/// One section: `cargo xtask measurements --only ID` reruns it.
pub(crate) struct Section {
    /// Kebab-case, unique: what `--only` takes.
    pub id: &'static str,
    /// The heading; other documents refer to a section by it.
    pub title: &'static str,
    /// Markdown paragraphs, separated by blank lines; no figures.
    pub prose: &'static str,
    /// The command as the reader types it; the first word is `cargo`.
    pub command: &'static [&'static str],
}

/// The paragraphs under the file's title, before the sections.
pub(crate) const INTRO: &str = "\
What the runtime costs, measured: the benches and demos behind the
adopter's guide (`crates/sheaf-integration/README.md`), the root
`README.md`'s headline figures and the lower layers' READMEs. Each section
says what its command measures and how to read its output, then names the
command, then gives the record of its last run: the date (UTC), the
commit, the CPU, its cores and the load average when the run started, and
the command's standard output as it printed it. Times move with the
machine and its load (the project's machine has 2 cores, often shared with
other builds), so read ratios and counts rather than absolute times, and
compare figures of one run with each other.

A record whose run line says *migrated* is the text this file had before it
was generated, copied verbatim, with the date and commit that text gave
(or, where it gave none, the commit that added the figures, from `git log
-S`); rerunning its section replaces it with the command's output.";

/// `cargo bench -p sheaf-integration --bench NAME`.
macro_rules! bench {
    ($name:literal $(, $arg:literal)*) => {
        &["cargo", "bench", "-p", "sheaf-integration", "--bench", $name $(, $arg)*]
    };
}

/// Every section, in the file's order.
pub(crate) const SECTIONS: &[Section] = &[
    Section {
        id: "pingpong",
        title: "The ping-pong demo",
        prose: "\
Sheaf's original JIT (`legacy`: one slot per function, a new runtime per
recompile kept forever, captured scalars ignored by the key) and this one,
with misses that wait for their compile (`shared`) and with compiles in the
background (`background`), on the same workload, each in its own process:
`sigmoid` alternating `f32[1,5]` / `f32[1,5,1]`, `softmax` alternating its
temperature. The demo is the `pingpong` binary of `crates/sheaf-demos`
(the old runtime's reproduction is `sheaf_demos::legacy`); it also plots
RSS against iterations to `target/pingpong/rss.svg`, and takes `--iters`,
`--driver`, `--json`, `--ceiling-mib` and `--plot` (`cargo xtask pingpong
-- --help`).

How to read it: `compiles` counts the compiles (for `legacy`, a runtime
built per shape mismatch), `stale` the results that differ from the
interpreter's. Expect `shared` to compile each distinct signature once and
keep its RSS flat as the iterations grow, and `legacy` to grow by a runtime
per mismatch. `background` answers the first call from the interpreter
while the compile threads compile; with tensors this small the iterations
may all end before the first compile does. The compiler runs in a child
process, so none of the three maps it.",
        command: &["cargo", "xtask", "pingpong"],
    },
    Section {
        id: "pingpong-local-task",
        title: "The ping-pong demo on local-task",
        prose: "\
The same demo on a `local-task` device, IREE's multi-threaded CPU driver,
whose runtimes each start worker threads: every runtime `legacy` builds
costs more here, and `legacy` stops when its RSS passes the ceiling
(`--ceiling-mib`), the table saying after how many iterations.",
        command: &["cargo", "xtask", "pingpong", "--driver", "local-task"],
    },
    Section {
        id: "ragged",
        title: "The ragged batch",
        prose: "\
The main job's second scenario: `mlp_layer` (x f32[b,256] · W
f32[256,256] + bias, relu) with the batch size b drawn uniformly from
1..=128 by a fixed-seed generator, run the legacy way, with static shapes
(this runtime with dynamic dims off), with dynamic dims (with a disk cache
of its own), and as a restart: the dynamic mode again in a new process on
that disk cache, for the generator's next calls (other sizes, in another
order). Each mode runs in its own process, misses waiting for their
compile; RSS against calls is plotted to `target/pingpong/ragged-rss.svg`,
and `--calls` sets the number of calls.

How to read it: `compiles` counts the compiler's runs (variants loaded from
the disk cache apart); `1st compiled` is the time from the mode's start
(runtime creation included) to the first result of compiled code; `calls
compiled` is the share of calls that ran compiled code rather than the
interpreter. Compile counts and RSS do not depend on the machine's load;
wall times and per-call times do. `legacy` compiles every size and builds a
runtime on nearly every call; `static` is the bounded cache with every
shape its own variant, so at capacity admission refuses most sizes and
their calls run in the interpreter; `dynamic` compiles the first size, then
one variant with a dynamic batch dim for every later size
(`crates/sheaf-integration/tests/ragged.rs` asserts the count); `restart`
starts from the policy the dynamic run learned, so its first call loads the
dynamic variant from disk and the compiler never starts.",
        command: &["cargo", "xtask", "pingpong", "--ragged"],
    },
    Section {
        id: "background-first-results",
        title: "Blocking or background: first results",
        prose: "\
`CompileMode::Blocking` against `CompileMode::Background` on a new
signature, with the compiler already loaded: the interpreter alone on the
call, the first result in each mode, and how much later the background
mode's compiled code takes over. The bench prints this table first; its
other tables are the next two sections' (one run serves all three).",
        command: bench!("background"),
    },
    Section {
        id: "background-batched-compiles",
        title: "Blocking or background: batched compiles",
        prose: "\
Eight sigmoid signatures queued at once, on one and on two compile threads,
each compiled alone (`batch_limit = 1`) or together in batches: how long
after the first call every compile is done, and how many compiler runs it
took. Read the bench's table of batched compiles.",
        command: bench!("background"),
    },
    Section {
        id: "warm-up",
        title: "Warm-up: many signatures, one compile",
        prose: "\
Sigmoid signatures compiled one by one against one `precompile` of them
all: what putting signatures into one module saves. The bench's last lines
are this table (`N sigmoid signatures: separately ... | one precompile
...`).",
        command: bench!("background"),
    },
    Section {
        id: "cached-call",
        title: "Cached-call overhead",
        prose: "\
What the JIT adds to a compiled call: `JitRuntime::dispatch` on a cache hit
against the raw `iree_safe::Function::call` of the same module (sigmoid
`f32[1,5]`, local-sync, p50 over many samples), with device tensors and
with host arrays, in both compile modes, with the upload cache off and on;
each pair's two calls alternate, on the same runtime's device, so a load
that comes and goes shifts both. Read the ratio. A `Background` call
builds its queued compile (the
lowering closure and the copy of the arguments) only when it misses; the
`Background` row shows what its hit costs beside `Blocking`'s. The
`timed` row is a runtime that times every call for its profile
(`JitConfig::time_calls`, three clock reads a call; off by default).",
        command: bench!("cached_call"),
    },
    Section {
        id: "dynamic",
        title: "Dynamic dims: what a call costs",
        prose: "\
Per-call cost of the dynamic variant against the static variant of the same
shape, and of a hot size once it got its own variant beside the dynamic
one: p50 per call, the three runtimes alternating, device tensors in and
out, local-sync. Read the ratios, `dynamic / static` and `hot / static`:
what the dynamic variant costs at each size, and whether a hot size
specialized beside it gets the static variant's cost back.",
        command: bench!("dynamic"),
    },
    Section {
        id: "devices",
        title: "Cached calls per device",
        prose: "\
Cached calls, p50, on each device the machine has: `local-sync`, and Vulkan
where there is one. Mesa's lavapipe, which `cargo xtask test` installs, is
a software device: its rows show the GPU path's overhead, not a GPU's
speed. Each function is called with device tensors in and out (device →
device) and with host arrays (host → host).",
        command: bench!("devices"),
    },
    Section {
        id: "compile-breakdown",
        title: "CPU flags and what a compile costs",
        prose: "\
Where a compile's time goes (IREE's own `--mlir-timing`), one compile
in-process and one as a subprocess, and each compiler knob through the
whole JIT path: from a call's miss to its compiled result (lowering and
load included), then the compiled code's per-call time, the knobs measured
in turns, medians. A cell reads compile time / time per call. The runtime
passes `CPU_FLAGS` to every CPU compile and `CONTRACTION_FLAGS` from
`LARGE_CONTRACTION` multiply-adds on
(`crates/sheaf-integration/src/placement/code.rs`); the next two sections
measure what those flags, and the candidates left out, do. `CPU_FLAGS` does
not reassociate floating-point reductions, which changed results: that is
the explicit opt-in `FloatSemantics::Reassociate`, whose cost is \"What the
strict default costs\".",
        command: bench!("compile_breakdown"),
    },
    Section {
        id: "tiling",
        title: "CPU flags and what a compile costs: data tiling",
        prose: "\
Square matmuls of growing size compiled without data tiling, with it and
IREE's microkernels, and with it and the tiled matmul generated (what
`CONTRACTION_FLAGS` asks for): compile time / time per call. Read where
tiling starts to pay per call, against what it adds to each compile;
`LARGE_CONTRACTION` is where the runtime starts to add it. Compare several
runs before moving that threshold: on a shared machine where the columns
cross moves from run to run.",
        command: bench!("compile_breakdown", "--", "--tiling"),
    },
    Section {
        id: "cpu-flags",
        title: "CPU flags and what a compile costs: flags and CPU devices",
        prose: "\
Compiles the reference lowerings' own modules with the runtime's flags and
with each candidate flag added, checks each result against the runtime's,
and times device-resident calls on `local-sync` and on `local-task` with
IREE's default workers (one per physical core, pinned) and with at most 1
or 2 (`DeviceSettings::cpu_workers`), everything in turns: p50 per call,
the compile beside it. Arguments after `--` keep only the functions they
name (`-- matmul`). Read each row across: `local-task` wakes its workers on
every call, which small calls pay for, and a large contraction can gain
from a second core.",
        command: bench!("cpu_flags"),
    },
    Section {
        id: "strict-default",
        title: "What the strict default costs",
        prose: "\
Per call on device-resident inputs: the runtime's flags, which keep the
compiler's floating-point semantics, against the same plus
`FloatSemantics::Reassociate`, in turns; p50 per call on `local-sync` and
on `local-task` with at most 2 workers. Read the strict / reassociate
ratio: a function pays for strict semantics only where a reduction would
vectorize once reassociated. The absolute times move with the machine's
load; the one-core FMA peak the bench prints first shows how loaded it
was.",
        command: bench!(
            "cpu_flags",
            "--",
            "--float",
            "sigmoid",
            "softmax",
            "mlp_layer"
        ),
    },
    Section {
        id: "large-contractions",
        title: "Where large contractions start",
        prose: "\
The runtime's own flags on `local-sync`, on a `local-task` device with at
most 2 workers, and on such a device beside `local-sync`, called with
`local-sync`'s tensors (how `DeviceSettings::parallel_workers` runs large
contractions): p50 per call. The bench first prints one core's f32 FMA peak
and, for each contraction, its time at that peak, a bound no code on one
core beats. Read where the two-worker columns start to gain on
`local-sync`: code below `tuning::parallel_contraction()` multiply-adds
(`PARALLEL_CONTRACTION`, 2²⁵, with AVX-512; `PARALLEL_CONTRACTION_AVX2`,
2²¹, on an AVX2-only x86-64 core) stays on `local-sync`.",
        command: bench!("cpu_flags", "--", "--now"),
    },
    Section {
        id: "contraction-peak",
        title: "Contractions against the CPU's peak",
        prose: "\
Every candidate flag on the contractions alone (`mlp_layer` at three batch
sizes, square matmuls from 256² to 1024², and 8 batched products of 256³,
as many multiply-adds as the 512² one): IREE's microkernels, data tiling on
and off, the distribution tile sizes, the workers. Each table's first line
gives its multiply-adds' time at one core's measured FMA peak: a cell's
fraction of peak is that time over the cell's, divided by its workers.
XLA's times on the same work come from `cargo xtask bench-vs-jax` (the
root README, \"Against JAX\"). A candidate becomes a default only where it
wins; on an AVX2 machine, none does for a single product, and a batch of
256³ products runs faster untiled, which `LARGE_CONTRACTION` now judges
by the largest product, not the batch.",
        command: bench!("cpu_flags", "--", "mlp_layer", "matmul"),
    },
    Section {
        id: "upload",
        title: "Upload cache and a training step: the upload cache",
        prose: "\
`mlp_layer` with `x: f32[8,256]` new on every call and the same `W:
f32[256,256]` and `b` on every call, with the upload cache off and on: p50
per call, and the bytes uploaded. The bytes column shows what the cache
saves: the arrays that do not change are not uploaded again.",
        command: bench!("upload"),
    },
    Section {
        id: "training-step",
        title: "Upload cache and a training step: a training step",
        prose: "\
GPT-2-124M-shaped parameters passed as host arrays to one
value-and-grad-shaped call per step (the loss and one gradient per
parameter, all read back to the host), local-sync, the median step after
warm-up steps; RSS is the process's, after each row in turn. The rows: (a)
host arrays with the defaults, (a') the same arrays made aligned once
(`aligned_copy`), (b) parameters device-resident, (c) host arrays with the
upload cache and imports off, (d) the floor, iree-safe with one
`allocate_buffer_copy` per argument, (e) new parameter arrays every step,
(a0) row (a) with the buffer pool off (every call's results in fresh
memory, as before the pool: the same run's before-and-after), (f) row (a) in a
process that tells glibc to keep freed memory in its heap (`mallopt`).
With the pool on, what is left is the host arrays the results are read
back into: glibc maps every block over 32 MiB afresh (the 154 MB `wte`
gradient here), which iree-safe asks to be backed by huge pages (one fault
per 2 MiB where the kernel's transparent huge pages are `madvise` or
`always`), and which (f) takes away altogether. Compare
the rows' CPU time more than their wall time, which varies more from run
to run on a shared machine.",
        command: bench!("training_step"),
    },
    Section {
        id: "startup",
        title: "Start without a compiler",
        prose: "\
Each line a fresh process on one disk cache (sigmoid `f32[1,5]`,
local-sync): `fill` compiles and fills the cache; `lazy` finds everything
on disk and never asks for a compiler; `eager` asks for the default
compiler at start (`iree_safe::compiler::choose_compiler`), then makes the
same call. Each line gives the RSS after the runtime starts and after its
first call; `compiler mapped` says whether the in-process compiler library
is in the process's memory, which a process served from the disk cache
does not need.",
        command: bench!("startup"),
    },
    Section {
        id: "remote",
        title: "Remote cache",
        prose: "\
A real `redis-server` on loopback, sigmoid `f32[n,5]`, local-sync, blocking
compiles: the first result of a signature with a fresh runtime and disk
cache when the remote cache misses (a compile), when it hits, and when the
disk cache has the remote hit's copy; then lookups of new signatures
against an unreachable server with the default timeouts (a closed port, and
a server that listens but never answers), the circuit breaker skipping
lookups after the first failures; then what a cache hit costs with the
remote cache pointing at the silent server.

A lookup is two round trips at most (`STRLEN`, then a bounded `GETRANGE`),
both within the request timeout: every read and write of the request gets
the time left to one deadline, so a server that drips its answer fails at
the deadline like a silent one. Only a miss waits for it, and in
`CompileMode::Background` that is the compile thread, not the call, which
runs in the interpreter meanwhile. A cache hit never asks the remote
cache.",
        command: bench!("remote"),
    },
];
