//! What one process learns reaches the cluster: a first store's cache
//! learns that `mlp_layer`'s batch dim goes dynamic; a second store, with
//! a fresh folder of its own, behind the same remote store, starts from
//! that policy (one compile, the dynamic variant, where a fresh cache
//! alone compiles the static sizes first). The policy is authenticated as
//! artifacts are: a tampered one is refused and counted; a reader of
//! signed entries takes a builder's policy and publishes none of its own.

#![cfg(not(miri))] // file system, ring's C

mod support;

use std::path::Path;
use std::sync::Arc;

use jit_cache::{CacheConfig, FunctionId, JitCache};
use jit_store::{
    ArtifactStore, RemoteMode, RemoteOptions, RemoteStats, RemoteTier, Secret, SharedFolderStore,
    SigningKey, StoreConfig, Trust, TrustedKeys,
};
use support::InStore;
use test_support::mock_cache::{expected, mlp, run, MockCompiler, MockExe, Ran};

fn mlp_layer() -> FunctionId {
    FunctionId::new("mlp_layer", 0x5eaf).with_dynamic_dims()
}

/// A store with its own fresh folder in `disk`, behind it the shared
/// folder `shared` trusted as `trust` says.
fn store(disk: &Path, shared: &Path, trust: Trust) -> Arc<ArtifactStore> {
    let backend = Box::new(SharedFolderStore::new(shared).unwrap());
    let tier = RemoteTier::with_trust(backend, trust, RemoteOptions::default()).unwrap();
    let store = ArtifactStore::open(StoreConfig::at(disk)).unwrap();
    Arc::new(store.with_remote(tier))
}

/// Runs batch sizes `sizes` of `mlp_layer` on a cache remembering in
/// `store`, checking every result; the compiles it took.
fn ragged(store: &Arc<ArtifactStore>, sizes: &[i64]) -> usize {
    let memory = Arc::new(InStore(Arc::clone(store)));
    let cache: JitCache<MockExe> = JitCache::remembering(CacheConfig::default(), memory).unwrap();
    let compiler = MockCompiler::new();
    for &b in sizes {
        let (ran, _) = run(&cache, &mlp_layer(), &mlp(b), &compiler);
        let value = match ran {
            Ran::Compiled(value) | Ran::Interpreted(value) => value,
        };
        let dynamic = value == expected(&mlp(-1));
        assert!(dynamic || value == expected(&mlp(b)), "batch {b}: {ran:?}");
    }
    compiler.compiles()
}

fn remote(store: &ArtifactStore) -> RemoteStats {
    store.remote_stats().unwrap()
}

fn shared_secret() -> Trust {
    Trust::Shared(Secret::from_bytes([4; Secret::LEN]))
}

#[test]
fn a_second_process_starts_from_the_policy_the_first_one_learned() {
    let (shared, first, second, alone) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let learner = store(first.path(), shared.path(), shared_secret());
    assert_eq!(ragged(&learner, &[3, 5, 7, 9]), 2, "static 3, then dynamic");
    assert!(learner.wait_for_publishes(std::time::Duration::from_secs(10)));
    assert!(remote(&learner).policies_published >= 1);

    // A fresh store alone compiles static sizes first.
    let lone = Arc::new(ArtifactStore::open(StoreConfig::at(alone.path())).unwrap());
    assert_eq!(ragged(&lone, &[40, 41, 42]), 2);
    // Behind the same remote store, it starts from what the first learned.
    let follower = store(second.path(), shared.path(), shared_secret());
    assert_eq!(
        ragged(&follower, &[40, 41, 42]),
        1,
        "the dynamic variant only"
    );
    assert_eq!(remote(&follower).policies_fetched, 1);
    // And keeps it in its own folder: the next process needs no fetch.
    let again = store(second.path(), shared.path(), shared_secret());
    assert_eq!(ragged(&again, &[43]), 1);
    assert_eq!(remote(&again).policies_fetched, 0);
}

#[test]
fn a_tampered_policy_is_refused_and_a_reader_takes_a_builders_and_publishes_none() {
    let (shared, first, second, third) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let builder = SigningKey::from_seed(&[8; 32]);
    let trusted = TrustedKeys::new([builder.public_key()]);
    let learner = store(
        first.path(),
        shared.path(),
        Trust::builder(builder, TrustedKeys::default()),
    );
    assert_eq!(ragged(&learner, &[3, 5, 7, 9]), 2);
    drop(learner); // publishes
    let policies = || {
        std::fs::read_dir(shared.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.to_string_lossy().contains("policy:"))
            .collect::<Vec<_>>()
    };
    let published = policies();
    assert_eq!(published.len(), 1, "{published:?}");

    let reader = store(second.path(), shared.path(), Trust::reader(trusted.clone()));
    assert_eq!(ragged(&reader, &[40, 41, 42, 3]), 1, "the builder's policy");
    assert_eq!(
        (
            remote(&reader).policies_fetched,
            remote(&reader).policies_published
        ),
        (1, 0)
    );
    drop(reader);
    assert_eq!(policies(), published, "a reader publishes nothing");

    // One byte of the policy changed: refused, counted, the function
    // starts from nothing.
    let mut value = std::fs::read(&published[0]).unwrap();
    *value.last_mut().unwrap() ^= 1;
    std::fs::write(&published[0], value).unwrap();
    let read_only = {
        let backend = Box::new(SharedFolderStore::new(shared.path()).unwrap());
        let mut options = RemoteOptions::default();
        options.mode = RemoteMode::ReadOnly;
        let tier = RemoteTier::with_trust(backend, Trust::reader(trusted), options).unwrap();
        Arc::new(
            ArtifactStore::open(StoreConfig::at(third.path()))
                .unwrap()
                .with_remote(tier),
        )
    };
    assert_eq!(ragged(&read_only, &[40, 41, 42]), 2, "as a fresh cache");
    let stats = remote(&read_only);
    assert_eq!(
        (stats.policies_fetched, stats.unauthenticated),
        (0, 1),
        "{stats:?}"
    );
}
