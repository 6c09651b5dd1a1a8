//! Command-line arguments.

use std::path::PathBuf;

pub(crate) const USAGE: &str = "\
usage: pingpong [--iters 30,500,5000] [--driver local-sync|local-task]
                [--ceiling-mib 2048] [--plot FILE.svg] [--json]
                [--ragged [--calls 2000]] [--cache-dir DIR]

  --iters        checkpoints; the run lasts until the largest
  --ragged       the ragged-batch scenario instead: mlp_layer with a batch
                 size uniform in 1..=128 (fixed seed), legacy vs the static
                 cache vs dynamic dims, then a restart: a new process on the
                 dynamic run's disk cache (plot: target/pingpong/ragged-rss.svg)
  --calls        calls in the ragged scenario (default 2000)
  --cache-dir    a disk cache to fill and keep: the shared mode's (without
                 it the ping-pong has none), or the dynamic and restart
                 modes' (--ragged; without it, a temporary folder); look
                 inside with `sheaf-jit-cache --dir DIR list`. A second run
                 on it loads what the first compiled
  --driver       IREE driver for every mode (default local-sync)
  --ceiling-mib  the legacy mode stops when its RSS passes this (default 2048)
  --plot         where to write the SVG plot (default target/pingpong/rss.svg)
  --json         one JSON object per checkpoint and mode (and one with
                 kind `first_result` per mode, and one with kind `stopped` if
                 legacy hit the ceiling) instead of the table

SHEAF_JIT_LOG=sheaf_jit=debug prints one line per miss, compile, eviction and
fallback (the runs print warnings by default); SHEAF_JIT_TRACE=1 does too
and prints each run's statistics at its end.";

/// Which design a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Legacy,
    Shared,
    Background,
    /// The ragged scenario's cache with dynamic dims off.
    Static,
    /// The ragged scenario's cache with dynamic dims on (the default).
    Dynamic,
    /// The ragged scenario's dynamic mode again, in a new process on the
    /// disk cache of the first.
    Restart,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Legacy => "legacy",
            Mode::Shared => "shared",
            Mode::Background => "background",
            Mode::Static => "static",
            Mode::Dynamic => "dynamic",
            Mode::Restart => "restart",
        }
    }

    /// Parses a mode's [`name`](Mode::name).
    fn parse(name: &str) -> Result<Mode, lexopt::Error> {
        [
            Mode::Legacy,
            Mode::Shared,
            Mode::Background,
            Mode::Static,
            Mode::Dynamic,
            Mode::Restart,
        ]
        .into_iter()
        .find(|mode| mode.name() == name)
        .ok_or_else(|| format!("unknown mode `{name}`").into())
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Args {
    pub checkpoints: Vec<usize>,
    pub driver: String,
    pub ceiling_bytes: u64,
    /// `None`: the default for the scenario.
    pub plot: Option<PathBuf>,
    pub json: bool,
    /// The ragged-batch scenario instead of the ping-pong.
    pub ragged: bool,
    pub ragged_calls: usize,
    /// Set in the child processes only.
    pub child: Option<Mode>,
    /// The disk cache of the shared mode, or of the ragged scenario's
    /// dynamic and restart modes (given, or a temporary folder the parent
    /// makes for the ragged scenario), passed to those children.
    pub cache_dir: Option<PathBuf>,
}

impl Args {
    /// Parses the command line (without the program name); `None` for
    /// `--help`.
    pub(crate) fn parse(
        args: impl IntoIterator<Item = String>,
    ) -> Result<Option<Args>, lexopt::Error> {
        use lexopt::Arg::{Long, Short};
        use lexopt::ValueExt as _;
        let mut parsed = Args {
            checkpoints: vec![30, 500, 5000],
            driver: "local-sync".into(),
            ceiling_bytes: 2048 << 20,
            plot: None,
            json: false,
            ragged: false,
            ragged_calls: 2000,
            child: None,
            cache_dir: None,
        };
        let mut parser = lexopt::Parser::from_args(args);
        while let Some(arg) = parser.next()? {
            match arg {
                Short('h') | Long("help") => return Ok(None),
                Long("iters") => {
                    let list = parser.value()?.string()?;
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
                Long("driver") => parsed.driver = parser.value()?.string()?,
                Long("ceiling-mib") => {
                    let mib: u64 = parser.value()?.parse()?;
                    parsed.ceiling_bytes = mib << 20;
                }
                Long("plot") => parsed.plot = Some(parser.value()?.into()),
                Long("json") => parsed.json = true,
                Long("ragged") => parsed.ragged = true,
                Long("calls") => {
                    parsed.ragged_calls = parser.value()?.parse()?;
                    if parsed.ragged_calls == 0 {
                        return Err("--calls needs a positive count".into());
                    }
                }
                Long("child") => parsed.child = Some(Mode::parse(&parser.value()?.string()?)?),
                Long("cache-dir") => parsed.cache_dir = Some(parser.value()?.into()),
                _ => return Err(arg.unexpected()),
            }
        }
        Ok(Some(parsed))
    }

    pub(crate) fn max_iters(&self) -> usize {
        if self.ragged {
            return self.ragged_calls;
        }
        *self.checkpoints.last().expect("at least one checkpoint")
    }

    /// The modes the scenario compares, in order (the ragged restart runs
    /// on the dynamic run's disk cache, so after it).
    pub(crate) fn modes(&self) -> &'static [Mode] {
        if self.ragged {
            &[Mode::Legacy, Mode::Static, Mode::Dynamic, Mode::Restart]
        } else {
            &[Mode::Legacy, Mode::Shared, Mode::Background]
        }
    }

    /// Where the plot goes.
    pub(crate) fn plot_path(&self) -> PathBuf {
        self.plot.clone().unwrap_or_else(|| {
            PathBuf::from(if self.ragged {
                "target/pingpong/ragged-rss.svg"
            } else {
                "target/pingpong/rss.svg"
            })
        })
    }

    /// The arguments a child process of `mode` gets.
    pub(crate) fn child_args(&self, mode: Mode) -> Vec<String> {
        let iters = self
            .checkpoints
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let mut args: Vec<String> = vec![
            "--child".into(),
            mode.name().into(),
            "--iters".into(),
            iters,
            "--driver".into(),
            self.driver.clone(),
            "--ceiling-mib".into(),
            (self.ceiling_bytes >> 20).to_string(),
        ];
        if self.ragged {
            args.extend([
                "--ragged".into(),
                "--calls".into(),
                self.ragged_calls.to_string(),
            ]);
        }
        if let (Some(dir), Mode::Shared | Mode::Dynamic | Mode::Restart) = (&self.cache_dir, mode) {
            args.push("--cache-dir".into());
            args.push(dir.display().to_string());
        }
        args
    }
}
