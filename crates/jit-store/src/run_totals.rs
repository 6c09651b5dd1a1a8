//! [`RunTotals`]: what every process that used a cache folder did, summed
//! over all of them, in `<dir>/stats` (as `ccache -s` keeps its counts).
//!
//! A process adds its totals once, when its runtime ends (its exit, or the
//! drop of its last handle): [`ArtifactStore::add_run_totals`]. Processes
//! that end at once each add theirs: an addition holds an exclusive
//! `flock(2)` on `<dir>/stats.lock` while it reads the file, adds and
//! writes the sum whole (a temporary file renamed over it), so no count is
//! lost; a lock held longer than [`LOCK_WAIT`] (a process stopped while
//! holding it) makes the addition give up, logged, rather than wait. The
//! kernel drops the lock of a process that dies, so none is ever stale.
//! The file is text, one `name value` line per counter under a version
//! line, and bounded: names this build does not know (a newer build's)
//! are dropped when it writes, and a file over [`MAX_BYTES`] or that does
//! not parse counts as empty (logged), then is replaced by the next
//! addition. It is read under the rules of the folder's other files (a
//! regular file of this user's, not a link, that nobody else may write).
//!
//! [`ArtifactStore::add_run_totals`]: crate::ArtifactStore::add_run_totals

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{flock, FlockOperation, OFlags};

use super::file_io;
use super::trust::{open_file, Owners, CLOSE_FILE};

/// The file of the totals in a store's folder.
pub(crate) const FILE: &str = "stats";

/// The lock file beside it.
pub(crate) const LOCK_FILE: &str = "stats.lock";

/// The first line of the file: its format's version.
const HEADER: &str = "sheaf-jit stats 1";

/// The largest file read: its counters and their names with room to spare.
const MAX_BYTES: u64 = 16 << 10;

/// The longest an addition waits for another process's.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Defines a struct of `u64` counters, `serde::Serialize` with the `serde`
/// feature, with the names they have in the file and a field-wise sum.
macro_rules! totals {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$field_meta:meta])* pub $field:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize))]
        #[non_exhaustive]
        pub struct $name {
            $( $(#[$field_meta])* pub $field: u64, )*
        }

        impl $name {
            /// Each counter by its name in the file.
            fn named(&self) -> impl Iterator<Item = (&'static str, u64)> {
                [$( (stringify!($field), self.$field) ),*].into_iter()
            }

            /// The counter called `name`.
            fn named_mut(&mut self, name: &str) -> Option<&mut u64> {
                match name {
                    $( stringify!($field) => Some(&mut self.$field), )*
                    _ => None,
                }
            }

            /// Adds `other`'s counters to these (saturating).
            pub fn add(&mut self, other: &$name) {
                $( self.$field = self.$field.saturating_add(other.$field); )*
            }
        }
    };
}

totals! {
    /// The JIT cache's counters, summed over processes.
    pub struct CallTotals {
        /// JIT calls.
        pub calls,
        /// Calls served by a variant in memory.
        pub hits,
        /// Calls that found none (each a lookup in the tiers below, then a
        /// compile, a wait or a fallback).
        pub misses,
        /// Compiles run (here, not fetched).
        pub compiles,
        /// Compiles that failed.
        pub failed_compiles,
        /// Their time, in milliseconds.
        pub compile_ms,
        /// Calls run by the interpreter instead.
        pub fallback_calls,
        /// Variants evicted from memory.
        pub evictions,
    }
}

totals! {
    /// The lookups of one tier (the disk cache, the remote cache), summed
    /// over processes: what they found, and why a miss missed.
    pub struct TierTotals {
        /// Entries found and used.
        pub hits,
        /// Nothing there.
        pub absent,
        /// Entries not well-formed (damaged, another format).
        pub corrupt,
        /// Entries whose tag or signature did not verify.
        pub unauthenticated,
        /// Entries without a signature where one is required.
        pub unsigned,
        /// Entries signed by a key not trusted.
        pub unknown_signer,
        /// Entries that others could have written (not read).
        pub insecure,
        /// Authentic entries the runtime refused to load.
        pub refused,
        /// Entries over the size bound.
        pub oversized,
        /// Lookups that failed (an unreachable store), or were skipped (the
        /// circuit breaker open).
        pub unavailable,
    }
}

impl CallTotals {
    /// The totals of a cache's counters.
    pub fn of(counters: &jit_cache::Counters) -> CallTotals {
        CallTotals {
            calls: counters.calls,
            hits: counters.hits,
            misses: counters.misses,
            compiles: counters.compiles,
            failed_compiles: counters.failed_compiles,
            compile_ms: u64::try_from(counters.compile_time.as_millis()).unwrap_or(u64::MAX),
            fallback_calls: counters.fallback_calls,
            evictions: counters.evictions,
        }
    }
}

impl TierTotals {
    /// The totals of a disk cache's counters.
    pub fn of_disk(stats: &crate::StoreStats) -> TierTotals {
        TierTotals {
            hits: stats.hits,
            absent: stats.absent,
            corrupt: stats.corrupt,
            unauthenticated: stats.unauthenticated,
            unsigned: stats.unsigned,
            unknown_signer: stats.unknown_signer,
            insecure: stats.insecure,
            refused: stats.refused,
            ..TierTotals::default()
        }
    }

    /// The totals of a remote tier's counters.
    #[cfg(feature = "remote")]
    pub fn of_remote(stats: &crate::RemoteStats) -> TierTotals {
        TierTotals {
            hits: stats.hits,
            absent: stats.misses,
            corrupt: stats.malformed,
            unauthenticated: stats.unauthenticated,
            unsigned: stats.unsigned,
            unknown_signer: stats.unknown_signer,
            insecure: 0,
            refused: stats.refused,
            oversized: stats.oversized,
            unavailable: stats.errors.saturating_add(stats.skipped),
        }
    }
}

/// The counters of every process that used a cache folder, summed
/// ([`ArtifactStore::run_totals`](crate::ArtifactStore::run_totals)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct RunTotals {
    /// The runtimes that added theirs.
    pub runs: u64,
    /// Their calls, hits, misses and compiles.
    pub calls: CallTotals,
    /// Their disk-cache lookups.
    pub disk: TierTotals,
    /// Their remote-cache lookups.
    pub remote: TierTotals,
}

impl RunTotals {
    /// Adds `other`'s counters to these (saturating).
    pub fn add(&mut self, other: &RunTotals) {
        self.runs = self.runs.saturating_add(other.runs);
        self.calls.add(&other.calls);
        self.disk.add(&other.disk);
        self.remote.add(&other.remote);
    }

    /// The file's text of these totals.
    fn to_text(self) -> String {
        let mut text = format!("{HEADER}\nruns {}\n", self.runs);
        let groups = [
            ("calls", self.calls.named().collect::<Vec<_>>()),
            ("disk", self.disk.named().collect()),
            ("remote", self.remote.named().collect()),
        ];
        for (group, counters) in groups {
            for (name, value) in counters {
                text.push_str(&format!("{group}.{name} {value}\n"));
            }
        }
        text
    }

    /// The totals in `text`; names this build does not know are skipped.
    fn parse(text: &str) -> Result<RunTotals, String> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(format!("its first line is not `{HEADER}`"));
        }
        let mut totals = RunTotals::default();
        for line in lines {
            let Some((name, value)) = line.split_once(' ') else {
                return Err(format!("`{line}` is not `name value`"));
            };
            let value: u64 = value
                .parse()
                .map_err(|_| format!("`{line}`: not a whole number"))?;
            let counter = match name.split_once('.') {
                None if name == "runs" => Some(&mut totals.runs),
                Some(("calls", name)) => totals.calls.named_mut(name),
                Some(("disk", name)) => totals.disk.named_mut(name),
                Some(("remote", name)) => totals.remote.named_mut(name),
                _ => None,
            };
            if let Some(counter) = counter {
                *counter = value;
            }
        }
        Ok(totals)
    }
}

/// The totals in the folder `dir`: zero when there is no file, or one that
/// cannot be used (`Err` says why).
pub(crate) fn read(dir: &Path) -> Result<RunTotals, String> {
    let path = dir.join(FILE);
    let (file, metadata) = match open_file(&path, Owners::User, CLOSE_FILE) {
        Ok(opened) => opened,
        Err(crate::StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(RunTotals::default())
        }
        Err(error) => return Err(error.to_string()),
    };
    let bytes = match file_io::read_bounded(file, &metadata, MAX_BYTES) {
        Ok(file_io::Bounded::Whole(bytes)) => bytes,
        Ok(file_io::Bounded::TooLarge(len)) => {
            return Err(format!("{len} bytes, over the bound of {MAX_BYTES}"))
        }
        Err(error) => return Err(error.to_string()),
    };
    let text = String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())?;
    RunTotals::parse(&text)
}

/// Adds `totals` to those of the folder `dir`, under its lock.
pub(crate) fn add(dir: &Path, totals: &RunTotals) -> io::Result<()> {
    let _lock = lock(dir)?;
    let mut sum = read(dir).unwrap_or_else(|reason| {
        tracing::warn!(
            target: crate::log_targets::CACHE,
            folder = %dir.display(),
            %reason,
            "the disk cache's run statistics cannot be used ({reason}): they start again from \
             zero"
        );
        RunTotals::default()
    });
    sum.add(totals);
    file_io::write_whole(&dir.join(FILE), sum.to_text().as_bytes())
}

/// Sets the totals of the folder `dir` to zero, under its lock.
pub(crate) fn zero(dir: &Path) -> io::Result<()> {
    let _lock = lock(dir)?;
    file_io::write_whole(&dir.join(FILE), RunTotals::default().to_text().as_bytes())
}

/// The folder's lock, held until the file is dropped: made (mode 0600)
/// when missing, never through a link, and waited for at most
/// [`LOCK_WAIT`].
fn lock(dir: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .mode(0o600)
        .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC).bits() as i32)
        .open(dir.join(LOCK_FILE))?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(
            "the statistics' lock is not a regular file",
        ));
    }
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(file),
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR)
                if Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "another process held the statistics' lock for {LOCK_WAIT:?} (a process \
                         stopped while adding its counts?)"
                    ),
                ))
            }
            Err(errno) => return Err(errno.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunTotals {
        let mut totals = RunTotals {
            runs: 2,
            ..RunTotals::default()
        };
        totals.calls.calls = 40;
        totals.calls.compile_ms = 1234;
        totals.disk.absent = 3;
        totals.remote.unknown_signer = 1;
        totals
    }

    #[test]
    fn totals_round_trip_as_text_and_add_up() {
        let text = sample().to_text();
        assert!(
            text.starts_with("sheaf-jit stats 1\nruns 2\ncalls.calls 40\n"),
            "{text}"
        );
        assert!(text.contains("remote.unknown_signer 1\n"), "{text}");
        assert_eq!(RunTotals::parse(&text), Ok(sample()));
        let mut sum = sample();
        sum.add(&sample());
        assert_eq!((sum.runs, sum.calls.calls, sum.disk.absent), (4, 80, 6));
        let mut full = RunTotals::default();
        full.calls.calls = u64::MAX;
        full.add(&sample());
        assert_eq!(full.calls.calls, u64::MAX, "saturates");
    }

    #[test]
    fn unknown_names_are_skipped_and_bad_lines_refused() {
        let newer = format!("{HEADER}\nruns 1\ncalls.teleports 9\nfuture.x 1\n");
        assert_eq!(RunTotals::parse(&newer).map(|t| t.runs), Ok(1));
        for bad in [
            "",
            "sheaf-jit stats 2\nruns 1\n",
            &format!("{HEADER}\nruns\n"),
            &format!("{HEADER}\nruns -1\n"),
        ] {
            assert!(RunTotals::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn additions_sum_and_zero_resets_and_a_bad_file_starts_again() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), Ok(RunTotals::default()));
        add(dir.path(), &sample()).unwrap();
        add(dir.path(), &sample()).unwrap();
        assert_eq!(read(dir.path()).unwrap().calls.calls, 80);
        zero(dir.path()).unwrap();
        assert_eq!(read(dir.path()), Ok(RunTotals::default()));
        std::fs::write(dir.path().join(FILE), "garbage").unwrap();
        assert!(read(dir.path()).is_err());
        add(dir.path(), &sample()).unwrap();
        assert_eq!(read(dir.path()), Ok(sample()));
    }
}
