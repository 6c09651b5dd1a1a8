//! An SVG plot of RSS against iterations for both modes.

use std::fmt::Write;
use std::path::Path;

use crate::args::Args;
use crate::workload::Record;

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 480.0;
const MARGIN: f64 = 70.0;

/// Writes the plot to `path`, creating its folder.
pub fn write(path: &Path, records: &[Record], args: &Args) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    std::fs::write(path, svg(records, args))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn svg(records: &[Record], args: &Args) -> String {
    let max_iters = args.max_iters() as f64;
    let max_mib = records
        .iter()
        .map(|r| r.rss_bytes as f64 / 1048576.0)
        .fold(1.0, f64::max)
        * 1.1;
    let x = |iters: f64| MARGIN + iters / max_iters * (WIDTH - 2.0 * MARGIN);
    let y = |mib: f64| HEIGHT - MARGIN - mib / max_mib * (HEIGHT - 2.0 * MARGIN);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="30" text-anchor="middle" font-size="15">Process RSS under shape ping-pong ({})</text>"#,
        WIDTH / 2.0,
        args.driver
    );
    // Axes, ticks and labels.
    let (x0, y0, x1, y1) = (MARGIN, HEIGHT - MARGIN, WIDTH - MARGIN, MARGIN);
    let _ = writeln!(
        out,
        r#"<path d="M{x0},{y1} L{x0},{y0} L{x1},{y0}" stroke="black" fill="none"/>"#
    );
    for i in 0..=5 {
        let fraction = f64::from(i) / 5.0;
        let (iters, mib) = (fraction * max_iters, fraction * max_mib);
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{iters:.0}</text>"#,
            x(iters),
            y0 + 18.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{mib:.0}</text>"#,
            x0 - 6.0,
            y(mib) + 4.0
        );
        let _ = writeln!(
            out,
            r##"<path d="M{x0},{:.1} L{x1},{:.1}" stroke="#ddd"/>"##,
            y(mib),
            y(mib)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">iterations</text>"#,
        WIDTH / 2.0,
        HEIGHT - 25.0
    );
    let _ = writeln!(
        out,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">RSS (MiB)</text>"#,
        HEIGHT / 2.0,
        HEIGHT / 2.0
    );
    // One polyline per mode, with a legend entry.
    for (index, (mode, color, label)) in [
        (
            "legacy",
            "#d62728",
            "legacy: runtime per recompile, one slot",
        ),
        ("shared", "#1f77b4", "shared: one runtime, bounded LRU"),
    ]
    .into_iter()
    .enumerate()
    {
        let points: Vec<String> = records
            .iter()
            .filter(|r| r.mode == mode)
            .map(|r| {
                format!(
                    "{:.1},{:.1}",
                    x(r.iters as f64),
                    y(r.rss_bytes as f64 / 1048576.0)
                )
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline points="{}" stroke="{color}" stroke-width="2" fill="none"/>"#,
            points.join(" ")
        );
        let ly = MARGIN + 10.0 + 18.0 * index as f64;
        let _ = writeln!(
            out,
            r#"<path d="M{},{ly} L{},{ly}" stroke="{color}" stroke-width="3"/>"#,
            MARGIN + 15.0,
            MARGIN + 40.0
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}">{label}</text>"#,
            MARGIN + 48.0,
            ly + 4.0
        );
    }
    out.push_str("</svg>\n");
    out
}
