//! The JIT runtime: the shared IREE runtime (and a CPU one to fall back
//! on), the compile pipeline, the upload cache and the bounded cache policy,
//! for the whole process.
//!
//! This file holds the runtime's state, what happens when it ends (at exit
//! or on its last drop) and what it reports (statistics, profile); opening
//! one is `open.rs`, the call path `dispatch.rs`, making variants for the
//! cache `variants.rs`, compiling ahead `precompile.rs`, and bundles and
//! imported modules `artifacts.rs`.

mod artifacts;
mod dispatch;
mod open;
mod precompile;
mod variants;

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use iree_safe::compiler::CompilerChoice;
use iree_safe::{BufferPoolStatistics, MemoryStatistics};
use jit_cache::{CacheStats, JitCache};
#[cfg(feature = "remote-cache")]
use jit_store::RemoteStats;
use jit_store::StoreStats;

use crate::cached::CachedVariant;
use crate::compile::batch_queue::BatchQueue;
use crate::compile::function::JitFunction;
use crate::compile::pipeline::Pipeline;
use crate::compile::variant::Variant;
use crate::config::{CompileMode, ProfileFormat, UploadSettings};
use crate::error::JitError;
use crate::exit;
use crate::placement::{CpuFallback, FloatSemantics, ParallelCpu, Placement};
use crate::profile::{Profile, ProfileReport};
use crate::upload::{UploadCache, UploadStats};

pub use precompile::{Precompile, PrecompileSummary};

/// The JIT runtime Sheaf calls. Create one per process and clone it (clones
/// share everything); Send + Sync.
///
/// [`dispatch`](Self::dispatch) is the primitive: it runs compiled code, or
/// says why the caller must run its own interpreter. [`call`](Self::call)
/// wraps it with an interpreter closure.
///
/// ```no_run
/// use ndarray::ArrayD;
/// use sheaf_integration::{reference, JitConfig, JitRuntime, Value};
///
/// let jit = JitRuntime::new(JitConfig::from_env()?)?;
/// let sigmoid = reference::sigmoid();
/// let x = Value::host(ArrayD::<f32>::zeros(ndarray::IxDyn(&[1, 5])));
/// let result = jit.call(&sigmoid, &[x], &[], |args, _captured, _why| reference::interpret_sigmoid(args))?;
/// println!("{:?} via {:?}", result.outputs[0].to_host()?, result.provenance);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Exit
///
/// A runtime may live until the process ends (in a `static`, as Sheaf
/// keeps it). When the process exits (`main` returns, or `exit`), each
/// runtime still alive finishes on the exiting thread, before the process
/// ends: with a disk or remote cache, it waits up to
/// [`CompileSettings::exit_wait`](crate::settings::CompileSettings::exit_wait)
/// (10 s by default, `SHEAF_JIT_EXIT_WAIT`) for the background compiles
/// queued or running, which then reach the cache, so the next process runs
/// them compiled from its first call; then it prints its profile when
/// asked to (`SHEAF_JIT_PROFILE`). Dropping a runtime's last handle
/// instead withdraws its queued compiles (call
/// [`wait_for_compiles`](Self::wait_for_compiles) first to keep them) and
/// prints the profile then. The default compiler runs in a child process,
/// so a process that exits while it compiles ends with its own status;
/// the in-process compiler (`CompilerPreference::InProcess`) can crash a
/// process that exits during its first compiles (see
/// `iree_safe::compiler::InProcessCompiler`).
#[derive(Debug, Clone)]
pub struct JitRuntime {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    // Drop order: cached variants before the runtimes they were loaded into
    // (they keep them alive anyway).
    cache: JitCache<Variant>,
    compile_mode: CompileMode,
    /// The float semantics of functions that do not choose their own.
    float_semantics: FloatSemantics,
    /// Shared with the cache's policy memory (the disk cache's policy
    /// files), when there is a disk cache.
    pipeline: Arc<Pipeline>,
    /// The lowerings of background compiles not yet started.
    queued: Arc<BatchQueue>,
    primary: Placement,
    primary_uploads: UploadCache,
    /// The `local-task` device beside a `local-sync` primary that runs
    /// large contractions (`None` when off or the primary is another
    /// device); it shares the primary's tensors and upload cache.
    parallel: Option<ParallelCpu>,
    /// The CPU runtime to fall back on when a GPU compile fails, opened on
    /// first use (`None` when the primary is a CPU or fallback is off).
    cpu: Option<CpuFallback>,
    /// The CPU fallback's upload cache, made when a variant first runs
    /// there.
    cpu_uploads: OnceLock<UploadCache>,
    /// The upload caches' bounds.
    upload_settings: UploadSettings,
    profile: Profile,
    profile_at_exit: bool,
    profile_format: ProfileFormat,
    /// How long the process's exit waits for queued background compiles.
    exit_wait: Duration,
    /// The keys of [`JitConfig::trust`](crate::JitConfig::trust): the
    /// signer of the bundles this runtime exports.
    signatures: Option<crate::signing::Signatures>,
    /// Set by the first of the process's exit and the drop of the last
    /// handle: the profile is printed, and the totals added, once.
    finished: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        if !self.finished.swap(true, Ordering::AcqRel) {
            self.report_end();
        }
    }
}

impl exit::Finish for Inner {
    /// At exit: waits for the queued background compiles, so that they
    /// reach the disk (and remote) cache, then for the remote publishes
    /// they and the blocking compiles queued, within the same exit wait
    /// (one bound for both), then prints the profile.
    fn finish(&self) {
        if self.finished.swap(true, Ordering::AcqRel) {
            return;
        }
        if self.pipeline.keeps_artifacts() && !self.exit_wait.is_zero() {
            let start = Instant::now();
            let finished = self.cache.wait_for_compiles(self.exit_wait);
            tracing::debug!(
                target: crate::log_targets::RUNTIME,
                finished,
                waited = ?start.elapsed(),
                "the process exits: waited for the background compiles"
            );
            if !finished {
                tracing::warn!(
                    target: crate::log_targets::RUNTIME,
                    "the process exits with background compiles still queued after waiting {:?} \
                     (SHEAF_JIT_EXIT_WAIT): they are dropped, and the next process compiles them",
                    self.exit_wait
                );
            }
            let left = self.exit_wait.saturating_sub(start.elapsed());
            let published = self.pipeline.store().wait_for_publishes(left);
            if !published {
                tracing::warn!(
                    target: crate::log_targets::RUNTIME,
                    "the process exits with remote publishes still queued after waiting {:?} \
                     (SHEAF_JIT_EXIT_WAIT): other processes compile those artifacts again",
                    self.exit_wait
                );
            }
        }
        self.report_end();
    }
}

impl Inner {
    /// What a runtime reports as it ends: its totals, added to those the
    /// disk cache keeps over runs, and its profile on stderr when asked
    /// to. A stderr that cannot be written (closed, a pipe whose reader
    /// left: likely at exit) is not an error: the profile is lost, nothing
    /// panics.
    fn report_end(&self) {
        let stats = self.cache.stats();
        self.pipeline.add_run_totals(&stats.total);
        if self.profile_at_exit {
            let report = self.profile.snapshot(stats, &self.pipeline);
            let mut stderr = std::io::stderr().lock();
            let _ = match self.profile_format {
                #[cfg(feature = "serde")]
                ProfileFormat::Json => match serde_json::to_string(&report) {
                    Ok(json) => writeln!(stderr, "{json}"),
                    Err(error) => writeln!(stderr, "the profile as JSON: {error}\n{report}"),
                },
                _ => writeln!(stderr, "{report}"),
            };
        }
    }
}

impl JitRuntime {
    /// Drops every compiled signature of `function` (e.g. when Sheaf deletes
    /// or redefines it) and forgets the function's admission and thrash
    /// state and remembered compile failures, as if it had never been
    /// called; returns how many variants were unloaded. Its compiles waiting
    /// in the background queue are withdrawn, and one running is not cached.
    /// A redefinition needs no `forget` to be correct (its definition hash
    /// is new), only to free memory sooner. What the policy learned about
    /// the function stays in the disk cache's policy file: its next call
    /// starts from it.
    pub fn forget<M>(&self, function: &JitFunction<M>) -> usize {
        self.inner.cache.evict_function(function.id())
    }

    /// What the runtime holds: one row per compiled signature, with its
    /// function, signature, where its artifact came from (compiler, disk
    /// cache, remote cache, bundle, import), its bytes, hits and how
    /// recently it was used; by function name, then most recently used
    /// first. `Display` prints a row as one line.
    ///
    /// ```no_run
    /// use sheaf_integration::{JitConfig, JitRuntime};
    ///
    /// let jit = JitRuntime::new(JitConfig::from_env()?)?;
    /// // ... calls ...
    /// for variant in jit.entries() {
    ///     println!("{variant}"); // sigmoid (f32[1,5]) from disk cache, 9.9 KiB, 41 hits, ...
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn entries(&self) -> Vec<CachedVariant> {
        self.inner
            .cache
            .cached(None)
            .into_iter()
            .map(CachedVariant::new)
            .collect()
    }

    /// What the runtime holds of `function` ([`entries`](Self::entries)
    /// of one function; [`forget`](Self::forget) drops them).
    pub fn entries_of<M>(&self, function: &JitFunction<M>) -> Vec<CachedVariant> {
        self.inner
            .cache
            .cached(Some(function.id()))
            .into_iter()
            .map(CachedVariant::new)
            .collect()
    }

    /// Drops every compiled signature of every function ([`forget`](Self::forget)
    /// for all of them); returns how many variants were dropped. Their
    /// modules are unloaded as soon as no call running them holds them.
    ///
    /// What goes: the cached variants, each function's admission and
    /// thrash state, remembered compile failures and reported interpreter
    /// times, and its per-function counters; compiles queued in the
    /// background are withdrawn, and one running is not cached. What
    /// stays: the totals of [`stats`](Self::stats) and the
    /// [`profile`](Self::profile) (they count what happened, cleared
    /// functions included), the upload cache's device copies, the
    /// compiler once loaded, and everything on disk: the disk cache's
    /// entries and what the policy learned (its policy files), so the next
    /// call of each signature loads its artifact from disk (or a bundle)
    /// instead of compiling, and starts from the learned policy. To delete
    /// the disk cache, use the `sheaf-jit-cache clear` command.
    pub fn clear(&self) -> usize {
        self.inner.cache.clear()
    }

    /// The compile mode of functions that do not
    /// [choose their own](JitFunction::with_compile_mode).
    pub fn compile_mode(&self) -> CompileMode {
        self.inner.compile_mode
    }

    /// Waits until no compile is queued or running (background compiles,
    /// and blocking ones of other threads): `true`, or `false` when
    /// `timeout` passed first.
    pub fn wait_for_compiles(&self, timeout: Duration) -> bool {
        self.inner.cache.wait_for_compiles(timeout)
    }

    /// Device memory per device this runtime opened (the primary device's
    /// first, then the one beside it for large contractions and the CPU
    /// fallback's once they were opened), keyed by the
    /// device's URI: the device allocator's bytes in use and peak, compiled
    /// code's buffers, uploads and results included (IREE's allocator
    /// statistics; Sheaf's `--mem-profile`).
    ///
    /// # Errors
    ///
    /// [`JitError::Runtime`] when IREE cannot report a device's statistics.
    pub fn memory_statistics(&self) -> Result<Vec<(String, MemoryStatistics)>, JitError> {
        let primary = self.inner.primary.device();
        let mut devices = vec![primary];
        if let Some(parallel) = self.inner.parallel.as_ref().and_then(ParallelCpu::get) {
            devices.push(parallel.device());
        }
        if let Some(cpu) = self.inner.cpu.as_ref().and_then(CpuFallback::opened) {
            devices.push(cpu.device());
        }
        devices
            .into_iter()
            .map(|device| Ok((device.uri().to_owned(), device.memory_statistics()?)))
            .collect()
    }

    /// What the process's buffer pool reused: hits, misses and bytes
    /// served from freed buffers, and what it keeps now
    /// ([`DeviceSettings::buffer_pool_bytes`](crate::settings::DeviceSettings::buffer_pool_bytes)).
    /// The pool is the process's, so every runtime reports the same.
    pub fn buffer_pool_stats(&self) -> BufferPoolStatistics {
        iree_safe::BufferPool::global().statistics()
    }

    /// Cache statistics, per function and in total.
    pub fn stats(&self) -> CacheStats {
        self.inner.cache.stats()
    }

    /// Disk cache statistics.
    pub fn disk_cache_stats(&self) -> StoreStats {
        self.inner.pipeline.store_stats()
    }

    /// Remote artifact cache statistics; `None` without a remote cache.
    #[cfg(feature = "remote-cache")]
    pub fn remote_cache_stats(&self) -> Option<RemoteStats> {
        self.inner.pipeline.remote_stats()
    }

    /// Upload cache statistics: the primary device's cache (which the
    /// device beside `local-sync` shares), plus the CPU fallback's once a
    /// variant ran there.
    pub fn upload_stats(&self) -> UploadStats {
        let mut stats = self.inner.primary_uploads.stats();
        if let Some(cpu) = self.inner.cpu_uploads.get() {
            stats += cpu.stats();
        }
        stats
    }

    /// The compiler, if one was loaded (it is loaded on the first artifact
    /// that must really be compiled): which implementation and why.
    pub fn compiler(&self) -> Option<&CompilerChoice> {
        self.inner.pipeline.loaded_compiler()
    }

    /// The `--jit-profile` report: time per phase plus the cache counters.
    pub fn profile(&self) -> ProfileReport {
        self.inner
            .profile
            .snapshot(self.stats(), &self.inner.pipeline)
    }

    /// The runtime compiled code runs on (the primary device's).
    pub fn runtime(&self) -> &iree_safe::Runtime {
        &self.inner.primary.runtime
    }

    /// What the primary device's code is compiled for, with the runtime's
    /// float semantics ([`float_semantics`](Self::float_semantics); a
    /// function that chooses other semantics compiles with those flags
    /// instead). A large contraction adds [`CONTRACTION_FLAGS`](crate::tuning::CONTRACTION_FLAGS).
    pub fn compile_options(&self) -> &iree_safe::compiler::CompileOptions {
        &self.inner.primary.code(self.inner.float_semantics).options
    }

    /// The float semantics of functions that do not
    /// [choose their own](JitFunction::with_float_semantics).
    pub fn float_semantics(&self) -> FloatSemantics {
        self.inner.float_semantics
    }
}
