//! The side-by-side table.

use std::fmt::Write;

use crate::args::Args;
use crate::workload::Record;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// The table of checkpoints for both modes, plus where the legacy mode
/// stopped if it hit the ceiling.
pub(crate) fn table(records: &[Record], args: &Args) -> String {
    let find = |mode: &str, iters: usize| {
        records
            .iter()
            .find(|r| r.mode == mode && r.is_checkpoint() && r.iters == iters)
    };
    let mut out = String::new();
    let _ = writeln!(out, "\nShape ping-pong on {}: sigmoid f32[1,5] <-> f32[1,5,1], softmax temperature 0.5 <-> 1.0\n", args.driver);
    let _ = writeln!(
        out,
        "{:>6} | {:>8} {:>9} {:>10} {:>8} {:>6} | {:>8} {:>9} {:>10} {:>8} {:>6}",
        "", "legacy", "", "", "", "", "shared", "", "", "", ""
    );
    let _ = writeln!(
        out,
        "{:>6} | {:>8} {:>9} {:>10} {:>8} {:>6} | {:>8} {:>9} {:>10} {:>8} {:>6}",
        "iters",
        "compiles",
        "runtimes",
        "RSS MiB",
        "wall s",
        "stale",
        "compiles",
        "modules",
        "RSS MiB",
        "wall s",
        "stale"
    );
    let cell = |record: Option<&Record>| match record {
        Some(r) => format!(
            "{:>8} {:>9} {:>10.1} {:>8.2} {:>6}",
            r.compiles,
            r.live_modules,
            mib(r.rss_bytes),
            r.wall_s,
            r.stale_results
        ),
        None => format!("{:>8} {:>9} {:>10} {:>8} {:>6}", "-", "-", "-", "-", "-"),
    };
    for &iters in &args.checkpoints {
        let _ = writeln!(
            out,
            "{iters:>6} | {} | {}",
            cell(find("legacy", iters)),
            cell(find("shared", iters))
        );
    }
    if let Some(stop) = records.iter().find(|r| r.kind == "stopped") {
        let _ = writeln!(
            out,
            "\nlegacy stopped after {} iterations at {:.0} MiB (ceiling {} MiB) with {} runtimes alive",
            stop.iters,
            mib(stop.rss_bytes),
            args.ceiling_bytes >> 20,
            stop.live_modules
        );
    }
    let _ = writeln!(
        out,
        "\ncompiles: legacy counts a runtime built per shape mismatch (bytes reused); stale: results that differ from the interpreter"
    );
    out
}
