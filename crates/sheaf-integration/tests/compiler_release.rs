//! A compiler of another IREE release than the linked runtime is refused
//! when the runtime opens, with an error naming both releases, before
//! anything is compiled or loaded.

use std::os::unix::fs::PermissionsExt;

use sheaf_integration::{
    compiler::{CompileError, CompilerPreference},
    settings::DiskCacheFolder,
    JitConfig, JitError, JitRuntime,
};

/// An `iree-compile` that answers `--version` as IREE `release` would, and
/// fails anything else.
fn fake_compiler(dir: &std::path::Path, release: &str) -> std::path::PathBuf {
    let path = dir.join("iree-compile");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n[ \"$1\" = --version ] || exit 1\n\
             echo 'IREE (https://iree.dev):'\n\
             echo '  IREE compiler version {release} @ 0123456789abcdef'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn open_with(compiler: std::path::PathBuf) -> Result<JitRuntime, JitError> {
    let config = JitConfig::builder()
        .compile(|compile| compile.compiler = CompilerPreference::Executable(compiler))
        .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
        .build()
        .unwrap();
    JitRuntime::new(config)
}

#[test]
#[cfg_attr(miri, ignore = "runs a shell script")]
fn a_compiler_of_another_release_is_a_jit_error_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let error = open_with(fake_compiler(dir.path(), "3.10.0rc20251104")).unwrap_err();
    let JitError::Compiler(CompileError::ReleaseMismatch { found, runtime, .. }) = &error else {
        panic!("another error: {error}");
    };
    assert_eq!((found.as_str(), runtime.as_str()), ("3.10", "3.13"));
    let message = error.to_string();
    assert!(
        message.contains("IREE release 3.10") && message.contains("iree-base-compiler==3.13.0"),
        "{message}"
    );

    // The same release opens (the fake compiles nothing, and nothing asked it to).
    let other = tempfile::tempdir().unwrap();
    assert!(open_with(fake_compiler(other.path(), "3.13.0rc20261016")).is_ok());
}
