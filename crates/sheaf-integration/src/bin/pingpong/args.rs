//! Command-line arguments.

use std::path::PathBuf;

pub(crate) const USAGE: &str = "\
usage: pingpong [--iters 30,500,5000] [--driver local-sync|local-task]
                [--ceiling-mib 2048] [--plot FILE.svg] [--json]

  --iters        checkpoints; the run lasts until the largest
  --driver       IREE driver for every mode (default local-sync)
  --ceiling-mib  the legacy mode stops when its RSS passes this (default 2048)
  --plot         where to write the SVG plot (default target/pingpong/rss.svg)
  --json         one JSON object per checkpoint and mode (and one with
                 kind `first_result` per mode, and one with kind `stopped` if
                 legacy hit the ceiling) instead of the table

SHEAF_JIT_TRACE=1 prints one line per miss, compile, eviction and fallback.";

/// Which design a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Legacy,
    Shared,
    Background,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Shared => "shared",
            Mode::Background => "background",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub checkpoints: Vec<usize>,
    pub driver: String,
    pub ceiling_bytes: u64,
    pub plot: PathBuf,
    pub json: bool,
    /// Set in the child processes only.
    pub child: Option<Mode>,
}

impl Args {
    pub(crate) fn parse(args: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args {
            checkpoints: vec![30, 500, 5000],
            driver: "local-sync".into(),
            ceiling_bytes: 2048 << 20,
            plot: PathBuf::from("target/pingpong/rss.svg"),
            json: false,
            child: None,
        };
        let mut args = args.peekable();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--iters" => {
                    let list = value("--iters")?;
                    parsed.checkpoints = list
                        .split(',')
                        .map(|n| {
                            n.trim()
                                .parse::<usize>()
                                .map_err(|e| format!("--iters {list}: {e}"))
                        })
                        .collect::<Result<_, _>>()?;
                    parsed.checkpoints.sort_unstable();
                    parsed.checkpoints.dedup();
                    if parsed.checkpoints.first() == Some(&0) || parsed.checkpoints.is_empty() {
                        return Err("--iters needs positive iteration counts".into());
                    }
                }
                "--driver" => parsed.driver = value("--driver")?,
                "--ceiling-mib" => {
                    let mib: u64 = value("--ceiling-mib")?
                        .parse()
                        .map_err(|e| format!("--ceiling-mib: {e}"))?;
                    parsed.ceiling_bytes = mib << 20;
                }
                "--plot" => parsed.plot = value("--plot")?.into(),
                "--json" => parsed.json = true,
                "--child" => {
                    parsed.child = Some(match value("--child")?.as_str() {
                        "legacy" => Mode::Legacy,
                        "shared" => Mode::Shared,
                        "background" => Mode::Background,
                        other => return Err(format!("unknown mode `{other}`")),
                    })
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        Ok(parsed)
    }

    pub(crate) fn max_iters(&self) -> usize {
        *self.checkpoints.last().expect("at least one checkpoint")
    }

    /// The arguments a child process of `mode` gets.
    pub(crate) fn child_args(&self, mode: Mode) -> Vec<String> {
        let iters = self
            .checkpoints
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        vec![
            "--child".into(),
            mode.name().into(),
            "--iters".into(),
            iters,
            "--driver".into(),
            self.driver.clone(),
            "--ceiling-mib".into(),
            (self.ceiling_bytes >> 20).to_string(),
        ]
    }
}
