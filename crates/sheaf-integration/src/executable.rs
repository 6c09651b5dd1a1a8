//! A compiled artifact as the cache holds it: a loaded module and its entry
//! function, freed when the cache drops it.

use iree_safe::Function;

/// One compiled signature of a function, loaded into the shared runtime.
#[derive(Debug)]
pub struct LoadedExecutable {
    function: Function,
}

impl LoadedExecutable {
    pub(crate) fn new(function: Function) -> Self {
        LoadedExecutable { function }
    }

    /// The entry function (it keeps its module loaded).
    pub fn function(&self) -> &Function {
        &self.function
    }
}

impl jit_cache::Executable for LoadedExecutable {
    /// The artifact's bytes: what the byte budget weighs. The module's
    /// context adds about 24 KB more (see the iree-safe README).
    fn size_bytes(&self) -> usize {
        self.function.module().artifact_bytes()
    }
}
