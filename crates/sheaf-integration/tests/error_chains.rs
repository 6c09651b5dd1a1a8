//! Errors follow one convention: each level's `Display` says what failed
//! there, and its cause is its `source()`. Walking the chain of a failed
//! compile or of a disk cache that cannot be used meets each level once,
//! as its own type, and `ErrorChain` shows each level's message once.

mod support;

use std::error::Error;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sheaf_integration::{
    compiler::{CompileError, CompileFailure},
    lowering::{Lowered, LoweringError, VariantError},
    mlir,
    settings::DiskCacheFolder,
    Dispatched, ErrorChain, FallbackReason, JitError, JitFunction, JitRuntime, StoreError, Value,
};
use support::array;

/// The levels of `error`'s chain, outermost first.
fn levels<'a>(error: &'a (dyn Error + 'static)) -> Vec<&'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&level| level.source()).collect()
}

/// `error`'s chain as `ErrorChain` shows it, after checking that it shows
/// each level's message exactly once.
fn shown_once(error: &(dyn Error + 'static)) -> String {
    let shown = ErrorChain(error).to_string();
    for level in levels(error) {
        let message = level.to_string();
        assert_eq!(
            shown.matches(&message).count(),
            1,
            "`{message}` in `{shown}`"
        );
    }
    shown
}

/// The failure of the first call of `function` on an `f32[2]`.
fn failure_of(function: &JitFunction) -> std::sync::Arc<CompileFailure> {
    let x = [Value::from(array(&[2], 1))];
    match support::jit().dispatch(function, &x, &[]).unwrap() {
        Dispatched::Interpret(FallbackReason::CompileFailed(failure)) => failure,
        Dispatched::Interpret(other) => panic!("interpreted for another reason: {other}"),
        Dispatched::Compiled(_) => panic!("it compiled"),
    }
}

#[test]
fn a_failed_lowering_shows_each_level_of_its_chain_once() {
    let broken: JitFunction = JitFunction::new("broken", "(defn broken [x] x)", |_| {
        Err(LoweringError::with_source(
            "cannot emit the body",
            io::Error::other("disk full"),
        ))
    });
    let failure = failure_of(&broken);
    let chain = levels(&*failure);
    let messages: Vec<String> = chain.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "the lowering refused this signature",
            "cannot lower `broken` for (f32[2])",
            "cannot emit the body",
            "disk full",
        ]
    );
    assert!(matches!(
        chain[1].downcast_ref(),
        Some(VariantError::Lowering { .. })
    ));
    assert!(matches!(
        chain[2].downcast_ref(),
        Some(LoweringError::Refused { .. })
    ));
    assert!(chain[3].downcast_ref::<io::Error>().is_some());
    assert_eq!(shown_once(&*failure), messages.join(": "));
    // The reason a call was interpreted shows the whole chain.
    let reason = FallbackReason::CompileFailed(failure);
    assert_eq!(reason.to_string(), messages.join(": "));
}

#[test]
fn a_failed_compile_shows_each_level_of_its_chain_once() {
    let bad: JitFunction = JitFunction::new("bad", "(defn bad [x] x)", |ctx| {
        let ty = mlir::arg_type(&ctx.args()[0])?;
        // Returns an f32 tensor where the signature promises an i32 one.
        Ok(Lowered::new(format!(
            "func.func @{}(%x: {ty}) -> tensor<2xi32> {{
               return %x : {ty}
             }}",
            ctx.entry_symbol()
        )))
    });
    let failure = failure_of(&bad);
    let chain = levels(&*failure);
    assert_eq!(chain.len(), 3, "{}", ErrorChain(&*failure));
    assert_eq!(chain[0].to_string(), "the compile failed");
    assert_eq!(chain[1].to_string(), "cannot compile `bad` for (f32[2])");
    assert!(matches!(
        chain[1].downcast_ref(),
        Some(VariantError::Compile { .. })
    ));
    let compile = chain[2]
        .downcast_ref::<CompileError>()
        .expect("the compiler's error");
    let diagnostic = &compile.diagnostics()[0];
    assert_eq!(
        diagnostic.location.as_ref().map(|at| &*at.file),
        Some("bad(f32[2])")
    );
    let shown = shown_once(&*failure);
    assert!(
        shown.starts_with(
            "the compile failed: cannot compile `bad` for (f32[2]): IREE compilation \
             failed:\nbad(f32[2]):"
        ),
        "{shown}"
    );
}

/// Why a runtime whose disk cache is `dir` does not start.
fn disk_cache_error(dir: &Path) -> JitError {
    let config = support::blocking()
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
        .build()
        .unwrap();
    JitRuntime::new(config).expect_err("the disk cache cannot be used")
}

#[test]
fn a_disk_cache_others_can_write_shows_the_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let error = disk_cache_error(dir.path());
    let chain = levels(&error);
    assert_eq!(chain.len(), 2, "{}", ErrorChain(&error));
    assert!(matches!(
        error,
        JitError::DiskCache(StoreError::Insecure { .. })
    ));
    assert!(chain[0].to_string().contains("SHEAF_JIT_DISK_CACHE=off"));
    let reason = chain[1].to_string();
    assert!(
        reason.starts_with(&format!("{} is not safe to use", dir.path().display()))
            && reason.contains("mode 777")
            && reason.contains("chmod 700"),
        "{reason}"
    );
    shown_once(&error);
}

#[test]
fn a_disk_cache_that_cannot_be_created_shows_the_os_error_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    fs::write(&file, b"not a folder").unwrap();
    let error = disk_cache_error(&file.join("cache"));
    let chain = levels(&error);
    assert_eq!(chain.len(), 3, "{}", ErrorChain(&error));
    assert!(matches!(error, JitError::DiskCache(StoreError::Io { .. })));
    assert_eq!(
        chain[1].to_string(),
        format!("cannot create or read {}", file.join("cache").display())
    );
    let os = chain[2].downcast_ref::<io::Error>().expect("the OS error");
    assert_eq!(os.kind(), io::ErrorKind::NotADirectory);
    shown_once(&error);
}
