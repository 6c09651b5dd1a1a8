//! Fixtures shared by the store's test files: keys, a fetch that builds a
//! named artifact on a miss, and a policy memory that keeps its policies
//! in a store, as `sheaf-integration` does. What other crates' tests use too
//! (a real Redis server, child processes, the mock cache) is in the
//! `test-support` crate.

#![allow(dead_code, reason = "each test file uses a different subset")]

use std::sync::Arc;

use jit_cache::{FunctionId, LearnedPolicy, PolicyMemory, PolicyScope};
use jit_store::{ArtifactKey, ArtifactStore, Fetched, KeyParts};

/// The key of `program`, for one compiler, runtime and target.
pub(crate) fn key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "compiler",
        runtime: "runtime",
        target: "target",
    })
}

/// Fetches `program` from `store`, building `built by <who>` on a miss:
/// the bytes loaded and where they came from.
pub(crate) fn fetch_built_by(store: &ArtifactStore, program: &str, who: &str) -> (String, Fetched) {
    let (bytes, fetched) = store
        .fetch_or_build(
            Some(&key(program)),
            |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
            || Ok::<_, String>(format!("built by {who}").into_bytes()),
        )
        .unwrap();
    (String::from_utf8(bytes).unwrap(), fetched)
}

/// The compiler build and target the policies are scoped to.
pub(crate) const COMPILER: &str = "mock compiler 1";
pub(crate) const TARGET: &str = "mock target";

/// A cache's policy memory in a store (its policy files, and the remote
/// tier behind it), as `sheaf-integration` keeps it.
#[derive(Debug)]
pub(crate) struct InStore(pub(crate) Arc<ArtifactStore>);

impl PolicyMemory for InStore {
    fn recall(&self, func: &FunctionId) -> Option<LearnedPolicy> {
        self.0
            .recall_policy(&PolicyScope::new(func, COMPILER, TARGET))
    }

    fn keep(&self, func: &FunctionId, learned: &LearnedPolicy) {
        self.0
            .keep_policy(&PolicyScope::new(func, COMPILER, TARGET), learned);
    }
}
