//! What the cache's policy learned, kept in the disk cache's policy files
//! (`jit_store::ArtifactStore::keep_policy`): a process restarted
//! on a warm disk cache starts each function with the dims that went
//! dynamic and the signatures that were compiled, so its first calls load
//! their variants from disk instead of compiling static sizes first.
//!
//! The files are scoped to the function (name and definition hash: two
//! functions of the same name and definition share one, whatever their
//! metadata type), the compiler build the disk keys name, and the primary
//! device's target; a process that cannot identify its compiler keeps
//! nothing.

use std::sync::Arc;

use jit_cache::{FunctionId, LearnedPolicy, PolicyMemory, PolicyScope};

use crate::compile::pipeline::Pipeline;

/// The disk cache's policy files, for the variants `pipeline` compiles
/// for `target` (the primary device's target identity).
#[derive(Debug)]
pub(crate) struct DiskPolicy {
    pipeline: Arc<Pipeline>,
    target: String,
}

impl DiskPolicy {
    pub(crate) fn new(pipeline: Arc<Pipeline>, target: String) -> Self {
        DiskPolicy { pipeline, target }
    }

    /// The scope of `func`'s policy file; `None` when the compiler cannot
    /// be identified (disk keys cannot name it either).
    fn scope<'a>(&'a self, func: &'a FunctionId) -> Option<PolicyScope<'a>> {
        let compiler = self.pipeline.identity()?;
        Some(PolicyScope::new(func, compiler, &self.target))
    }
}

impl PolicyMemory for DiskPolicy {
    fn recall(&self, func: &FunctionId) -> Option<LearnedPolicy> {
        let scope = self.scope(func)?;
        self.pipeline.store().recall_policy(&scope)
    }

    fn keep(&self, func: &FunctionId, learned: &LearnedPolicy) {
        if let Some(scope) = self.scope(func) {
            self.pipeline.store().keep_policy(&scope, learned);
        }
    }
}
