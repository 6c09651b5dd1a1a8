//! The disk-cache commands: `stats`, `list`, `verify`, `prune`, `clear`,
//! over the store's own listing, checks and deletions
//! (`jit_cache::store::ArtifactStore`).

use std::path::{Path, PathBuf};

use jit_cache::store::{ArtifactStore, StoreConfig, StoredPolicy};
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
        Some(directory) => Ok(StoreConfig {
            directory,
            max_bytes,
        }),
        None => config.disk.store_config().ok_or_else(|| {
            "the disk cache is off here (SHEAF_JIT_DISK_CACHE=off, or neither XDG_CACHE_HOME nor \
             HOME is set; on macOS HOME): name its folder with --dir DIR"
                .into()
        }),
    }
}

/// Runs a disk-cache command.
pub(crate) fn run(dir: Option<PathBuf>, command: Command) -> Outcome {
    let config = store_config(dir)?;
    let directory = config.directory.clone();
    if !directory.exists() {
        say!(
            "no disk cache at {} (no runtime has written one there)",
            directory.display()
        );
        return Ok(true);
    }
    // The runtime's own opening: the folder's owner and mode, its secret.
    let store = ArtifactStore::open(config.clone())?;
    match command {
        Command::Stats => stats(&store, &config),
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
            Ok(true)
        }
        Command::Clear => {
            let removed = store.clear();
            say!(
                "deleted {} entries ({}) and {} policy files from {}; the folder and its secret stay",
                removed.entries,
                ByteSize(removed.bytes),
                removed.policies,
                directory.display()
            );
            Ok(true)
        }
        Command::Help(_) | Command::BundleInspect(_) | Command::BundleVerify(_) => {
            unreachable!("not a disk-cache command")
        }
    }
}

fn stats(store: &ArtifactStore, config: &StoreConfig) -> Outcome {
    let entries = store.stored_entries();
    let bytes: u64 = entries.iter().map(|entry| entry.bytes).sum();
    let policies = store.stored_policies();
    say!("disk cache   {}", config.directory.display());
    say!(
        "compiler     {}",
        store
            .recorded_builder()
            .unwrap_or_else(|| "none recorded".to_owned())
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
    Ok(true)
}

fn list(store: &ArtifactStore, directory: &Path) -> Outcome {
    let entries = store.stored_entries();
    let total: u64 = entries.iter().map(|entry| entry.bytes).sum();
    say!(
        "{} entries in {}, {} (most recently used first; named by key, the SHA-256 of \
         program, compiler, runtime and target):",
        entries.len(),
        directory.join("vmfb").display(),
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
        builder.as_deref().unwrap_or("none recorded")
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
            say!("  {}: unusable: {why}", policy.path.display());
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
        owner.function,
        owner.definition_hash,
        age(policy.last_used),
        owner.target_hash
    );
    for (class, dims) in learned.dynamic_dims() {
        let dims: Vec<String> = dims
            .iter()
            .map(|(a, d)| format!("arg {a} dim {d}"))
            .collect();
        say!("    dynamic  {class}: {}", dims.join(", "));
    }
    for (signature, count) in learned.hot() {
        say!("    cached   {signature} ({count} recent calls)");
    }
    Ok(())
}

fn verify(store: &ArtifactStore, directory: &Path) -> Outcome {
    say!("folder {}: owner, mode and secret ok", directory.display());
    let entries = store.stored_entries();
    let mut refused = 0;
    for entry in &entries {
        let check = store.check_entry(entry);
        if check.is_authentic() {
            say!("  ok       {}  {check}", entry.key.hex());
        } else {
            refused += 1;
            say!("  REFUSED  {}  {check}", entry.path.display());
        }
    }
    let policies = store.stored_policies();
    let mut unusable = 0;
    for policy in &policies {
        match &policy.policy {
            Ok((owner, _)) => say!(
                "  ok       {}  policy of {}",
                policy.path.display(),
                owner.function
            ),
            Err(why) => {
                unusable += 1;
                say!("  REFUSED  {}  {why}", policy.path.display());
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
