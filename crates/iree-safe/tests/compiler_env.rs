//! The environment variables of the compiler driver (`IREE_COMPILER_LIB`,
//! `IREE_COMPILE`). They are process-wide, so this file holds a single test
//! that sets them one after the other.

#![cfg(not(iree_mock))]

mod compiler_support;

use compiler_support::*;
use iree_safe::compiler::{
    choose_compiler, locate_compiler_library, locate_iree_compile, CompileError, CompilerKind,
    CompilerPreference, InProcessCompiler, SubprocessCompiler,
};

fn with_var<T>(name: &str, value: &str, body: impl FnOnce() -> T) -> T {
    std::env::set_var(name, value);
    let result = body();
    std::env::remove_var(name);
    result
}

#[test]
fn environment_variables_locate_the_compiler() {
    // Start from the defaults, whatever the caller's environment says.
    for name in ["IREE_COMPILER_LIB", "IREE_COMPILE"] {
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
    let error = with_var("IREE_COMPILE", "/nonexistent/iree-compile", || {
        choose_compiler(CompilerPreference::Auto).unwrap_err()
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

    // A preference forces an implementation.
    let choice = choose_compiler(CompilerPreference::Subprocess).unwrap();
    assert_eq!(choice.kind, CompilerKind::Subprocess);
    assert!(choice.reason.contains("asked for"), "{}", choice.reason);
    let program = sigmoid();
    check_compiled_by(&program, &*choice.compiler);
    let choice = choose_compiler(CompilerPreference::InProcess).unwrap();
    assert_eq!(choice.kind, CompilerKind::InProcess);

    // In automatic mode, a library named explicitly that does not load is an
    // error, not a silent switch to the subprocess compiler.
    let error = with_var(
        "IREE_COMPILER_LIB",
        "/nonexistent/libIREECompiler.so",
        || choose_compiler(CompilerPreference::Auto).unwrap_err(),
    );
    assert!(
        error.to_string().contains("IREE_COMPILER_LIB=/nonexistent"),
        "{error}"
    );
    let choice = choose_compiler(CompilerPreference::Auto).unwrap();
    assert_eq!(choice.kind, CompilerKind::Subprocess);
    assert!(
        choice.reason.contains("of the install"),
        "{}",
        choice.reason
    );
}
