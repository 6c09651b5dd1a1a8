//! A program names the compiler (`CompilerPreference::Library` /
//! `Executable`): that compiler is used, whatever the environment
//! variables say, or the error names it. The test sets those process-wide
//! variables and writes an executable it runs, so it has this file (its
//! own process) to itself.

#![cfg(not(iree_mock))]

mod compiler_support;

use compiler_support::*;
use iree_safe::compiler::{
    choose_compiler, compiler_identity, locate_compiler_library, CompileError, CompileOptions,
    CompilerKind, CompilerPreference, TrustedCompilerLibrary,
};

const BUILD: &str = "3.13.0rc20990101 @ 0123456789abcdef0123456789abcdef01234567";

fn compiler_library_is_mapped() -> bool {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .contains("libIREECompiler")
}

#[test]
fn the_compiler_a_program_names_is_used_or_named_in_the_error() {
    let installed = locate_compiler_library().expect("the install's libIREECompiler.so");
    // No compiler at all: a serving-only program, whatever is installed.
    let disabled = choose_compiler(CompilerPreference::Disabled).unwrap_err();
    assert!(matches!(disabled, CompileError::Disabled), "{disabled}");
    assert!(
        disabled.to_string().contains("without a compiler"),
        "{disabled}"
    );
    assert!(matches!(
        compiler_identity(CompilerPreference::Disabled),
        Err(CompileError::Disabled)
    ));
    assert!(!compiler_library_is_mapped(), "nothing was loaded");
    // The variables name other compilers, which must not be used.
    std::env::set_var("IREE_COMPILER_LIB", &installed);
    std::env::set_var("IREE_COMPILE", "/nonexistent/iree-compile");

    // A library that does not exist: an error naming it, never the
    // library of IREE_COMPILER_LIB instead.
    let missing = "/nonexistent/named/libIREECompiler.so";
    // SAFETY: nothing exists at this path.
    let library = unsafe { TrustedCompilerLibrary::new_unchecked(missing) };
    let error = choose_compiler(CompilerPreference::Library(library.clone())).unwrap_err();
    assert!(matches!(error, CompileError::Load { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(missing), "{message}");
    assert!(message.contains("no such file"), "{message}");
    let error = compiler_identity(CompilerPreference::Library(library)).unwrap_err();
    assert!(error.to_string().contains(missing), "{error}");
    assert!(!compiler_library_is_mapped());

    // A library of another architecture: refused before it is loaded, in
    // words that name both (the dynamic loader would only say it cannot
    // find the file).
    let scratch = tempfile::tempdir().unwrap();
    let (other, other_name) = match std::env::consts::ARCH {
        "aarch64" => (62u16, "x86_64"),
        _ => (183, "aarch64"),
    };
    let mut header = b"\x7fELF\x02\x01\x01".to_vec();
    header.resize(18, 0);
    header.extend(other.to_le_bytes());
    let foreign = scratch.path().join("libIREECompiler.so");
    std::fs::write(&foreign, header).unwrap();
    // SAFETY: the file is refused before anything loads it.
    let library = unsafe { TrustedCompilerLibrary::new_unchecked(&foreign) };
    let error = choose_compiler(CompilerPreference::Library(library)).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, CompileError::Load { .. }), "{message}");
    assert!(
        message.contains(&format!("it holds {other_name} code"))
            && message.contains(std::env::consts::ARCH),
        "{message}"
    );
    assert!(!compiler_library_is_mapped());

    // An executable: that one runs, for the version and for compiles.
    let dir = tempfile::tempdir().unwrap();
    let fake = fake_iree_compile(dir.path(), &dir.path().join("runs"), BUILD);
    let named = CompilerPreference::Executable(fake.clone());
    let choice = choose_compiler(named.clone()).unwrap();
    assert_eq!(choice.kind, CompilerKind::Subprocess);
    assert!(
        choice.reason.contains("named by the program") && choice.reason.contains("iree-compile"),
        "{}",
        choice.reason
    );
    assert_eq!(choice.compiler.version().build(), BUILD);
    let artifact = choice
        .compiler
        .compile("module {}", &CompileOptions::default())
        .unwrap();
    assert_eq!(artifact.as_bytes(), FAKE_VMFB);
    assert_eq!(compiler_identity(named).unwrap(), BUILD);
    // One that is not there: an error naming it.
    let gone = dir.path().join("no-such-iree-compile");
    let error = choose_compiler(CompilerPreference::Executable(gone.clone())).unwrap_err();
    assert!(
        matches!(&error, CompileError::BadExecutable { path, .. } if *path == gone),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&gone.display().to_string()),
        "{error}"
    );

    // The install's library, named by the program while IREE_COMPILER_LIB
    // names nothing that exists: loaded in-process, and it compiles.
    std::env::set_var("IREE_COMPILER_LIB", "/nonexistent/libIREECompiler.so");
    // SAFETY: the library `cargo xtask build-iree` installed is IREE's.
    let library = unsafe { TrustedCompilerLibrary::new_unchecked(&installed) };
    let choice = choose_compiler(CompilerPreference::Library(library.clone())).unwrap();
    assert_eq!(choice.kind, CompilerKind::InProcess);
    assert!(
        choice.reason.contains("named by the program"),
        "{}",
        choice.reason
    );
    let program = sigmoid();
    check_compiled_by(&program, &*choice.compiler);
    assert_eq!(
        compiler_identity(CompilerPreference::Library(library)).unwrap(),
        iree_sys::build_info::COMPILER_VERSION.unwrap(),
        "the install's library is known by its recorded build"
    );
    for name in ["IREE_COMPILER_LIB", "IREE_COMPILE"] {
        std::env::remove_var(name);
    }
}
