//! The side-by-side table.

use std::fmt::Write;

use crate::args::Args;
use crate::workload::Record;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

const MODES: [(&str, &str); 3] = [
    ("legacy", "runtimes"),
    ("shared", "modules"),
    ("background", "modules"),
];

/// The scenario's table.
pub(crate) fn table(records: &[Record], args: &Args) -> String {
    if args.ragged {
        ragged_table(records, args)
    } else {
        ping_pong_table(records, args)
    }
}

/// The ragged scenario's summary of every mode, side by side.
fn ragged_table(records: &[Record], args: &Args) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nRagged batch on {}: mlp_layer x f32[b,256] · W f32[256,256] + bias, b uniform in \
         1..={}, {} calls (fixed seed); misses wait for their compile\n",
        args.driver,
        crate::ragged::MAX_BATCH,
        args.ragged_calls
    );
    let _ = writeln!(
        out,
        "{:<8} {:>8} {:>15} {:>8} {:>17} {:>8} {:>23} {:>16} {:>5}",
        "mode",
        "compiles",
        "calls compiled",
        "wall s",
        "1st compiled ms",
        "RSS MiB",
        "RSS growth (MiB) after",
        "p50 µs per call",
        "stale"
    );
    let warm_up = crate::ragged::WARM_UP;
    for mode in args.modes() {
        let name = mode.name();
        let first_compiled = records
            .iter()
            .find(|r| r.mode == name && r.kind == "first_compiled")
            .map_or("-".to_owned(), |r| format!("{:.1}", r.wall_s * 1e3));
        match records
            .iter()
            .find(|r| r.mode == name && r.kind == "ragged")
        {
            Some(r) => {
                let _ = writeln!(
                    out,
                    "{name:<8} {:>8} {:>14.1}% {:>8.1} {first_compiled:>17} {:>8.1} {:>13.2} (call {warm_up}) {:>9.1} (>{warm_up}) {:>5}",
                    r.compiles,
                    r.compiled_calls as f64 * 100.0 / r.iters.max(1) as f64,
                    r.wall_s,
                    mib(r.rss_bytes),
                    mib(r.rss_growth_bytes),
                    r.p50_call_us,
                    r.stale_results
                );
            }
            None => {
                let stopped = records
                    .iter()
                    .find(|r| r.mode == name && r.kind == "stopped");
                let _ = writeln!(
                    out,
                    "{name:<8} did not finish{}",
                    stopped.map_or(String::new(), |r| format!(
                        ": stopped after {} calls at the {} MiB ceiling",
                        r.iters,
                        args.ceiling_bytes >> 20
                    ))
                );
            }
        }
    }
    if let Some(r) = records
        .iter()
        .find(|r| r.mode == "restart" && r.kind == "ragged")
    {
        let _ = writeln!(
            out,
            "restart: a new process on the dynamic run's disk cache, the generator's next {} \
             calls; {} variants loaded from the disk cache, {} compiled",
            r.iters, r.disk_loads, r.compiles
        );
    }
    let _ = writeln!(
        out,
        "compiles: signatures the compiler compiled (legacy also builds a runtime per shape \
         mismatch); 1st compiled: from the start to the first result of compiled code; p50: \
         from the call to its result on the host, after call {warm_up}; stale: results that \
         differ from the interpreter"
    );
    out
}

/// The table of checkpoints for every mode, the time to the first result,
/// and where the legacy mode stopped if it hit the ceiling.
fn ping_pong_table(records: &[Record], args: &Args) -> String {
    let find = |mode: &str, kind: &str, iters: usize| {
        records
            .iter()
            .find(|r| r.mode == mode && r.kind == kind && r.iters == iters)
    };
    let mut out = String::new();
    let _ = writeln!(out, "\nShape ping-pong on {}: sigmoid f32[1,5] <-> f32[1,5,1], softmax temperature 0.5 <-> 1.0\n", args.driver);
    let mut titles = format!("{:>6}", "");
    let mut headers = format!("{:>6}", "iters");
    for (mode, modules) in MODES {
        titles += &format!(" | {mode:<43}");
        headers += &format!(
            " | {:>8} {modules:>8} {:>8} {:>7} {:>5}",
            "compiles", "RSS MiB", "wall s", "stale"
        );
    }
    let _ = writeln!(out, "{}", titles.trim_end());
    let _ = writeln!(out, "{headers}");
    let cell = |record: Option<&Record>| match record {
        Some(r) => format!(
            "{:>8} {:>8} {:>8.1} {:>7.2} {:>5}",
            r.compiles,
            r.live_modules,
            mib(r.rss_bytes),
            r.wall_s,
            r.stale_results
        ),
        None => format!("{:>8} {:>8} {:>8} {:>7} {:>5}", "-", "-", "-", "-", "-"),
    };
    for &iters in &args.checkpoints {
        let mut line = format!("{iters:>6}");
        for (mode, _) in MODES {
            line += &format!(" | {}", cell(find(mode, "checkpoint", iters)));
        }
        let _ = writeln!(out, "{line}");
    }
    let firsts: Vec<String> = MODES
        .iter()
        .filter_map(|(mode, _)| {
            let r = find(mode, "first_result", 0)?;
            Some(format!("{mode} {:.3} ms", r.wall_s * 1e3))
        })
        .collect();
    let _ = writeln!(out, "\ntime to the first result: {}", firsts.join(", "));
    if let Some(alone) = find("background", "interpreter", 0) {
        let _ = writeln!(
            out,
            "the interpreter alone on that call: {:.3} ms",
            alone.wall_s * 1e3
        );
    }
    for r in records.iter().filter(|r| r.kind == "drained") {
        let _ = writeln!(
            out,
            "{}: every compile done {:.2} s after the start ({} compiles, {} modules)",
            r.mode, r.wall_s, r.compiles, r.live_modules
        );
    }
    if let Some(stop) = records.iter().find(|r| r.kind == "stopped") {
        let _ = writeln!(
            out,
            "legacy stopped after {} iterations at {:.0} MiB (ceiling {} MiB) with {} runtimes alive",
            stop.iters,
            mib(stop.rss_bytes),
            args.ceiling_bytes >> 20,
            stop.live_modules
        );
    }
    let _ = writeln!(
        out,
        "compiles: legacy counts a runtime built per shape mismatch (bytes reused), background \
         the compiles finished so far; stale: results that differ from the interpreter"
    );
    out
}
