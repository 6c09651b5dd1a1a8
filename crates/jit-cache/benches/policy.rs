//! Policy simulator: the first version's policy (`CachePolicy::LruCoolDown`)
//! and the adaptive one side by side on synthetic call traces, with mock
//! executables and deterministic seeds.
//!
//! For each workload it prints, per policy, the share of calls that ran
//! compiled code, that share against the offline optimum (the best fixed set
//! of `capacity` signatures, chosen knowing the whole trace), the compiles,
//! the evictions, and for phase changes the recovery: calls after the change
//! until the first compiled call, and until every later call runs compiled.
//!
//! Run: `cargo bench -p jit-cache --bench policy` (optionally followed by
//! `-- CALLS CAPACITY`, default 10,000 calls per workload and capacity 8). A
//! benchmark reports figures; it asserts nothing.

use std::collections::HashMap;

use jit_cache::{
    CacheConfig, CachePolicy, CompileFailure, DType, Executable, FunctionId, JitCache, Provenance,
    Signature,
};

struct Exe;

impl Executable for Exe {
    fn size_bytes(&self) -> usize {
        16 << 10
    }
}

/// xorshift64*: deterministic, good enough to draw call traces.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.unit() * n as f64) as usize
    }
}

/// Draws signature ids `0..n` with probability ∝ 1 / (rank + 1)^s; ranks
/// are shuffled onto ids so that ids say nothing about popularity.
struct Zipf {
    cumulative: Vec<f64>,
    ids: Vec<usize>,
}

impl Zipf {
    fn new(n: usize, s: f64, rng: &mut Rng) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(s);
                total
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|c| c / total)
            .collect();
        let mut ids: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            ids.swap(i, rng.below(i + 1));
        }
        Zipf { cumulative, ids }
    }

    fn draw(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        let rank = self.cumulative.partition_point(|&c| c < u);
        self.ids[rank.min(self.ids.len() - 1)]
    }
}

/// A workload: a trace of signature ids, and where its phase changes.
struct Workload {
    name: String,
    trace: Vec<usize>,
    phase_change: Option<usize>,
}

fn zipf(n: usize, s: f64, calls: usize, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    let zipf = Zipf::new(n, s, &mut rng);
    Workload {
        name: format!("(a) zipf s={s:.1} over {n}"),
        trace: (0..calls).map(|_| zipf.draw(&mut rng)).collect(),
        phase_change: None,
    }
}

/// Zipf churn over 64 signatures, then `narrow` signatures never seen
/// before, called in turn.
fn phase_change(narrow: usize, calls: usize, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    let zipf = Zipf::new(64, 1.0, &mut rng);
    let half = calls / 2;
    let mut trace: Vec<usize> = (0..half).map(|_| zipf.draw(&mut rng)).collect();
    trace.extend((0..calls - half).map(|i| 64 + i % narrow));
    let label = if narrow == 2 { "(b)" } else { "(f)" };
    Workload {
        name: format!("{label} churn, then {narrow} new"),
        trace,
        phase_change: Some(half),
    }
}

fn cyclic(n: usize, calls: usize) -> Workload {
    Workload {
        name: format!("(c) cyclic scan over {n}"),
        trace: (0..calls).map(|i| i % n).collect(),
        phase_change: None,
    }
}

fn ping_pong(calls: usize) -> Workload {
    Workload {
        name: "(d) ping-pong over 2".to_owned(),
        trace: (0..calls).map(|i| i % 2).collect(),
        phase_change: None,
    }
}

fn uniform(n: usize, calls: usize, seed: u64) -> Workload {
    let mut rng = Rng::new(seed);
    Workload {
        name: format!("(e) uniform over {n}"),
        trace: (0..calls).map(|_| rng.below(n)).collect(),
        phase_change: None,
    }
}

/// The compiled share of the best fixed set of `capacity` signatures.
fn offline_optimum(trace: &[usize], capacity: usize) -> f64 {
    let mut counts: HashMap<usize, usize> = HashMap::new();
    for &id in trace {
        *counts.entry(id).or_default() += 1;
    }
    let mut counts: Vec<usize> = counts.into_values().collect();
    counts.sort_unstable_by(|a, b| b.cmp(a));
    counts.iter().take(capacity).sum::<usize>() as f64 / trace.len() as f64
}

/// What one policy did on one workload.
struct Run {
    compiled: usize,
    compiles: u64,
    compiles_second_half: u64,
    evictions: u64,
    /// Calls after the phase change until the first compiled call.
    first_compiled: Option<usize>,
    /// Calls after the phase change until every later call ran compiled.
    all_compiled: Option<usize>,
}

fn simulate(workload: &Workload, capacity: usize, policy: CachePolicy) -> Run {
    let cache: JitCache<Exe> = JitCache::new({
        let mut config = CacheConfig::default();
        config.function_capacity = capacity;
        config.policy = policy;
        config
    })
    .expect("a valid configuration");
    let f = FunctionId::new("simulated", 1);
    let signatures: HashMap<usize, Signature> = workload
        .trace
        .iter()
        .map(|&id| {
            let sig = Signature::builder()
                .arg(DType::F32, &[1 + id as i64, 16])
                .arg(DType::F32, &[16])
                .build();
            (id, sig)
        })
        .collect();
    let compile = |_: &Signature| -> Result<Exe, CompileFailure> { Ok(Exe) };
    let half = workload.trace.len() / 2;
    let mut compiled_calls = Vec::with_capacity(workload.trace.len());
    let mut compiles_at_half = 0;
    for (i, id) in workload.trace.iter().enumerate() {
        if i == half {
            compiles_at_half = cache.stats().total.compiles;
        }
        let ((), outcome) = cache.call(&f, &signatures[id], compile, |_| (), |_| ());
        compiled_calls.push(matches!(outcome, Provenance::Compiled(_)));
    }
    let stats = cache.stats();
    let (first_compiled, all_compiled) = match workload.phase_change {
        Some(at) => {
            let after = &compiled_calls[at..];
            (
                after.iter().position(|&c| c),
                Some(after.iter().rposition(|&c| !c).map_or(0, |i| i + 1)),
            )
        }
        None => (None, None),
    };
    Run {
        compiled: compiled_calls.iter().filter(|&&c| c).count(),
        compiles: stats.total.compiles,
        compiles_second_half: stats.total.compiles - compiles_at_half,
        evictions: stats.total.evictions,
        first_compiled,
        all_compiled,
    }
}

fn main() {
    let numbers: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let calls = numbers.first().copied().unwrap_or(10_000);
    let capacity = numbers.get(1).copied().unwrap_or(8).max(1);
    let mut workloads = Vec::new();
    for (i, s) in [0.8, 1.0, 1.2].into_iter().enumerate() {
        for n in [20, 64] {
            workloads.push(zipf(n, s, calls, 0x5eed + 17 * i as u64 + n as u64));
        }
    }
    workloads.push(phase_change(2, calls, 0xb0b));
    workloads.push(cyclic(capacity + 1, calls));
    workloads.push(ping_pong(calls));
    workloads.push(uniform(100, calls, 0xe));
    if capacity != 2 {
        workloads.push(phase_change(capacity, calls, 0xf00));
    }

    println!("jit-cache policy simulator: capacity {capacity}, {calls} calls per workload");
    println!(
        "{:<26} {:>8} | {:>13} {:>9} {:>8} {:>9} {:>9} | {:>13} {:>9} {:>8} {:>9} {:>9}",
        "workload",
        "optimum",
        "lru compiled",
        "of opt",
        "compiles",
        "2nd half",
        "evicted",
        "adaptive",
        "of opt",
        "compiles",
        "2nd half",
        "evicted",
    );
    let mut recoveries = Vec::new();
    for w in &workloads {
        let optimum = offline_optimum(&w.trace, capacity);
        let mut line = format!("{:<26} {:>7.1}%", w.name, 100.0 * optimum);
        for policy in [CachePolicy::LruCoolDown, CachePolicy::Adaptive] {
            let run = simulate(w, capacity, policy);
            let share = run.compiled as f64 / w.trace.len() as f64;
            line += &format!(
                " | {:>12.1}% {:>8.1}% {:>8} {:>9} {:>9}",
                100.0 * share,
                100.0 * share / optimum,
                run.compiles,
                run.compiles_second_half,
                run.evictions
            );
            if let (Some(first), Some(all)) = (run.first_compiled, run.all_compiled) {
                recoveries.push(format!(
                    "{:<26} {:<12} first compiled call {first} calls after the change, \
                     all compiled from {all} calls after",
                    w.name,
                    format!("{policy:?}")
                ));
            } else if w.phase_change.is_some() {
                recoveries.push(format!(
                    "{:<26} {:<12} no compiled call after the change",
                    w.name,
                    format!("{policy:?}")
                ));
            }
        }
        println!("{line}");
    }
    println!("\nrecovery after the phase change (capacity {capacity}):");
    for r in recoveries {
        println!("{r}");
    }
    println!(
        "\noptimum: compiled share of the best fixed set of {capacity} signatures (offline). \
         2nd half: compiles in the second half of the trace."
    );
}
