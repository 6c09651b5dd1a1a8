//! `iree-compile --version` runs at most once per executable in a process:
//! identifying the compiler for cache keys and choosing it share the
//! answer. The answers are process-wide, and the test writes an executable
//! and runs it, so it has this file (its own process) to itself.

#![cfg(not(iree_mock))]

mod compiler_support;

use compiler_support::{fake_iree_compile, version_runs};
use iree_safe::compiler::{choose_compiler, compiler_identity, CompilerKind, CompilerPreference};

const BUILD: &str = "3.13.0rc20990101 @ 0123456789abcdef0123456789abcdef01234567";

#[test]
fn iree_compile_version_runs_once_per_executable_and_process() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("version-runs");
    let fake = fake_iree_compile(dir.path(), &counter, BUILD);
    let preference = CompilerPreference::Executable(fake.clone());
    for _ in 0..2 {
        assert_eq!(compiler_identity(preference.clone()).unwrap(), BUILD);
        let choice = choose_compiler(preference.clone()).unwrap();
        assert_eq!(choice.kind, CompilerKind::Subprocess);
        assert_eq!(choice.compiler.version().build(), BUILD);
    }
    // The same executable found through IREE_COMPILE is the same answer.
    std::env::set_var("IREE_COMPILE", &fake);
    assert_eq!(
        compiler_identity(CompilerPreference::Subprocess).unwrap(),
        BUILD
    );
    choose_compiler(CompilerPreference::Subprocess).unwrap();
    std::env::remove_var("IREE_COMPILE");
    assert_eq!(version_runs(&counter), 1, "`--version` runs");

    // An executable replaced at the same path is asked again.
    let rebuilt = "3.13.0rc20990102 @ fedcba9876543210fedcba9876543210fedcba98";
    assert_eq!(fake_iree_compile(dir.path(), &counter, rebuilt), fake);
    assert_eq!(compiler_identity(preference.clone()).unwrap(), rebuilt);
    assert_eq!(
        choose_compiler(preference)
            .unwrap()
            .compiler
            .version()
            .build(),
        rebuilt
    );
    assert_eq!(version_runs(&counter), 2, "`--version` runs");
}
