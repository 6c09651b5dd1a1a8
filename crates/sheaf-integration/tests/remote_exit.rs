//! What a process shares through the remote cache before it exits: the
//! publish of a blocking compile made just before `exit()` (the exit hook
//! waits for publishes, within the exit wait, not only for compiles), and
//! every signature of a background batch under its own key (so that a
//! second process that needs them finds each one). Each process is a child
//! of this test binary, on a shared folder (`file://`).

mod support;

use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jit_store::SharedFolderStore;
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder, LeaseAnswer, RemoteSecret, RemoteStore, RemoteValue},
    JitConfig, JitConfigBuilder, JitRuntime, RemoteError, Value,
};

/// Set in a child: what it does, and the shared folder.
const ROLE: &str = "SHEAF_JIT_REMOTE_EXIT_ROLE";
const SHARED: &str = "SHEAF_JIT_REMOTE_EXIT_SHARED";

/// The signatures of the batch test: four shapes of sigmoid.
const SHAPES: [[usize; 2]; 4] = [[1, 3], [2, 3], [3, 3], [4, 3]];

/// A shared folder whose puts take 500 ms (a slow server): a publish is
/// still running when the process exits.
#[derive(Debug)]
struct Slow(SharedFolderStore);

impl RemoteStore for Slow {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        self.0.get(key, max_bytes)
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        std::thread::sleep(Duration::from_millis(500));
        self.0.put(key, value)
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        self.0.take_lease(lease, owner, ttl)
    }

    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        self.0.renew_lease(lease, owner, ttl)
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        self.0.release_lease(lease, owner)
    }
}

/// Settings over the shared folder `shared` (through [`Slow`]), no disk
/// cache, every shape its own signature; the secret in `shared`'s parent
/// is the cluster's.
fn settings(shared: &Path) -> JitConfigBuilder {
    let secret = shared.parent().unwrap().join("secret");
    JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .cache(|cache| {
            cache.dynamic_dims = false;
            cache.compile_threads = 1;
            cache.function_capacity = 16;
        })
        .remote_store(Arc::new(Slow(SharedFolderStore::new(shared).unwrap())))
        .remote(|remote| remote.secret = Some(RemoteSecret::File(secret)))
}

/// A cluster: a folder holding the secret (mode 0600) and the shared
/// folder `shared/`.
fn cluster() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    jit_store::file_io::write_whole(&secret, &[0x5a; 32]).unwrap();
    fs::create_dir(dir.path().join("shared")).unwrap();
    dir
}

/// The entries in the shared folder (not leases, not temporary files).
fn entries(shared: &Path) -> Vec<String> {
    fs::read_dir(shared)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| !name.ends_with(":lease") && !name.starts_with('.'))
        .collect()
}

/// Runs `test` as a child in `role` over the shared folder `shared`.
fn run_child(test: &str, role: &str, shared: &Path) {
    let output = test_support::child::rerun(test)
        .env(ROLE, role)
        .env(SHARED, shared)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{role}: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

fn child_shared() -> std::path::PathBuf {
    std::env::var_os(SHARED).unwrap().into()
}

#[test]
fn a_blocking_compiles_publish_survives_an_exit_right_after() {
    const TEST: &str = "a_blocking_compiles_publish_survives_an_exit_right_after";
    if std::env::var(ROLE).as_deref() == Ok("exit") {
        let settings = settings(&child_shared())
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .build()
            .unwrap();
        let jit = JitRuntime::new(settings).unwrap();
        support::checked_sigmoid(&jit, &[2, 3], 1);
        // The publish (500 ms) is queued: exit at once, no destructor run.
        std::process::exit(0);
    }
    let cluster = cluster();
    let shared = cluster.path().join("shared");
    run_child(TEST, "exit", &shared);
    assert_eq!(entries(&shared).len(), 1, "published before the exit");
}

#[test]
fn a_background_batch_is_published_under_each_signatures_key() {
    const TEST: &str = "a_background_batch_is_published_under_each_signatures_key";
    let sigmoid = reference::sigmoid();
    let inputs: Vec<[Value; 1]> = SHAPES
        .iter()
        .map(|shape| [Value::from(support::array(shape, 3))])
        .collect();
    match std::env::var(ROLE).as_deref() {
        Ok("batch") => {
            let settings = settings(&child_shared())
                .compile(|compile| compile.mode = CompileMode::Background)
                .build()
                .unwrap();
            let jit = JitRuntime::new(settings).unwrap();
            for x in &inputs {
                jit.call(&sigmoid, x, &[], |args, _, _| {
                    reference::interpret_sigmoid(args)
                })
                .unwrap();
            }
            assert!(jit.wait_for_compiles(Duration::from_secs(120)));
            let profile = jit.profile();
            let runs = profile.loaded_from(sheaf_integration::artifacts::ArtifactSource::Compiler);
            assert!(runs < SHAPES.len() as u64, "batched: {runs} compiler runs");
            return; // the runtime's drop and the exit publish
        }
        Ok("serve") => {
            let settings = settings(&child_shared())
                .compile(|compile| compile.mode = CompileMode::Blocking)
                .build()
                .unwrap();
            let jit = JitRuntime::new(settings).unwrap();
            for shape in SHAPES {
                support::checked_sigmoid(&jit, &shape, 3);
            }
            let stats = jit.remote_cache_stats().unwrap();
            assert_eq!(stats.hits, SHAPES.len() as u64, "{stats}");
            assert!(jit.compiler().is_none(), "nothing compiled");
            return;
        }
        _ => {}
    }
    let cluster = cluster();
    let shared = cluster.path().join("shared");
    run_child(TEST, "batch", &shared);
    assert!(
        entries(&shared).len() >= SHAPES.len(),
        "{:?}",
        entries(&shared)
    );
    run_child(TEST, "serve", &shared);
}
