//! Both compiler implementations on the real IREE compiler: same artifacts,
//! same numbers through the runtime, diagnostics in errors.

#![cfg(not(iree_mock))]

mod compiler_support;

use std::path::PathBuf;

use compiler_support::*;
use iree_safe::compiler::{
    choose_compiler, CompileError, CompileOptions, Compiler, CompilerKind, CompilerPreference,
    InProcessCompiler, Severity,
};

#[test]
fn both_implementations_produce_the_same_working_artifacts() {
    let (in_process, subprocess) = (in_process(), subprocess());
    for program in programs() {
        let mlir = program.source();
        let a = in_process
            .compile(&mlir, &program.options)
            .expect("in-process compile");
        let b = subprocess
            .compile(&mlir, &program.options)
            .expect("subprocess compile");
        // Same compiler, same flags, same source name: the same bytes.
        assert_eq!(a, b, "{}: the artifacts differ", program.name);
        assert_eq!(check(&program, &a), check(&program, &b), "{}", program.name);
    }
}

#[test]
fn a_type_error_is_an_error_with_the_compilers_diagnostic() {
    let mlir = source("type_error");
    let compilers: [Box<dyn Compiler>; 2] = [Box::new(in_process()), Box::new(subprocess())];
    for compiler in compilers {
        let error = compiler
            .compile(&mlir, &CompileOptions::default())
            .unwrap_err();
        assert!(
            matches!(error, CompileError::Compilation { .. }),
            "{compiler:?}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains(
                "<stdin>:4:5: error: type of return operand 0 ('tensor<4xf32>') doesn't match \
                 function result type ('tensor<4xi32>')"
            ),
            "{compiler:?}: {message}"
        );
        let first = &error.diagnostics()[0];
        assert_eq!(first.severity, Severity::Error);
        let location = first.location.as_ref().expect("a located diagnostic");
        assert_eq!(
            (location.file.as_str(), location.line, location.column),
            ("<stdin>", 4, 5)
        );
    }
}

#[test]
fn unknown_flags_are_refused_by_both() {
    let mut options = CompileOptions::stablehlo();
    options.extra_flags = vec!["--iree-no-such-flag=1".to_owned()];
    let mlir = source("sigmoid");
    let compilers: [Box<dyn Compiler>; 2] = [Box::new(in_process()), Box::new(subprocess())];
    for compiler in compilers {
        let error = compiler.compile(&mlir, &options).unwrap_err();
        match &error {
            CompileError::InvalidFlags { flags, message } => {
                assert_eq!(flags, &options.flags());
                assert!(
                    message.contains("iree-no-such-flag"),
                    "{compiler:?}: {message}"
                );
            }
            other => panic!("{compiler:?}: expected InvalidFlags, got {other:?}"),
        }
    }
}

#[test]
fn both_report_the_same_compiler_build() {
    let (in_process, subprocess) = (in_process(), subprocess());
    let (a, b) = (in_process.version(), subprocess.version());
    assert_eq!(a.build(), b.build());
    assert!(a.is_identified(), "{a}");
    assert!(
        a.revision().is_some_and(|revision| revision.len() >= 7),
        "{a}"
    );
    assert!(a.api_version().is_some_and(|api| api.is_supported()), "{a}");
    assert_eq!(b.api_version(), None);
}

#[test]
fn the_library_loads_once_per_process() {
    let first = in_process();
    let second = in_process();
    assert_eq!(first.library_path(), second.library_path());
    // Not a library at all: refused (either as a second library or by the
    // loader) before any of its code could run.
    let not_a_library =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/compiler/sigmoid.mlir");
    // SAFETY: a text file cannot be loaded, so no foreign code runs.
    let error = unsafe { InProcessCompiler::load_from(&not_a_library) }.unwrap_err();
    assert!(matches!(error, CompileError::Load { .. }), "{error:?}");
    assert!(error.to_string().contains("IREE_COMPILER_LIB"), "{error}");
}

/// The default runs `iree-compile`: a compiler in a child process cannot
/// take the caller's down, at exit or on a crash.
#[test]
fn the_default_compiler_is_the_subprocess() {
    let choice = choose_compiler(CompilerPreference::Auto).expect("a compiler");
    assert_eq!(choice.kind, CompilerKind::Subprocess, "{}", choice.reason);
    let program = sigmoid();
    check_compiled_by(&program, &*choice.compiler);
}
