//! The human-readable report table (`Display` for [`CacheStats`]).

use std::fmt;

use crate::byte_size::ByteSize;
use crate::stats::{CacheStats, Counters};

const HEADERS: [&str; 16] = [
    "calls",
    "hits",
    "misses",
    "compiles",
    "fetched",
    "failed",
    "lowering refused",
    "compile time",
    "evicted",
    "fallback",
    "queued",
    "not admitted",
    "wasted",
    "entries",
    "cap",
    "bytes",
];

fn cells(c: &Counters, capacity: Option<usize>) -> [String; 16] {
    [
        c.calls.to_string(),
        c.hits.to_string(),
        c.misses.to_string(),
        c.compiles.to_string(),
        c.fetches.to_string(),
        c.failed_compiles.to_string(),
        c.refusals.to_string(),
        format!("{:.1?}", c.compile_time),
        c.evictions.to_string(),
        c.fallback_calls.to_string(),
        c.compiles_queued.to_string(),
        c.admissions_refused.to_string(),
        c.wasted_compiles.to_string(),
        c.live_entries.to_string(),
        capacity.map_or_else(|| "-".to_owned(), |n| n.to_string()),
        ByteSize::from(c.live_bytes).to_string(),
    ]
}

impl fmt::Display for CacheStats {
    /// One row per function (counters, capacity, mode, last miss) and a total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "jit-cache: {} functions, {}/{} entries, {}/{}",
            self.functions.len(),
            self.total.live_entries,
            self.max_total_entries,
            ByteSize::from(self.total.live_bytes),
            ByteSize::from(self.max_total_bytes),
        )?;
        let mut rows: Vec<(String, [String; 16], String, String)> = self
            .functions
            .iter()
            .map(|s| {
                (
                    s.function.name().to_owned(),
                    cells(&s.counters, Some(s.capacity)),
                    s.mode.to_string(),
                    match (&s.last_miss, &s.last_refusal) {
                        (Some(miss), Some(refusal)) => format!("{miss}; not admitted: {refusal}"),
                        (Some(miss), None) => miss.to_string(),
                        (None, _) => String::new(),
                    },
                )
            })
            .collect();
        rows.push((
            "(total)".to_owned(),
            cells(&self.total, None),
            String::new(),
            String::new(),
        ));
        let name_w = rows
            .iter()
            .map(|r| r.0.chars().count())
            .max()
            .unwrap_or(0)
            .max(8);
        let mut widths = HEADERS.map(str::len);
        let mut mode_w = "mode".len();
        for (_, cells, mode, _) in &rows {
            for (w, c) in widths.iter_mut().zip(cells) {
                *w = (*w).max(c.chars().count());
            }
            mode_w = mode_w.max(mode.chars().count());
        }
        let mut line = format!("{:<name_w$}", "function");
        for (h, w) in HEADERS.iter().zip(widths) {
            line += &format!("  {h:>w$}");
        }
        line += &format!("  {:<mode_w$}  last miss", "mode");
        writeln!(f, "{line}")?;
        for (name, cells, mode, last_miss) in &rows {
            let mut line = format!("{name:<name_w$}");
            for (c, w) in cells.iter().zip(widths) {
                line += &format!("  {c:>w$}");
            }
            line += &format!("  {mode:<mode_w$}  {last_miss}");
            writeln!(f, "{}", line.trim_end())?;
        }
        for s in &self.functions {
            if let Some(generalization) = &s.last_generalization {
                writeln!(
                    f,
                    "dynamic dims: {}: {generalization} (dynamic compiles: {}; calls served by \
                     dynamic dims: {}; hot sizes specialized: {})",
                    s.function.name(),
                    s.counters.generalizations,
                    s.counters.dynamic_hits,
                    s.counters.specializations
                )?;
            }
        }
        let t = &self.total;
        if t.compiles_withdrawn + t.queue_full > 0 {
            writeln!(
                f,
                "background compiles: {} queued, {} withdrawn before they ran, {} misses found \
                 the queue full",
                t.compiles_queued, t.compiles_withdrawn, t.queue_full
            )?;
        }
        Ok(())
    }
}
