//! The disk-cache commands: `stats`, `list`, `verify`, `prune`, `clear`,
//! over the store's own listing, checks and deletions
//! (`jit_store::ArtifactStore`), on a folder opened for inspection:
//! nothing is created or written, and the deleting commands delete only
//! what is provably the cache's own. Every name printed is escaped
//! ([`shown`]).

use std::fmt::Display;
use std::path::{Path, PathBuf};

use jit_store::{ArtifactStore, Escaped, Removed, StoreConfig, StoredPolicy, TierTotals};
use sheaf_integration::lowering::stable_hash;
use sheaf_integration::settings::ByteSize;
use sheaf_integration::JitConfig;

use crate::text::age;
use crate::{Command, Outcome};

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

/// Runs a disk-cache command.
pub(crate) fn run(dir: Option<PathBuf>, command: Command) -> Outcome {
    let config = store_config(dir)?;
    let directory = config.directory.clone();
    if !directory.exists() {
        say!(
            "no disk cache at {} (no runtime has written one there)",
            Escaped::new(&directory)
        );
        return Ok(true);
    }
    // The runtime's checks (the folder's owner and mode, those of `vmfb/`,
    // `policy/` and the secret), but nothing created: not the folders, not
    // a secret.
    let store = ArtifactStore::open_for_inspection(config.clone())?;
    match command {
        Command::Stats { zero: false } => stats(&store, &config),
        Command::Stats { zero: true } => {
            let before = store.run_totals().unwrap_or_default();
            store.zero_run_totals()?;
            say!(
                "statistics zeroed (they held {} runs, {} calls)",
                before.runs,
                before.calls.calls
            );
            Ok(true)
        }
        Command::List => list(&store, &directory),
        Command::Verify => verify(&store, &directory),
        Command::Prune {
            max_bytes,
            older_than,
        } => {
            let removed = store.prune(max_bytes, older_than);
            let left = store.stored_entries();
            say!(
                "deleted {} entries ({}); {} left ({})",
                removed.entries,
                ByteSize(removed.bytes),
                left.len(),
                ByteSize(left.iter().map(|entry| entry.bytes).sum())
            );
            say_left(&removed)
        }
        Command::Clear => {
            let removed = store.clear();
            say!(
                "deleted {} entries ({}) and {} policy files from {}; the folder and its secret stay",
                removed.entries,
                ByteSize(removed.bytes),
                removed.policies,
                Escaped::new(&directory)
            );
            say_left(&removed)
        }
        Command::Help(_)
        | Command::BundleInspect(_)
        | Command::BundleVerify(_)
        | Command::Keygen { .. } => {
            unreachable!("not a disk-cache command")
        }
    }
}

/// Says what a deletion left because it is not provably the cache's own.
fn say_left(removed: &Removed) -> Outcome {
    if removed.left > 0 {
        say!(
            "left {} files that are not provably the cache's own (not authentic, not a policy \
             file, or not named as the runtime names them): `sheaf-jit-cache verify` says what \
             each is; delete them yourself if they are not wanted",
            removed.left
        );
    }
    Ok(true)
}

/// Says that the folder has no secret, when it has none.
fn say_no_secret(store: &ArtifactStore) -> Outcome {
    if !store.has_secret() {
        say!(
            "no secret: no entry can be authenticated (a runtime that opens the folder makes a \
             new one, under which no entry here verifies)"
        );
    }
    Ok(true)
}

fn stats(store: &ArtifactStore, config: &StoreConfig) -> Outcome {
    let entries = store.stored_entries();
    let bytes: u64 = entries.iter().map(|entry| entry.bytes).sum();
    let policies = store.stored_policies();
    say!("disk cache   {}", Escaped::new(&config.directory));
    say!(
        "compiler     {}",
        store
            .recorded_builder()
            .map_or_else(|| "none recorded".to_owned(), shown)
    );
    say!(
        "entries      {} ({} of the {} bound, {:.1}%)",
        entries.len(),
        ByteSize(bytes),
        ByteSize(config.max_bytes),
        bytes as f64 * 100.0 / config.max_bytes as f64
    );
    if let (Some(newest), Some(oldest)) = (entries.first(), entries.last()) {
        say!(
            "last used    newest {}, oldest {}",
            age(newest.last_used),
            age(oldest.last_used)
        );
    }
    let unusable = policies.iter().filter(|p| p.policy.is_err()).count();
    say!(
        "policies     {} functions' learned policies ({} unusable)",
        policies.len() - unusable,
        unusable
    );
    say_run_totals(store)?;
    say_no_secret(store)
}

/// The counters summed over every process that used the cache (`stats`).
fn say_run_totals(store: &ArtifactStore) -> Result<(), Box<dyn std::error::Error>> {
    let totals = match store.run_totals() {
        Ok(totals) => totals,
        Err(reason) => {
            say!(
                "runs         statistics unusable ({}): the next process starts them again",
                shown(reason)
            );
            return Ok(());
        }
    };
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

fn list(store: &ArtifactStore, directory: &Path) -> Outcome {
    let entries = store.stored_entries();
    let total: u64 = entries.iter().map(|entry| entry.bytes).sum();
    say!(
        "{} entries in {}, {} (most recently used first; named by key, the SHA-256 of \
         program, compiler, runtime and target):",
        entries.len(),
        Escaped::new(&directory.join("vmfb")),
        ByteSize(total)
    );
    for entry in &entries {
        say!(
            "  {}  {:>10}  used {}",
            entry.key.hex(),
            ByteSize(entry.bytes).to_string(),
            age(entry.last_used)
        );
    }
    let builder = store.recorded_builder();
    let this_compiler = builder.as_deref().map(|b| stable_hash(b.as_bytes()));
    let policies = store.stored_policies();
    say!(
        "{} functions with a learned policy (their signatures as last cached; compiler: {}):",
        policies.len(),
        builder
            .as_deref()
            .map_or_else(|| "none recorded".to_owned(), shown)
    );
    for policy in &policies {
        print_policy(policy, this_compiler)?;
    }
    Ok(true)
}

fn print_policy(policy: &StoredPolicy, this_compiler: Option<u64>) -> std::io::Result<()> {
    let (owner, learned) = match &policy.policy {
        Ok(read) => read,
        Err(why) => {
            say!("  {}: unusable: {why}", Escaped::new(&policy.path));
            return Ok(());
        }
    };
    let compiler = if this_compiler == Some(owner.compiler_hash) {
        "the recorded compiler".to_owned()
    } else {
        format!("another compiler ({:016x})", owner.compiler_hash)
    };
    say!(
        "  {} #{:016x}: learned {} with {compiler}, target {:016x}",
        Escaped::new(&owner.function),
        owner.definition_hash,
        age(policy.last_used),
        owner.target_hash
    );
    for (class, dims) in learned.dynamic_dims() {
        let dims: Vec<String> = dims
            .iter()
            .map(|(a, d)| format!("arg {a} dim {d}"))
            .collect();
        say!("    dynamic  {}: {}", shown(class), dims.join(", "));
    }
    for (signature, count) in learned.hot() {
        say!("    cached   {} ({count} recent calls)", shown(signature));
    }
    Ok(())
}

fn verify(store: &ArtifactStore, directory: &Path) -> Outcome {
    if store.has_secret() {
        say!(
            "folder {}: owner, mode and secret ok",
            Escaped::new(directory)
        );
    } else {
        say!("folder {}: owner and mode ok", Escaped::new(directory));
        say_no_secret(store)?;
    }
    let entries = store.stored_entries();
    let mut refused = 0;
    for entry in &entries {
        let check = store.check_entry(entry);
        if check.is_authentic() {
            say!("  ok       {}  {check}", entry.key.hex());
        } else {
            refused += 1;
            say!("  REFUSED  {}  {check}", Escaped::new(&entry.path));
        }
    }
    let policies = store.stored_policies();
    let mut unusable = 0;
    for policy in &policies {
        match &policy.policy {
            Ok((owner, _)) => say!(
                "  ok       {}  policy of {}",
                Escaped::new(&policy.path),
                Escaped::new(&owner.function)
            ),
            Err(why) => {
                unusable += 1;
                say!("  REFUSED  {}  {why}", Escaped::new(&policy.path));
            }
        }
    }
    say!(
        "{} entries: {} ok, {refused} refused; {} policy files: {} ok, {unusable} refused \
         (a runtime deletes what it refuses and compiles again)",
        entries.len(),
        entries.len() - refused,
        policies.len(),
        policies.len() - unusable
    );
    Ok(refused == 0 && unusable == 0)
}
