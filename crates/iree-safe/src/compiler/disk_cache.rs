//! [`DiskCache`]: compiled artifacts kept on disk between runs, in front of
//! any [`Compiler`].
//!
//! Entries are files named by their [`CacheKey`] in `<directory>/vmfb/`,
//! each with a checked header (see `cache_entry`), written atomically. The
//! total size is bounded: after an insert takes the folder over
//! [`max_bytes`](DiskCacheConfig::max_bytes), the least recently used
//! entries (oldest modification time; a hit refreshes it) are deleted until
//! it is under 90 % of the bound. Several processes may share a folder: all
//! of them read, write and evict with plain file operations, so the worst a
//! race can do is delete an entry that is then compiled again.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use super::cache_entry::{self, ReadOutcome, ENTRY_EXTENSION, HEADER_LEN, TEMP_PREFIX};
use super::cache_key::CacheKey;
use super::error::CompileError;
use super::options::CompileOptions;
use super::version::CompilerVersion;
use super::{Artifact, Compiler};

/// Environment variable: the cache folder (empty or `0`: unset, use the
/// default `$XDG_CACHE_HOME/sheaf-jit`, else `$HOME/.cache/sheaf-jit`).
pub const CACHE_DIR_ENV: &str = "SHEAF_JIT_CACHE_DIR";

/// Environment variable: `0`, `off`, `false` or `no` disables the disk cache.
pub const DISK_CACHE_ENV: &str = "SHEAF_JIT_DISK_CACHE";

/// Environment variable: the size bound in bytes (a plain number, or with a
/// `K`, `M` or `G` suffix for KiB, MiB, GiB); default [`DEFAULT_MAX_BYTES`].
pub const CACHE_MAX_BYTES_ENV: &str = "SHEAF_JIT_CACHE_MAX_BYTES";

/// Default size bound: 1 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

/// Keep temporary files of crashed writers at most this long.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// Where a [`DiskCache`] keeps its entries and how much it may keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskCacheConfig {
    /// The cache folder; `None` disables the cache.
    pub directory: Option<PathBuf>,
    /// Bound on the total size of the entries, in bytes.
    pub max_bytes: u64,
}

impl DiskCacheConfig {
    /// A cache in `directory` with the default size bound.
    pub fn at(directory: impl Into<PathBuf>) -> Self {
        DiskCacheConfig {
            directory: Some(directory.into()),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// No disk cache: every compilation goes to the compiler.
    pub fn disabled() -> Self {
        DiskCacheConfig {
            directory: None,
            max_bytes: 0,
        }
    }

    /// From the environment: [`DISK_CACHE_ENV`], [`CACHE_DIR_ENV`] and
    /// [`CACHE_MAX_BYTES_ENV`]. Disabled when turned off, or when no folder
    /// is set and neither `XDG_CACHE_HOME` nor `HOME` is.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var_os(name))
    }

    fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Self {
        let set = |name: &str| var(name).filter(|value| !value.is_empty() && value != "0");
        let switch = var(DISK_CACHE_ENV).map(|v| v.to_string_lossy().trim().to_ascii_lowercase());
        if matches!(switch.as_deref(), Some("0" | "off" | "false" | "no")) {
            return Self::disabled();
        }
        let directory = set(CACHE_DIR_ENV).map(PathBuf::from).or_else(|| {
            let base = set("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| set("HOME").map(|home| PathBuf::from(home).join(".cache")))?;
            Some(base.join("sheaf-jit"))
        });
        let max_bytes = match set(CACHE_MAX_BYTES_ENV) {
            None => DEFAULT_MAX_BYTES,
            Some(value) => parse_size(&value.to_string_lossy()).unwrap_or_else(|| {
                tracing::warn!(
                    value = %value.to_string_lossy(),
                    "{CACHE_MAX_BYTES_ENV} is not a size such as `512M`; using 1G"
                );
                DEFAULT_MAX_BYTES
            }),
        };
        DiskCacheConfig {
            directory,
            max_bytes,
        }
    }
}

/// `123`, `64K`, `512M`, `2G` (binary units, case-insensitive, optional `iB`/`B`).
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_uppercase();
    let text = text.trim_end_matches('B').trim_end_matches('I');
    let (digits, shift) = match text.as_bytes().last()? {
        b'K' => (&text[..text.len() - 1], 10),
        b'M' => (&text[..text.len() - 1], 20),
        b'G' => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    digits.trim().parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// Counters of a [`DiskCache`], from [`DiskCache::stats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiskCacheStats {
    /// Compilations served from disk.
    pub hits: u64,
    /// Compilations that went to the compiler (successful or not).
    pub misses: u64,
    /// Entries found damaged, or rejected by a validation, and deleted.
    pub corrupt: u64,
    /// Compilations that bypassed a disabled cache, or a compiler that does
    /// not identify its build.
    pub bypassed: u64,
    /// Entries deleted to stay under the size bound (by this instance).
    pub evictions: u64,
    /// Entries that could not be written (the artifact was still returned).
    pub write_errors: u64,
    /// Payload bytes served from disk.
    pub bytes_read: u64,
    /// Entry bytes written (headers included).
    pub bytes_written: u64,
    /// Size of all entries in the folder: exact after the last scan, plus
    /// this instance's writes since.
    pub bytes_on_disk: u64,
}

/// A persistent artifact cache in front of a compiler, itself a
/// [`Compiler`].
///
/// The key hashes the MLIR text, the compiler's build string (version and
/// revision), the runtime build, every flag, and the identity of this
/// machine's CPU when compiling for `host`. A hit costs a file read and a
/// checksum; an entry that is damaged (or that the caller's validation
/// refuses, see [`compile_validated`](DiskCache::compile_validated)) is
/// deleted and compiled again, never trusted. Failing to write the cache
/// never fails a compilation.
///
/// Concurrent misses of one key in one `DiskCache` compile once: the other
/// threads wait and then read the entry.
#[derive(Debug)]
pub struct DiskCache {
    inner: Arc<dyn Compiler>,
    store: Option<Store>,
    counters: Counters,
    in_flight: Mutex<HashMap<CacheKey, Arc<InFlight>>>,
}

#[derive(Debug)]
struct Store {
    entries: PathBuf,
    max_bytes: u64,
    /// Bytes in `entries`; `None` until the first scan.
    bytes_on_disk: Mutex<Option<u64>>,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt: AtomicU64,
    bypassed: AtomicU64,
    evictions: AtomicU64,
    write_errors: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// A compilation in progress in this instance, that others wait for.
#[derive(Debug, Default)]
struct InFlight {
    done: Mutex<bool>,
    finished: Condvar,
}

impl DiskCache {
    /// A cache configured by `config` in front of `inner`. Creates nothing
    /// yet: the folder is made on the first write.
    pub fn new(inner: Arc<dyn Compiler>, config: DiskCacheConfig) -> Self {
        let store = config.directory.map(|directory| Store {
            entries: directory.join("vmfb"),
            max_bytes: config.max_bytes,
            bytes_on_disk: Mutex::new(None),
        });
        DiskCache {
            inner,
            store,
            counters: Counters::default(),
            in_flight: Mutex::new(HashMap::new()),
        }
    }

    /// A cache configured from the environment ([`DiskCacheConfig::from_env`]).
    pub fn from_env(inner: Arc<dyn Compiler>) -> Self {
        Self::new(inner, DiskCacheConfig::from_env())
    }

    /// A pass-through that caches nothing.
    pub fn disabled(inner: Arc<dyn Compiler>) -> Self {
        Self::new(inner, DiskCacheConfig::disabled())
    }

    /// The compiler behind the cache.
    pub fn inner(&self) -> &Arc<dyn Compiler> {
        &self.inner
    }

    /// The folder holding the entries; `None` when disabled.
    pub fn directory(&self) -> Option<&Path> {
        self.store.as_ref().map(|store| store.entries.as_path())
    }

    /// The counters so far. The first call on an enabled cache scans its
    /// folder to learn `bytes_on_disk`.
    pub fn stats(&self) -> DiskCacheStats {
        let c = &self.counters;
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        DiskCacheStats {
            hits: load(&c.hits),
            misses: load(&c.misses),
            corrupt: load(&c.corrupt),
            bypassed: load(&c.bypassed),
            evictions: load(&c.evictions),
            write_errors: load(&c.write_errors),
            bytes_read: load(&c.bytes_read),
            bytes_written: load(&c.bytes_written),
            bytes_on_disk: self.store.as_ref().map_or(0, |store| store.bytes_on_disk()),
        }
    }

    /// Like [`compile`](Compiler::compile), but an artifact is only used
    /// (and only stored) if `validate` accepts it, typically by loading it
    /// into the runtime. A cached artifact that `validate` refuses is
    /// deleted and compiled again; a freshly compiled one that it refuses is
    /// an error ([`CompileError::Rejected`]) and is not stored.
    pub fn compile_validated(
        &self,
        mlir: &str,
        options: &CompileOptions,
        validate: &dyn Fn(&[u8]) -> Result<(), String>,
    ) -> Result<Artifact, CompileError> {
        let Some((store, key)) = self.keyed(mlir, options)? else {
            bump(&self.counters.bypassed, 1);
            return self.compile_fresh(mlir, options, validate);
        };
        let path = store.entry_path(&key);
        if let Some(artifact) = self.lookup(&path, &key, validate) {
            return Ok(artifact);
        }
        // Held until the entry is written (or the compilation failed); None
        // when another thread's compilation of this key just ended.
        let _builder = match self.claim(key) {
            Claim::Builder(builder) => Some(builder),
            Claim::Waited => None,
        };
        // Another thread (or process) may have stored it since our lookup.
        // If it failed, we compile it ourselves.
        if let Some(artifact) = self.lookup(&path, &key, validate) {
            return Ok(artifact);
        }
        bump(&self.counters.misses, 1);
        let artifact = self.compile_fresh(mlir, options, validate)?;
        self.store(store, &path, &key, &artifact);
        Ok(artifact)
    }

    /// Deletes the entry of this compilation, if any (for instance after the
    /// runtime refused to load it); true when there was one.
    pub fn invalidate(&self, mlir: &str, options: &CompileOptions) -> Result<bool, CompileError> {
        let Some((store, key)) = self.keyed(mlir, options)? else {
            return Ok(false);
        };
        Ok(fs::remove_file(store.entry_path(&key)).is_ok())
    }

    /// The store and key of a compilation, or `None` when it bypasses the
    /// cache.
    fn keyed(
        &self,
        mlir: &str,
        options: &CompileOptions,
    ) -> Result<Option<(&Store, CacheKey)>, CompileError> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let version = self.inner.version();
        // Entries of unidentified (development) builds could not be told
        // apart from another build's: do not cache them.
        if !version.is_identified() {
            return Ok(None);
        }
        let flags = options.checked_flags()?;
        Ok(Some((
            store,
            CacheKey::new(mlir, &flags, &options.target_cpu, version),
        )))
    }

    fn lookup(
        &self,
        path: &Path,
        key: &CacheKey,
        validate: &dyn Fn(&[u8]) -> Result<(), String>,
    ) -> Option<Artifact> {
        let payload = match cache_entry::read(path, key) {
            ReadOutcome::Found(payload) => payload,
            ReadOutcome::Missing => return None,
            ReadOutcome::Corrupt(reason) => {
                tracing::warn!(entry = %path.display(), %reason, "deleting a damaged disk-cache entry");
                self.discard(path);
                return None;
            }
        };
        if let Err(reason) = validate(&payload) {
            tracing::warn!(entry = %path.display(), %reason, "deleting a rejected disk-cache entry");
            self.discard(path);
            return None;
        }
        bump(&self.counters.hits, 1);
        bump(&self.counters.bytes_read, payload.len() as u64);
        Some(Artifact::new(payload))
    }

    fn discard(&self, path: &Path) {
        let _ = fs::remove_file(path);
        bump(&self.counters.corrupt, 1);
    }

    fn compile_fresh(
        &self,
        mlir: &str,
        options: &CompileOptions,
        validate: &dyn Fn(&[u8]) -> Result<(), String>,
    ) -> Result<Artifact, CompileError> {
        let artifact = self.inner.compile(mlir, options)?;
        validate(&artifact).map_err(|message| CompileError::Rejected { message })?;
        Ok(artifact)
    }

    fn store(&self, store: &Store, path: &Path, key: &CacheKey, artifact: &Artifact) {
        if (HEADER_LEN + artifact.len()) as u64 > store.max_bytes {
            return; // would evict everything, itself included
        }
        let written = fs::create_dir_all(&store.entries)
            .and_then(|()| cache_entry::write(&store.entries, path, key, artifact));
        match written {
            Ok(bytes) => {
                bump(&self.counters.bytes_written, bytes);
                let evicted = store.added(bytes);
                bump(&self.counters.evictions, evicted);
            }
            Err(error) => {
                tracing::debug!(entry = %path.display(), %error, "cannot write a disk-cache entry");
                bump(&self.counters.write_errors, 1);
            }
        }
    }

    /// Becomes the builder of `key`, or waits for the current one to finish.
    fn claim(&self, key: CacheKey) -> Claim<'_> {
        let existing = {
            let mut in_flight = self
                .in_flight
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match in_flight.get(&key) {
                Some(existing) => Arc::clone(existing),
                None => {
                    in_flight.insert(key, Arc::default());
                    return Claim::Builder(Builder { cache: self, key });
                }
            }
        };
        let mut done = existing.done.lock().unwrap_or_else(PoisonError::into_inner);
        while !*done {
            done = existing
                .finished
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
        Claim::Waited
    }
}

enum Claim<'a> {
    Builder(Builder<'a>),
    Waited,
}

/// Wakes the waiters of a key when its compilation ends, however it ends.
struct Builder<'a> {
    cache: &'a DiskCache,
    key: CacheKey,
}

impl Drop for Builder<'_> {
    fn drop(&mut self) {
        let removed = self
            .cache
            .in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
        if let Some(in_flight) = removed {
            *in_flight
                .done
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = true;
            in_flight.finished.notify_all();
        }
    }
}

impl Store {
    fn entry_path(&self, key: &CacheKey) -> PathBuf {
        self.entries
            .join(format!("{}.{ENTRY_EXTENSION}", key.hex()))
    }

    fn bytes_on_disk(&self) -> u64 {
        let mut bytes = self
            .bytes_on_disk
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *bytes.get_or_insert_with(|| self.scan().iter().map(|entry| entry.len).sum())
    }

    /// Accounts for `bytes` just written; evicts when over the bound.
    /// Returns how many entries were evicted.
    fn added(&self, bytes: u64) -> u64 {
        let mut total = self
            .bytes_on_disk
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let estimate = match *total {
            Some(known) => known + bytes,
            None => self.scan().iter().map(|entry| entry.len).sum(),
        };
        *total = Some(estimate);
        if estimate <= self.max_bytes {
            return 0;
        }
        // Over the bound: learn the true state (other processes write too)
        // and delete the least recently used entries down to 90 %.
        let mut entries = self.scan();
        let mut remaining: u64 = entries.iter().map(|entry| entry.len).sum();
        let low_water = self.max_bytes / 10 * 9;
        entries.sort_by_key(|entry| entry.used);
        let mut evicted = 0;
        for entry in entries {
            if remaining <= low_water {
                break;
            }
            if fs::remove_file(&entry.path).is_ok() {
                evicted += 1;
            }
            // Gone either way (another process may have deleted it).
            remaining -= entry.len;
        }
        *total = Some(remaining);
        evicted
    }

    /// Every entry in the folder, deleting temporary files left by crashed
    /// writers on the way.
    fn scan(&self) -> Vec<ScannedEntry> {
        let Ok(listing) = fs::read_dir(&self.entries) else {
            return Vec::new();
        };
        let now = SystemTime::now();
        let mut entries = Vec::new();
        for item in listing.flatten() {
            let Ok(metadata) = item.metadata() else {
                continue;
            };
            let used = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            let path = item.path();
            let name = item.file_name();
            if name.to_string_lossy().starts_with(TEMP_PREFIX) {
                if now
                    .duration_since(used)
                    .is_ok_and(|age| age > STALE_TEMPORARY)
                {
                    let _ = fs::remove_file(&path);
                }
            } else if metadata.is_file()
                && path
                    .extension()
                    .is_some_and(|extension| extension == ENTRY_EXTENSION)
            {
                entries.push(ScannedEntry {
                    path,
                    len: metadata.len(),
                    used,
                });
            }
        }
        entries
    }
}

#[derive(Debug)]
struct ScannedEntry {
    path: PathBuf,
    len: u64,
    used: SystemTime,
}

impl Compiler for DiskCache {
    fn compile(&self, mlir: &str, options: &CompileOptions) -> Result<Artifact, CompileError> {
        self.compile_validated(mlir, options, &|_| Ok(()))
    }

    fn version(&self) -> &CompilerVersion {
        self.inner.version()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(vars: &[(&str, &str)]) -> DiskCacheConfig {
        DiskCacheConfig::from_vars(|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        })
    }

    #[test]
    fn location_comes_from_the_environment() {
        let explicit = config(&[(CACHE_DIR_ENV, "/c"), ("HOME", "/h")]);
        assert_eq!(explicit.directory, Some(PathBuf::from("/c")));
        assert_eq!(explicit.max_bytes, DEFAULT_MAX_BYTES);
        let xdg = config(&[
            (CACHE_DIR_ENV, "0"),
            ("XDG_CACHE_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(xdg.directory, Some(PathBuf::from("/x/sheaf-jit")));
        let home = config(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]);
        assert_eq!(home.directory, Some(PathBuf::from("/h/.cache/sheaf-jit")));
        assert_eq!(config(&[]).directory, None);
        for off in ["0", "off", "OFF", "false"] {
            assert_eq!(
                config(&[(DISK_CACHE_ENV, off), (CACHE_DIR_ENV, "/c")]).directory,
                None
            );
        }
        let on = config(&[(DISK_CACHE_ENV, "1"), (CACHE_DIR_ENV, "/c")]);
        assert_eq!(on.directory, Some(PathBuf::from("/c")));
        assert_eq!(
            config(&[(CACHE_DIR_ENV, "/c"), (CACHE_MAX_BYTES_ENV, "64M")]).max_bytes,
            64 << 20
        );
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("4k"), Some(4096));
        assert_eq!(parse_size("2 MiB"), Some(2 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1GB"), Some(1 << 30));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999G"), None);
    }
}
