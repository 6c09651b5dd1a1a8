//! Cost of one cache hit: signature build + hash + lookup + LRU touch + `Arc`
//! clone, for 1-, 3- and 8-argument signatures, single-threaded and with 8
//! threads contending for the same cache, under each cache policy in the
//! same run; then, with entries with dynamic dims cached, an exact hit and a
//! hit served by a dynamic entry next to the static-only figure; then what
//! counting hot sizes costs a ragged batch's dynamic hits in
//! `get_or_queue` (`CacheConfig::specialize_hot_sizes` off and on).
//!
//! Run: `cargo bench -p jit-cache --bench hit_cost` (optionally followed by
//! `-- ITERATIONS`, default 2,000,000 per measurement). A benchmark reports
//! figures; it asserts nothing.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use jit_cache::{
    CacheConfig, CachePolicy, CapturedScalar, CompileFailure, DType, Dispatch, Executable,
    FunctionId, JitCache, Prepared, Signature,
};

struct Exe(usize);

impl Executable for Exe {
    fn size_bytes(&self) -> usize {
        self.0
    }
}

/// The shapes a caller would read off its tensors.
struct Call {
    dims: Vec<Vec<i64>>,
    captured: Option<Arc<str>>,
}

impl Call {
    fn new(args: usize, captured: bool) -> Self {
        let shapes: [&[i64]; 4] = [&[1, 5], &[64, 128], &[1, 5, 1], &[32]];
        Call {
            dims: (0..args).map(|i| shapes[i % 4].to_vec()).collect(),
            captured: captured.then(|| Arc::from("temperature")),
        }
    }

    /// Builds the signature as the consumer does on every call.
    #[inline]
    fn signature(&self) -> Signature {
        let mut b = Signature::builder();
        for d in &self.dims {
            b.arg(DType::F32, d);
        }
        if let Some(name) = &self.captured {
            b.captured(CapturedScalar::f32(Arc::clone(name), 0.8));
        }
        b.build()
    }
}

fn never(_: &Signature) -> Result<Exe, CompileFailure> {
    Err(CompileFailure::message("a hit never compiles"))
}

/// Runs `iters` hits; returns the elapsed time.
fn hits(cache: &JitCache<Exe>, f: &FunctionId, call: &Call, iters: u64) -> Duration {
    let start = Instant::now();
    for _ in 0..iters {
        let sig = call.signature();
        match cache.get_or_compile(f, black_box(&sig), never) {
            Dispatch::Compiled { exe, .. } => {
                black_box(&exe);
            }
            Dispatch::Interpret { .. } => unreachable!("the signature was compiled up front"),
        }
    }
    start.elapsed()
}

fn ns(d: Duration, n: u64) -> f64 {
    d.as_nanos() as f64 / n as f64
}

/// What the cache holds besides the call's own signature.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Setup {
    /// Static signatures only.
    StaticOnly,
    /// Also two entries with dynamic dims that would serve the call: the
    /// exact entry is found first.
    DynamicPresent,
    /// No exact entry: the call is served by an entry with its first dim
    /// dynamic (after one with all of arg 0's dims dynamic is passed over).
    DynamicHit,
}

fn warmed(call: &Call, policy: CachePolicy, setup: Setup) -> (JitCache<Exe>, FunctionId) {
    let cache = JitCache::new({
        let mut config = CacheConfig::default();
        config.policy = policy;
        config
    })
    .expect("default settings are valid");
    let f = FunctionId::new("bench", 1);
    let sig = call.signature();
    let compile = |_: &Signature| Ok(Exe(16 << 10));
    let mut cached = 0;
    // The exact signature first: once a dynamic entry generalizes it, a
    // call with it is a (dynamic) hit and never compiles it.
    if setup != Setup::DynamicHit {
        let _ = cache.get_or_compile(&f, &sig, compile);
        cached += 1;
    }
    if setup != Setup::StaticOnly {
        let rank = sig.args()[0].rank();
        let first_arg: Vec<(usize, usize)> = (0..rank).map(|d| (0, d)).collect();
        for dynamic in [
            sig.with_dynamic_dims(&first_arg),
            sig.with_dynamic_dims(&[(0, 0)]),
        ] {
            let _ = cache.get_or_compile(&f, &dynamic, compile);
            cached += 1;
        }
    }
    // Other signatures so the lookup is not in a one-entry table: 7 entries
    // in all, below the capacity of 8, so nothing is evicted.
    for n in 0..7 - cached {
        let other = Signature::builder().arg(DType::I8, &[n]).build();
        let _ = cache.get_or_compile(&f, &other, compile);
    }
    hits(&cache, &f, call, 10_000);
    (cache, f)
}

/// ns per hit: building the signature, looking it up, both on one thread,
/// and both on 8 threads (per call and aggregate).
struct Row {
    build: f64,
    lookup: f64,
    single: f64,
    per_call: f64,
    aggregate: f64,
}

fn measure(call: &Arc<Call>, policy: CachePolicy, setup: Setup, iters: u64) -> Row {
    let (cache, f) = warmed(call, policy, setup);

    let start = Instant::now();
    for _ in 0..iters {
        black_box(call.signature());
    }
    let build = ns(start.elapsed(), iters);

    let sig = call.signature();
    let start = Instant::now();
    for _ in 0..iters {
        let _ = black_box(cache.get_or_compile(&f, black_box(&sig), never));
    }
    let lookup = ns(start.elapsed(), iters);

    let single = ns(hits(&cache, &f, call, iters), iters);

    let threads = 8;
    let per_thread = iters / threads;
    let barrier = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (cache, f, call, barrier) = (
                cache.clone(),
                f.clone(),
                Arc::clone(call),
                Arc::clone(&barrier),
            );
            thread::spawn(move || {
                barrier.wait();
                hits(&cache, &f, &call, per_thread)
            })
        })
        .collect();
    barrier.wait();
    let start = Instant::now();
    let per_call: f64 = handles
        .into_iter()
        .map(|h| ns(h.join().expect("bench thread"), per_thread))
        .sum::<f64>()
        / threads as f64;
    let aggregate = ns(start.elapsed(), per_thread * threads);
    Row {
        build,
        lookup,
        single,
        per_call,
        aggregate,
    }
}

fn main() {
    let iters: u64 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let cases = [(1, false), (3, false), (8, false), (3, true)];
    let policies = [CachePolicy::LruCoolDown, CachePolicy::Adaptive];
    println!("jit-cache hit cost, {iters} hits per measurement (ns per hit)");
    println!(
        "{:<24} {:<14} {:>10} {:>10} {:>12} {:>15} {:>16}",
        "signature",
        "policy",
        "build sig",
        "lookup",
        "hit (1 thr)",
        "8 thr per call",
        "8 thr aggregate"
    );
    for (args, captured) in cases {
        let call = Arc::new(Call::new(args, captured));
        let label = format!("{args} args{}", if captured { " + 1 captured" } else { "" });
        // Both policies in turn, twice, keeping each one's faster run: the
        // machine's drift hits both alike.
        let mut best: Vec<Option<Row>> = policies.iter().map(|_| None).collect();
        for _ in 0..2 {
            for (policy, best) in policies.iter().zip(&mut best) {
                let row = measure(&call, *policy, Setup::StaticOnly, iters);
                if best.as_ref().is_none_or(|b| row.single < b.single) {
                    *best = Some(row);
                }
            }
        }
        for (policy, row) in policies.iter().zip(best.iter().flatten()) {
            let Row {
                build,
                lookup,
                single,
                per_call,
                aggregate,
            } = row;
            println!(
                "{label:<24} {:<14} {build:>10.1} {lookup:>10.1} {single:>12.1} {per_call:>15.1} \
                 {aggregate:>16.1}",
                policy.name()
            );
        }
        if let [Some(old), Some(new)] = &best[..] {
            println!(
                "{label:<24} {:<14} {:>10} {:>9.2}x {:>11.2}x",
                "adaptive/lru",
                "",
                new.lookup / old.lookup,
                new.single / old.single
            );
        }
    }
    println!(
        "build sig: Signature::builder()..build(); lookup: get_or_compile with a prebuilt \
         signature; hit: both.\n8 threads: all hit one cache; per call = mean of each \
         thread's time per hit, aggregate = wall time / total hits."
    );
    dynamic_dims(iters);
    ragged_dynamic_hits(iters);
}

/// Hits with entries with dynamic dims cached, next to static only, under
/// the default policy, one thread. The three caches are measured in turn in
/// short rounds (so the machine's drift hits all three alike); the figure is
/// the median round.
fn dynamic_dims(iters: u64) {
    const ROUNDS: u64 = 21;
    println!(
        "\nwith dynamic dims cached (adaptive, ns per hit, 1 thread; median of {ROUNDS} \
         interleaved rounds)"
    );
    println!(
        "{:<24} {:>12} {:>22} {:>22}",
        "signature", "static only", "exact, dynamic cached", "served by dynamic"
    );
    let setups = [Setup::StaticOnly, Setup::DynamicPresent, Setup::DynamicHit];
    let per_round = (iters / ROUNDS).max(1);
    for args in [1, 3, 8] {
        let call = Call::new(args, false);
        let caches: Vec<_> = setups
            .iter()
            .map(|setup| warmed(&call, CachePolicy::Adaptive, *setup))
            .collect();
        let mut rounds: Vec<Vec<f64>> = vec![Vec::new(); setups.len()];
        for _ in 0..ROUNDS {
            for ((cache, f), samples) in caches.iter().zip(&mut rounds) {
                samples.push(ns(hits(cache, f, &call, per_round), per_round));
            }
        }
        let [base, present, served] = [0, 1, 2].map(|i| {
            let samples = &mut rounds[i];
            samples.sort_by(f64::total_cmp);
            samples[samples.len() / 2]
        });
        println!(
            "{:<24} {base:>12.1} {:>13.1} ({:>4.2}x) {:>13.1} ({:>4.2}x)",
            format!("{args} args"),
            present,
            present / base,
            served,
            served / base
        );
    }
}

/// `get_or_queue` hits of batch sizes 1..=128 in turn, all served by one
/// entry with a dynamic batch dim (x f32[?,256]), with hot sizes counted
/// (`specialize_hot_sizes`, the default) and not: what the count costs a
/// ragged batch, which has no hot size. Median of interleaved rounds.
fn ragged_dynamic_hits(iters: u64) {
    const ROUNDS: u64 = 21;
    let sizes: Vec<Signature> = (1..=128)
        .map(|b| Signature::builder().arg(DType::F32, &[b, 256]).build())
        .collect();
    let f = FunctionId::new("mlp", 1).with_dynamic_dims();
    let caches = [false, true].map(|specialize_hot_sizes| {
        let cache = JitCache::new({
            let mut config = CacheConfig::default();
            config.specialize_hot_sizes = specialize_hot_sizes;
            config
        })
        .expect("default settings are valid");
        let general = sizes[0].with_dynamic_dims(&[(0, 0)]);
        let _ = cache.get_or_compile(&f, &general, |_| Ok(Exe(16 << 10)));
        cache
    });
    let ragged = |cache: &JitCache<Exe>, iters: u64| {
        let start = Instant::now();
        for sig in sizes.iter().cycle().take(iters as usize) {
            let prepare = |_: &Signature| -> Result<Prepared<Exe, fn() -> _>, CompileFailure> {
                unreachable!("no size of a uniform batch is hot")
            };
            match cache.get_or_queue(&f, black_box(sig), prepare) {
                Dispatch::Compiled { exe, .. } => {
                    black_box(&exe);
                }
                Dispatch::Interpret { .. } => unreachable!("the dynamic entry serves every size"),
            }
        }
        start.elapsed()
    };
    let per_round = (iters / ROUNDS).max(1);
    let mut rounds = [Vec::new(), Vec::new()];
    for _ in 0..ROUNDS {
        for (cache, samples) in caches.iter().zip(&mut rounds) {
            samples.push(ns(ragged(cache, per_round), per_round));
        }
    }
    let [off, on] = rounds.map(|mut samples| {
        samples.sort_by(f64::total_cmp);
        samples[samples.len() / 2]
    });
    println!(
        "\nragged batch (sizes 1..=128 in turn) served by one dynamic entry, get_or_queue, ns per \
         hit: hot sizes not counted {off:.1}, counted {on:.1} ({:.2}x)",
        on / off
    );
}
