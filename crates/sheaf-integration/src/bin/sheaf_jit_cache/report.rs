//! What each command found, as one value per command: printed as text, or
//! with `--json` as one JSON object on stdout. This module is the JSON
//! schema (version [`SCHEMA`]); `docs/cli-json.md` shows it.
//!
//! Every object has `schema` (this version), `command` (`stats`, `zero`,
//! `list`, `verify`, `prune`, `clear`, `bundle inspect`, `bundle verify`,
//! `keygen`) and `ok` (false when something was refused; the exit status
//! is then 1), then the command's own fields below. A command that fails
//! prints `{"schema", "command", "ok": false, "error"}` (the error and its
//! causes, one line). Times are seconds since the Unix epoch; sizes are
//! bytes; hashes and keys are lower-case hex; paths and names read from
//! disk are as the text prints them (plain text as it is; anything else
//! quoted, with C escapes: `jit_store::Escaped`).

use std::time::{SystemTime, UNIX_EPOCH};

use jit_store::RunTotals;
use serde::Serialize;

/// The schema's version: it grows fields within a version, and changes
/// version when a field changes meaning or goes.
pub(crate) const SCHEMA: u32 = 1;

/// What every command prints.
#[derive(Debug, Serialize)]
pub(crate) struct Output<'a, T: Serialize> {
    pub(crate) schema: u32,
    pub(crate) command: &'a str,
    pub(crate) ok: bool,
    #[serde(flatten)]
    pub(crate) report: T,
}

/// A command that failed: the error and its causes.
#[derive(Debug, Serialize)]
pub(crate) struct Failed {
    pub(crate) error: String,
}

/// `stats`: what the disk cache holds, and the counters over runs.
#[derive(Debug, Serialize)]
pub(crate) struct Stats {
    pub(crate) folder: String,
    pub(crate) max_bytes: u64,
    /// The compiler build recorded for the entries; `null` when none.
    pub(crate) compiler: Option<String>,
    pub(crate) entries: usize,
    pub(crate) bytes: u64,
    /// When the most and the least recently used entries were last used.
    pub(crate) newest_used: Option<u64>,
    pub(crate) oldest_used: Option<u64>,
    pub(crate) policies: usize,
    pub(crate) unusable_policies: usize,
    /// Whether the folder has its secret (without one, no entry verifies).
    pub(crate) has_secret: bool,
    /// The counters summed over runs; `null` when they cannot be read
    /// (`totals_error` says why).
    pub(crate) totals: Option<RunTotals>,
    pub(crate) totals_error: Option<String>,
}

/// A disk-cache command on a folder that does not exist (not an error:
/// no runtime wrote one there yet).
#[derive(Debug, Serialize)]
pub(crate) struct Missing {
    pub(crate) folder: String,
    /// Always `false`.
    pub(crate) exists: bool,
}

/// `stats --zero`: what the counters over runs held.
#[derive(Debug, Serialize)]
pub(crate) struct Zeroed {
    pub(crate) zeroed: RunTotals,
}

/// `list`: every entry and policy file.
#[derive(Debug, Serialize)]
pub(crate) struct List {
    pub(crate) folder: String,
    /// Most recently used first.
    pub(crate) entries: Vec<Entry>,
    pub(crate) compiler: Option<String>,
    pub(crate) policies: Vec<Policy>,
}

/// An entry file.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) path: String,
    pub(crate) bytes: u64,
    pub(crate) last_used: u64,
}

/// A policy file: whose, and what it learned; or why it cannot be used.
#[derive(Debug, Serialize)]
pub(crate) struct Policy {
    pub(crate) path: String,
    pub(crate) last_used: u64,
    /// Why a runtime would not use it (then the fields below are `null`
    /// or empty).
    pub(crate) unusable: Option<String>,
    pub(crate) function: Option<String>,
    pub(crate) definition_hash: Option<String>,
    pub(crate) compiler_hash: Option<String>,
    /// Whether it was learned with the compiler recorded for the entries.
    pub(crate) recorded_compiler: bool,
    pub(crate) target_hash: Option<String>,
    pub(crate) dynamic: Vec<DynamicClass>,
    pub(crate) cached: Vec<CachedSignature>,
}

/// A shape class whose dims went dynamic: `[argument, dim]` pairs.
#[derive(Debug, Serialize)]
pub(crate) struct DynamicClass {
    pub(crate) class: String,
    pub(crate) dims: Vec<[usize; 2]>,
}

/// A signature the policy had cached, with its recent calls.
#[derive(Debug, Serialize)]
pub(crate) struct CachedSignature {
    pub(crate) signature: String,
    pub(crate) recent_calls: u32,
}

/// `verify` and `bundle verify`: each file checked.
#[derive(Debug, Serialize)]
pub(crate) struct Verify {
    /// The disk cache's folder or the bundle.
    pub(crate) folder: String,
    /// `bundle verify`: the trusted key whose signature of the manifest
    /// verified; `null` for an unsigned bundle, and for `verify`.
    pub(crate) signer: Option<String>,
    /// `verify`: whether the folder has its secret; `bundle verify`:
    /// whether this program's runtime opens the bundle.
    pub(crate) folder_ok: bool,
    /// Why the folder or bundle is refused.
    pub(crate) folder_error: Option<String>,
    pub(crate) entries: Vec<Checked>,
    /// `verify` only.
    pub(crate) policies: Vec<Checked>,
    pub(crate) refused: usize,
}

/// A file checked: `ok`, and what the check found (why it is refused).
#[derive(Debug, Serialize)]
pub(crate) struct Checked {
    /// An entry's key; `null` for a policy file.
    pub(crate) key: Option<String>,
    pub(crate) path: Option<String>,
    pub(crate) ok: bool,
    pub(crate) check: String,
}

/// `prune` and `clear`: what was deleted and what is left.
#[derive(Debug, Serialize)]
pub(crate) struct Deleted {
    pub(crate) folder: String,
    pub(crate) deleted_entries: usize,
    pub(crate) deleted_bytes: u64,
    pub(crate) deleted_policies: usize,
    /// Files left because they are not provably the cache's own.
    pub(crate) not_own: usize,
    pub(crate) entries_left: usize,
    pub(crate) bytes_left: u64,
}

/// `bundle inspect`: what a bundle lists.
#[derive(Debug, Serialize)]
pub(crate) struct Bundle {
    pub(crate) bundle: String,
    /// The trusted key whose signature of the manifest verified; `null`
    /// for an unsigned bundle.
    pub(crate) signer: Option<String>,
    pub(crate) compiler: String,
    pub(crate) runtime: String,
    pub(crate) artifacts: Vec<BundledArtifact>,
    pub(crate) variants: Vec<BundledVariant>,
}

/// An artifact of a bundle.
#[derive(Debug, Serialize)]
pub(crate) struct BundledArtifact {
    pub(crate) key: String,
    pub(crate) bytes: u64,
}

/// A variant a bundle serves.
#[derive(Debug, Serialize)]
pub(crate) struct BundledVariant {
    /// `name #definition-hash`.
    pub(crate) function: String,
    pub(crate) signature: String,
    pub(crate) entry: String,
    pub(crate) key: String,
    pub(crate) target_hash: String,
}

/// `keygen`: the key's file and public key.
#[derive(Debug, Serialize)]
pub(crate) struct Key {
    pub(crate) file: String,
    pub(crate) public_key: String,
}

/// `time` as seconds since the Unix epoch (0 before it).
pub(crate) fn seconds(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// `hash` as the 16 hex digits the text output prints.
pub(crate) fn hex(hash: u64) -> String {
    format!("{hash:016x}")
}
