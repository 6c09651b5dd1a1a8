//! Artifact bundles under attack: every file of a bundle must belong to
//! this user or root, be writable by no one else, and be a regular file,
//! not a link, checked before a byte of it is used; the folders are checked
//! before the manifest is touched, and the manifest is read without
//! blocking and within a bound. The tests run as root here, a trusted
//! owner, so the refusals they exercise are those of modes, links and
//! special files.

mod support;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use jit_store::{ArtifactKey, ArtifactStore, StoreConfig};
use sheaf_integration::{
    lowering::{Lowered, LoweringContext, LoweringError},
    mlir, reference,
    settings::DiskCacheFolder,
    ErrorChain, HostTensor, JitError, JitFunction, JitRuntime, Value,
};
use tempfile::TempDir;

/// A runtime with no disk cache that serves calls from the bundle at `dir`.
fn serving(dir: &Path) -> Result<JitRuntime, JitError> {
    JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .artifact_bundle(dir)
            .build()
            .unwrap(),
    )
}

/// Why a runtime serving the bundle at `dir` does not start, with its
/// causes (a [`JitError::Bundle`]). The start runs
/// on another thread: one that hangs fails the test after a minute (a
/// liveness bound, not a timing assertion).
fn refusal(dir: &Path) -> String {
    let (sender, receiver) = mpsc::channel();
    let dir = dir.to_path_buf();
    thread::spawn(move || {
        let _ = sender.send(serving(&dir).map(drop).map_err(|error| {
            assert!(matches!(error, JitError::Bundle { .. }), "{error:?}");
            ErrorChain(&error).to_string()
        }));
    });
    match receiver.recv_timeout(Duration::from_secs(60)) {
        Ok(Err(message)) => message,
        Ok(Ok(())) => panic!("the bundle was accepted"),
        Err(_) => panic!("opening the bundle hung"),
    }
}

/// The sigmoid of an `f32[2,3]`, checked against the interpreter's.
fn sigmoid_call(jit: &JitRuntime) {
    support::checked_sigmoid(jit, &[2, 3], 5);
}

/// A bundle exported by a runtime that called `calls` on it (nothing, for
/// a bundle without entries).
fn exported(calls: impl FnOnce(&JitRuntime)) -> TempDir {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let jit = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.path().into()))
            .build()
            .unwrap(),
    )
    .unwrap();
    calls(&jit);
    jit.export_artifacts(bundle.path()).unwrap();
    bundle
}

fn key_of(entry: &Path) -> ArtifactKey {
    ArtifactKey::from_hex(entry.file_stem().unwrap().to_str().unwrap()).unwrap()
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// Other code under sigmoid's name (so its entry symbol is sigmoid's): it
/// negates.
fn impostor() -> JitFunction {
    JitFunction::new(
        "sigmoid",
        "(defn sigmoid [x] (- x))",
        |ctx: &LoweringContext<'_>| {
            let [x] = ctx.args() else {
                return Err(LoweringError::new("one argument"));
            };
            let ty = mlir::arg_type(x)?;
            Ok(Lowered::new(format!(
                "func.func @{entry}(%x: {ty}) -> {ty} {{
                   %y = stablehlo.negate %x : {ty}
                   return %y : {ty}
                 }}",
                entry = ctx.entry_symbol()
            )))
        },
    )
}

/// The impostor's compiled `.vmfb` for sigmoid's call.
fn impostor_artifact() -> Vec<u8> {
    let cache = tempfile::tempdir().unwrap();
    let jit = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.path().into()))
            .build()
            .unwrap(),
    )
    .unwrap();
    compiled(&jit, &impostor());
    let store = ArtifactStore::open(StoreConfig::at(cache.path())).unwrap();
    store
        .fetch(&key_of(&support::the_entry(cache.path())), |artifact| {
            Ok::<_, String>(artifact.bytes().to_vec())
        })
        .unwrap()
}

fn x() -> Value {
    Value::from(support::array(&[2, 3], 5))
}

/// The outputs of `function` called compiled on `x()` (a fallback to the
/// interpreter fails the test).
fn compiled(jit: &JitRuntime, function: &JitFunction) -> Vec<Value> {
    jit.call(
        function,
        &[x()],
        &[],
        |_, _, fallback| -> Result<Vec<Value>, String> {
            panic!("the call fell back to the interpreter: {fallback:?}")
        },
    )
    .unwrap()
    .outputs
}

#[test]
fn an_entry_others_can_write_is_refused_at_start_and_never_loaded_after() {
    let bundle = exported(sigmoid_call);
    let entry = support::the_entry(bundle.path());
    // Sound, the bundle serves the call: nothing is compiled.
    let jit = serving(bundle.path()).unwrap();
    sigmoid_call(&jit);
    assert!(jit.compiler().is_none(), "served from the bundle");

    chmod(&entry, 0o666);
    let message = refusal(bundle.path());
    for part in [&entry.display().to_string(), "mode 666", "chmod go-w"] {
        assert!(message.contains(part), "{part}: {message}");
    }

    // Opened to others after the start: not loaded; the call compiles.
    chmod(&entry, 0o600);
    let jit = serving(bundle.path()).unwrap();
    chmod(&entry, 0o666);
    sigmoid_call(&jit);
    assert!(jit.compiler().is_some(), "compiled, not loaded");
}

#[test]
fn other_code_tagged_with_the_bundles_secret_in_an_entry_others_can_write_never_runs() {
    let bundle = exported(sigmoid_call);
    let entry = support::the_entry(bundle.path());
    let (exposed, closed) = (
        serving(bundle.path()).unwrap(),
        serving(bundle.path()).unwrap(),
    );
    // Another user rewrites the entry they can write: other code under
    // sigmoid's key, tagged with the bundle's secret (which a bundle
    // ships, readable).
    let tagger = ArtifactStore::open(StoreConfig::at(bundle.path())).unwrap();
    assert!(tagger.insert(&key_of(&entry), &impostor_artifact()));
    chmod(&entry, 0o666);
    sigmoid_call(&exposed); // checks the outputs: sigmoid's, not negated
    assert!(exposed.compiler().is_some(), "compiled, not loaded");

    // The same entry, closed to others, is served: the tag detects
    // damage, not forgery; the files' modes are what protect a bundle.
    chmod(&entry, 0o600);
    let outputs = compiled(&closed, &reference::sigmoid());
    let HostTensor::F32(y) = outputs[0].to_host().unwrap() else {
        panic!("f32 out");
    };
    assert_eq!(*y, support::array(&[2, 3], 5).mapv(|v| -v), "the impostor");
}

#[test]
fn an_entry_that_is_a_link_is_refused_at_start_and_never_followed_after() {
    let bundle = exported(sigmoid_call);
    let entry = support::the_entry(bundle.path());
    let copy = bundle.path().join("elsewhere");
    fs::copy(&entry, &copy).unwrap();
    let jit = serving(bundle.path()).unwrap();
    fs::remove_file(&entry).unwrap();
    symlink(&copy, &entry).unwrap();
    let message = refusal(bundle.path());
    for part in [&entry.display().to_string(), "symbolic link"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    sigmoid_call(&jit);
    assert!(jit.compiler().is_some(), "compiled, the link not followed");
}

#[test]
fn a_manifest_others_can_write_is_refused_saying_what_to_run() {
    let bundle = exported(|_| {});
    serving(bundle.path()).unwrap();
    let manifest = bundle.path().join("manifest.txt");
    chmod(&manifest, 0o666);
    let message = refusal(bundle.path());
    for part in [&manifest.display().to_string(), "mode 666", "chmod go-w"] {
        assert!(message.contains(part), "{part}: {message}");
    }
}

#[test]
fn a_fifo_manifest_is_an_error_not_a_hang_and_an_open_folder_is_refused_first() {
    let bundle = exported(|_| {});
    let manifest = bundle.path().join("manifest.txt");
    fs::remove_file(&manifest).unwrap();
    let made = Command::new("mkfifo").arg(&manifest).status().unwrap();
    assert!(made.success());
    let message = refusal(bundle.path());
    for part in [&manifest.display().to_string(), "not a regular file"] {
        assert!(message.contains(part), "{part}: {message}");
    }
    chmod(bundle.path(), 0o777);
    let message = refusal(bundle.path());
    assert!(message.contains("chmod 700"), "{message}");
    assert!(!message.contains("manifest"), "the folder first: {message}");
}

#[test]
fn a_manifest_linked_to_a_device_or_too_large_is_refused_before_it_is_read() {
    let bundle = exported(|_| {});
    let manifest = bundle.path().join("manifest.txt");
    fs::remove_file(&manifest).unwrap();
    for device in ["/dev/zero", "/dev/urandom"] {
        symlink(device, &manifest).unwrap();
        let message = refusal(bundle.path());
        for part in [&manifest.display().to_string(), "symbolic link"] {
            assert!(message.contains(part), "{device}, {part}: {message}");
        }
        fs::remove_file(&manifest).unwrap();
    }
    // 64 GiB of a sparse file: refused by its size, not read.
    fs::File::create(&manifest)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let message = refusal(bundle.path());
    for part in [&manifest.display().to_string(), "16 MiB"] {
        assert!(message.contains(part), "{part}: {message}");
    }
}
