//! The environment variables of the compiler driver. They are process-wide,
//! so this file holds a single test that sets them one after the other.

#![cfg(not(any(miri, feature = "mock")))]

mod compiler_support;

use compiler_support::*;
use iree_safe::compiler::{
    choose_compiler, locate_compiler_library, locate_iree_compile, CompileError, CompilerKind,
    DiskCache, InProcessCompiler, SubprocessCompiler,
};
use std::sync::Arc;

fn with_var<T>(name: &str, value: &str, body: impl FnOnce() -> T) -> T {
    std::env::set_var(name, value);
    let result = body();
    std::env::remove_var(name);
    result
}

#[test]
fn environment_variables_choose_the_compiler_and_the_cache() {
    // Start from the defaults, whatever the caller's environment says.
    for name in [
        "IREE_COMPILER_LIB",
        "IREE_COMPILE",
        "SHEAF_JIT_COMPILER",
        "SHEAF_JIT_CACHE_DIR",
        "SHEAF_JIT_DISK_CACHE",
    ] {
        std::env::remove_var(name);
    }
    // A path that does not exist is an error naming the variable, never a
    // silent fallback to another compiler.
    let error = with_var(
        "IREE_COMPILER_LIB",
        "/nonexistent/libIREECompiler.so",
        || InProcessCompiler::load().unwrap_err(),
    );
    assert!(matches!(error, CompileError::NotFound { .. }), "{error:?}");
    assert!(
        error.to_string().contains("IREE_COMPILER_LIB=/nonexistent"),
        "{error}"
    );
    let error = with_var("IREE_COMPILE", "/nonexistent/iree-compile", || {
        SubprocessCompiler::locate().unwrap_err()
    });
    assert!(
        error.to_string().contains("IREE_COMPILE=/nonexistent"),
        "{error}"
    );

    // Explicit paths are used as given; "0" means unset.
    let library = locate_compiler_library().unwrap();
    let tool = locate_iree_compile().unwrap();
    // The native executable, not pip's Python launcher from the manifest.
    assert_eq!(tool.parent(), library.parent(), "{}", tool.display());
    let chosen = with_var("IREE_COMPILE", tool.to_str().unwrap(), locate_iree_compile).unwrap();
    assert_eq!(chosen, tool);
    assert_eq!(
        with_var("IREE_COMPILER_LIB", "0", locate_compiler_library).unwrap(),
        library
    );

    // SHEAF_JIT_COMPILER forces an implementation.
    let choice = with_var("SHEAF_JIT_COMPILER", "subprocess", choose_compiler).unwrap();
    assert_eq!(choice.kind, CompilerKind::Subprocess);
    assert!(choice.in_process_unavailable.is_none());
    let program = sigmoid();
    check(
        &program,
        &choice
            .compiler
            .compile(&program.source(), &program.options)
            .unwrap(),
    );
    let choice = with_var("SHEAF_JIT_COMPILER", "in-process", choose_compiler).unwrap();
    assert_eq!(choice.kind, CompilerKind::InProcess);
    let error = with_var("SHEAF_JIT_COMPILER", "gpu", choose_compiler).unwrap_err();
    assert!(
        error.to_string().contains("SHEAF_JIT_COMPILER=\"gpu\""),
        "{error}"
    );

    // The disk cache's folder, switch and bound.
    let dir = tempfile::tempdir().unwrap();
    let compiler = Arc::new(subprocess());
    let cache = with_var("SHEAF_JIT_CACHE_DIR", dir.path().to_str().unwrap(), || {
        DiskCache::from_env(compiler.clone())
    });
    assert_eq!(cache.directory(), Some(dir.path().join("vmfb").as_path()));
    let off = with_var("SHEAF_JIT_CACHE_DIR", dir.path().to_str().unwrap(), || {
        with_var("SHEAF_JIT_DISK_CACHE", "off", || {
            DiskCache::from_env(compiler.clone())
        })
    });
    assert_eq!(off.directory(), None);
}
