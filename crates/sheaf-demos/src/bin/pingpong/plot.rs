//! An SVG plot of RSS against iterations for every mode, drawn with
//! `plotters`: iterations on integer coordinates, so their ticks are whole
//! numbers; round tick values for the RSS.

use anyhow::{anyhow, Context as _};
use std::path::Path;

use plotters::prelude::*;

use crate::args::Args;
use crate::workload::Record;

/// A mode's name, colour and legend label.
type Series = (&'static str, RGBColor, &'static str);

/// Sheaf's original JIT, in both scenarios.
const LEGACY: Series = (
    "legacy",
    RGBColor(214, 39, 40),
    "legacy: runtime per recompile, one slot",
);

/// The ping-pong modes, in drawing order.
const PING_PONG: &[Series] = &[
    LEGACY,
    (
        "shared",
        RGBColor(31, 119, 180),
        "shared: one runtime, bounded caches",
    ),
    (
        "background",
        RGBColor(44, 160, 44),
        "background: shared, compiling in the background",
    ),
];

/// The ragged scenario's modes, in drawing order.
const RAGGED: &[Series] = &[
    LEGACY,
    (
        "static",
        RGBColor(31, 119, 180),
        "static: one variant per shape, bounded",
    ),
    (
        "dynamic",
        RGBColor(44, 160, 44),
        "dynamic: one variant for every batch size",
    ),
    (
        "restart",
        RGBColor(255, 127, 14),
        "restart: dynamic again, a new process on its disk cache",
    ),
];

/// Writes the plot to `path`, creating its folder.
pub(crate) fn write(path: &Path, records: &[Record], args: &Args) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    draw(path, records, args).map_err(|e| anyhow!("cannot draw {}: {e}", path.display()))
}

fn draw(path: &Path, records: &[Record], args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mib = |record: &Record| record.rss_bytes as f64 / 1048576.0;
    let max_mib = records.iter().map(mib).fold(1.0, f64::max) * 1.1;
    let (series, caption, x_desc) = if args.ragged {
        (RAGGED, "Process RSS under a ragged batch", "calls")
    } else {
        (PING_PONG, "Process RSS under shape ping-pong", "iterations")
    };
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{caption} ({})", args.driver), ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0..args.max_iters() as u64, 0f64..max_mib)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("RSS (MiB)")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    for &(mode, colour, label) in series {
        let points = records
            .iter()
            .filter(|record| record.mode == mode)
            .map(|record| (record.iters as u64, mib(record)));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
