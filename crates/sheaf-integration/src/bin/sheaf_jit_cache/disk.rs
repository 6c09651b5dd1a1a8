//! The disk-cache commands: `stats`, `list`, `verify`, `prune`, `clear`,
//! over the store's own listing, checks and deletions
//! (`jit_store::ArtifactStore`), on a folder opened for inspection:
//! nothing is created or written, and the deleting commands delete only
//! what is provably the cache's own. Every name printed is escaped
//! ([`shown`]).

use std::fmt::Display;
use std::path::{Path, PathBuf};

use jit_store::{
    ArtifactStore, Escaped, Removed, RunTotals, StoreConfig, StoredPolicy, TierTotals,
};
use sheaf_integration::lowering::stable_hash;
use sheaf_integration::settings::ByteSize;
use sheaf_integration::JitConfig;

use crate::report;
use crate::text::age_of;
use crate::{show, Command, Format, Outcome};

/// The disk cache's folder and bound: `dir`, else where the runtime keeps
/// it under this environment.
fn store_config(dir: Option<PathBuf>) -> Result<StoreConfig, Box<dyn std::error::Error>> {
    let config = JitConfig::from_env()?;
    let max_bytes = config.disk.max_bytes;
    match dir {
        Some(directory) => Ok({
            let mut config = StoreConfig::at(directory);
            config.max_bytes = max_bytes;
            config
        }),
        None => config.disk.store_config().ok_or_else(|| {
            "the disk cache is off here (SHEAF_JIT_DISK_CACHE=off, or neither XDG_CACHE_HOME nor \
             HOME is set; on macOS HOME): name its folder with --dir DIR"
                .into()
        }),
    }
}

/// A name or text read from disk (a file name, a function's name, a
/// signature), escaped as [`Escaped`] prints it: one line, no control
/// reaching the terminal.
pub(crate) fn shown(text: impl Display) -> String {
    Escaped::new(&text.to_string()).to_string()
}

/// A path, escaped as [`Escaped`] prints it (bytes that are not UTF-8
/// as `\xNN`).
pub(crate) fn shown_path(path: &Path) -> String {
    Escaped::new(path).to_string()
}

/// Runs a disk-cache command, its report printed as `format` says.
pub(crate) fn run(dir: Option<PathBuf>, command: Command, format: Format) -> Outcome {
    let config = store_config(dir)?;
    let directory = config.directory.clone();
    if !directory.exists() {
        let report = report::Missing {
            folder: shown_path(&directory),
            exists: false,
        };
        return show(format, command.name(), true, report, |report| {
            say!(
                "no disk cache at {} (no runtime has written one there)",
                report.folder
            );
            Ok(())
        });
    }
    // The runtime's checks (the folder's owner and mode, those of `vmfb/`,
    // `policy/` and the secret), but nothing created: not the folders, not
    // a secret.
    let store = ArtifactStore::open_for_inspection(config.clone())?;
    match command {
        Command::Stats { zero: false } => {
            let report = stats(&store, &config);
            show(format, "stats", true, report, print_stats)
        }
        Command::Stats { zero: true } => {
            let before = store.run_totals().unwrap_or_default();
            store.zero_run_totals()?;
            let report = report::Zeroed { zeroed: before };
            show(format, "zero", true, report, |report| {
                say!(
                    "statistics zeroed (they held {} runs, {} calls)",
                    report.zeroed.runs,
                    report.zeroed.calls.calls
                );
                Ok(())
            })
        }
        Command::List => show(format, "list", true, list(&store, &directory), print_list),
        Command::Verify => {
            let report = verify(&store, &directory);
            show(format, "verify", report.refused == 0, report, print_verify)
        }
        Command::Prune {
            max_bytes,
            older_than,
        } => {
            let removed = store.prune(max_bytes, older_than);
            let report = deleted(&store, &directory, &removed);
            show(format, "prune", true, report, |report| {
                say!(
                    "deleted {} entries ({}); {} left ({})",
                    report.deleted_entries,
                    ByteSize(report.deleted_bytes),
                    report.entries_left,
                    ByteSize(report.bytes_left)
                );
                say_not_own(report.not_own)
            })
        }
        Command::Clear => {
            let removed = store.clear();
            let report = deleted(&store, &directory, &removed);
            show(format, "clear", true, report, |report| {
                say!(
                    "deleted {} entries ({}) and {} policy files from {}; the folder and its \
                     secret stay",
                    report.deleted_entries,
                    ByteSize(report.deleted_bytes),
                    report.deleted_policies,
                    report.folder
                );
                say_not_own(report.not_own)
            })
        }
        Command::Help(_)
        | Command::BundleInspect(_)
        | Command::BundleVerify(_)
        | Command::Keygen { .. } => {
            unreachable!("not a disk-cache command")
        }
    }
}

/// What a deletion did, and what is left.
fn deleted(store: &ArtifactStore, directory: &Path, removed: &Removed) -> report::Deleted {
    let left = store.stored_entries();
    report::Deleted {
        folder: shown_path(directory),
        deleted_entries: removed.entries,
        deleted_bytes: removed.bytes,
        deleted_policies: removed.policies,
        not_own: removed.left,
        entries_left: left.len(),
        bytes_left: left.iter().map(|entry| entry.bytes).sum(),
    }
}

/// Says what a deletion left because it is not provably the cache's own.
fn say_not_own(not_own: usize) -> std::io::Result<()> {
    if not_own > 0 {
        say!(
            "left {not_own} files that are not provably the cache's own (not authentic, not a \
             policy file, or not named as the runtime names them): `sheaf-jit-cache verify` \
             says what each is; delete them yourself if they are not wanted"
        );
    }
    Ok(())
}

/// Says that the folder has no secret, when it has none.
fn say_no_secret(has_secret: bool) -> std::io::Result<()> {
    if !has_secret {
        say!(
            "no secret: no entry can be authenticated (a runtime that opens the folder makes a \
             new one, under which no entry here verifies)"
        );
    }
    Ok(())
}

fn stats(store: &ArtifactStore, config: &StoreConfig) -> report::Stats {
    let entries = store.stored_entries();
    let policies = store.stored_policies();
    let (totals, totals_error) = match store.run_totals() {
        Ok(totals) => (Some(totals), None),
        Err(reason) => (None, Some(reason)),
    };
    report::Stats {
        folder: shown_path(&config.directory),
        max_bytes: config.max_bytes,
        compiler: store.recorded_builder(),
        entries: entries.len(),
        bytes: entries.iter().map(|entry| entry.bytes).sum(),
        newest_used: entries
            .first()
            .map(|entry| report::seconds(entry.last_used)),
        oldest_used: entries.last().map(|entry| report::seconds(entry.last_used)),
        policies: policies.iter().filter(|p| p.policy.is_ok()).count(),
        unusable_policies: policies.iter().filter(|p| p.policy.is_err()).count(),
        has_secret: store.has_secret(),
        totals,
        totals_error,
    }
}

fn print_stats(report: &report::Stats) -> std::io::Result<()> {
    say!("disk cache   {}", report.folder);
    say!(
        "compiler     {}",
        report
            .compiler
            .as_deref()
            .map_or_else(|| "none recorded".to_owned(), shown)
    );
    say!(
        "entries      {} ({} of the {} bound, {:.1}%)",
        report.entries,
        ByteSize(report.bytes),
        ByteSize(report.max_bytes),
        report.bytes as f64 * 100.0 / report.max_bytes as f64
    );
    if let (Some(newest), Some(oldest)) = (report.newest_used, report.oldest_used) {
        say!(
            "last used    newest {}, oldest {}",
            age_of(newest),
            age_of(oldest)
        );
    }
    say!(
        "policies     {} functions' learned policies ({} unusable)",
        report.policies,
        report.unusable_policies
    );
    match (&report.totals, &report.totals_error) {
        (Some(totals), _) => print_totals(totals)?,
        (None, reason) => say!(
            "runs         statistics unusable ({}): the next process starts them again",
            shown(reason.as_deref().unwrap_or_default())
        ),
    }
    say_no_secret(report.has_secret)
}

/// The counters summed over every process that used the cache (`stats`).
fn print_totals(totals: &RunTotals) -> std::io::Result<()> {
    let calls = &totals.calls;
    say!(
        "runs         {} runtimes added their counts (since the statistics were last zeroed)",
        totals.runs
    );
    say!(
        "calls        {}: {} hits, {} misses; {} compiles ({:.1} s), {} failed; {} interpreted; \
         {} evicted",
        calls.calls,
        calls.hits,
        calls.misses,
        calls.compiles,
        calls.compile_ms as f64 / 1000.0,
        calls.failed_compiles,
        calls.fallback_calls,
        calls.evictions
    );
    say!("disk         {}", tier(&totals.disk));
    say!("remote       {}", tier(&totals.remote));
    Ok(())
}

/// A tier's lookups: hits, then misses by reason.
fn tier(totals: &TierTotals) -> String {
    format!(
        "{} hits; misses: {} absent, {} corrupt, {} unauthenticated, {} unsigned, {} unknown \
         signer, {} insecure, {} refused, {} oversized, {} unavailable",
        totals.hits,
        totals.absent,
        totals.corrupt,
        totals.unauthenticated,
        totals.unsigned,
        totals.unknown_signer,
        totals.insecure,
        totals.refused,
        totals.oversized,
        totals.unavailable
    )
}

fn list(store: &ArtifactStore, directory: &Path) -> report::List {
    let entries = store.stored_entries();
    let compiler = store.recorded_builder();
    let this_compiler = compiler.as_deref().map(|b| stable_hash(b.as_bytes()));
    report::List {
        folder: shown_path(directory),
        entries: entries
            .iter()
            .map(|entry| report::Entry {
                key: entry.key.hex(),
                path: shown_path(&entry.path),
                bytes: entry.bytes,
                last_used: report::seconds(entry.last_used),
            })
            .collect(),
        compiler,
        policies: store
            .stored_policies()
            .iter()
            .map(|policy| policy_report(policy, this_compiler))
            .collect(),
    }
}

fn policy_report(policy: &StoredPolicy, this_compiler: Option<u64>) -> report::Policy {
    let mut report = report::Policy {
        path: shown_path(&policy.path),
        last_used: report::seconds(policy.last_used),
        unusable: None,
        function: None,
        definition_hash: None,
        compiler_hash: None,
        recorded_compiler: false,
        target_hash: None,
        dynamic: Vec::new(),
        cached: Vec::new(),
    };
    match &policy.policy {
        Err(why) => report.unusable = Some(why.clone()),
        Ok((owner, learned)) => {
            report.function = Some(owner.function.clone());
            report.definition_hash = Some(report::hex(owner.definition_hash));
            report.compiler_hash = Some(report::hex(owner.compiler_hash));
            report.recorded_compiler = this_compiler == Some(owner.compiler_hash);
            report.target_hash = Some(report::hex(owner.target_hash));
            report.dynamic = learned
                .dynamic_dims()
                .map(|(class, dims)| report::DynamicClass {
                    class: class.to_string(),
                    dims: dims.iter().map(|&(arg, dim)| [arg, dim]).collect(),
                })
                .collect();
            report.cached = learned
                .hot()
                .iter()
                .map(|(signature, count)| report::CachedSignature {
                    signature: signature.to_string(),
                    recent_calls: *count,
                })
                .collect();
        }
    }
    report
}

fn print_list(report: &report::List) -> std::io::Result<()> {
    let total: u64 = report.entries.iter().map(|entry| entry.bytes).sum();
    say!(
        "{} entries in {}/vmfb, {} (most recently used first; named by key, the SHA-256 of \
         program, compiler, runtime and target):",
        report.entries.len(),
        report.folder,
        ByteSize(total)
    );
    for entry in &report.entries {
        say!(
            "  {}  {:>10}  used {}",
            entry.key,
            ByteSize(entry.bytes).to_string(),
            age_of(entry.last_used)
        );
    }
    say!(
        "{} functions with a learned policy (their signatures as last cached; compiler: {}):",
        report.policies.len(),
        report
            .compiler
            .as_deref()
            .map_or_else(|| "none recorded".to_owned(), shown)
    );
    for policy in &report.policies {
        print_policy(policy)?;
    }
    Ok(())
}

fn print_policy(policy: &report::Policy) -> std::io::Result<()> {
    if let Some(why) = &policy.unusable {
        say!("  {}: unusable: {why}", policy.path);
        return Ok(());
    }
    let compiler = match (policy.recorded_compiler, &policy.compiler_hash) {
        (true, _) => "the recorded compiler".to_owned(),
        (false, hash) => format!("another compiler ({})", hash.as_deref().unwrap_or("?")),
    };
    say!(
        "  {} #{}: learned {} with {compiler}, target {}",
        shown(policy.function.as_deref().unwrap_or_default()),
        policy.definition_hash.as_deref().unwrap_or_default(),
        age_of(policy.last_used),
        policy.target_hash.as_deref().unwrap_or_default()
    );
    for class in &policy.dynamic {
        let dims: Vec<String> = class
            .dims
            .iter()
            .map(|[a, d]| format!("arg {a} dim {d}"))
            .collect();
        say!("    dynamic  {}: {}", shown(&class.class), dims.join(", "));
    }
    for cached in &policy.cached {
        say!(
            "    cached   {} ({} recent calls)",
            shown(&cached.signature),
            cached.recent_calls
        );
    }
    Ok(())
}

fn verify(store: &ArtifactStore, directory: &Path) -> report::Verify {
    let entries: Vec<report::Checked> = store
        .stored_entries()
        .iter()
        .map(|entry| {
            let check = store.check_entry(entry);
            report::Checked {
                key: Some(entry.key.hex()),
                path: Some(shown_path(&entry.path)),
                ok: check.is_authentic(),
                check: check.to_string(),
            }
        })
        .collect();
    let policies: Vec<report::Checked> = store
        .stored_policies()
        .iter()
        .map(|policy| report::Checked {
            key: None,
            path: Some(shown_path(&policy.path)),
            ok: policy.policy.is_ok(),
            check: match &policy.policy {
                Ok((owner, _)) => format!("policy of {}", shown(&owner.function)),
                Err(why) => why.clone(),
            },
        })
        .collect();
    let refused = entries.iter().chain(&policies).filter(|c| !c.ok).count();
    report::Verify {
        signer: None,
        folder: shown_path(directory),
        folder_ok: store.has_secret(),
        folder_error: None,
        entries,
        policies,
        refused,
    }
}

fn print_verify(report: &report::Verify) -> std::io::Result<()> {
    if report.folder_ok {
        say!("folder {}: owner, mode and secret ok", report.folder);
    } else {
        say!("folder {}: owner and mode ok", report.folder);
        say_no_secret(false)?;
    }
    for entry in &report.entries {
        match entry.ok {
            true => say!(
                "  ok       {}  {}",
                entry.key.as_deref().unwrap_or_default(),
                entry.check
            ),
            false => say!(
                "  REFUSED  {}  {}",
                entry.path.as_deref().unwrap_or_default(),
                entry.check
            ),
        }
    }
    for policy in &report.policies {
        let marker = if policy.ok { "ok     " } else { "REFUSED" };
        say!(
            "  {marker}  {}  {}",
            policy.path.as_deref().unwrap_or_default(),
            policy.check
        );
    }
    let refused = |checked: &[report::Checked]| checked.iter().filter(|c| !c.ok).count();
    let (entries, policies) = (refused(&report.entries), refused(&report.policies));
    say!(
        "{} entries: {} ok, {entries} refused; {} policy files: {} ok, {policies} refused \
         (a runtime deletes what it refuses and compiles again)",
        report.entries.len(),
        report.entries.len() - entries,
        report.policies.len(),
        report.policies.len() - policies
    );
    Ok(())
}
