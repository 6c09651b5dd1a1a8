//! Opening an artifact bundle, as `JitRuntime::new` does, on any manifest and
//! any entry file: it never panics, reads no more of the manifest than its
//! bound (libFuzzer's memory limits catch an allocation out of proportion),
//! and accepts a bundle only when its manifest is text that lists every
//! entry it counts.
//!
//! An input is the manifest, then a NUL byte and the bytes of the one entry
//! file (`vmfb/<KEY>.sjit`); without a NUL there is no entry file.
//! `@RUNTIME@` in the manifest stands for this build's IREE runtime, so that
//! the seeds reach the entries whatever the build.
#![no_main]

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use jit_store::{ArtifactStore, StoreConfig};
use libfuzzer_sys::fuzz_target;

/// The key of the entry file, as the seeds' manifests name it.
const KEY: &str = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed";

/// A bundle folder closed to others (0700, with its `vmfb/` and secret),
/// which each input fills.
struct Fixture {
    dir: tempfile::TempDir,
    manifest: PathBuf,
    entry: PathBuf,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        ArtifactStore::open(StoreConfig::at(dir.path())).expect("a private folder");
        Fixture {
            manifest: dir.path().join("manifest.txt"),
            entry: dir.path().join(format!("vmfb/{KEY}.sjit")),
            dir,
        }
    })
}

/// Writes `bytes` to `path`, closed to others whatever the umask.
fn write_private(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).expect("writing a bundle file");
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).expect("0600");
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let (manifest, entry) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let manifest = match std::str::from_utf8(manifest) {
        Ok(text) => text
            .replace("@RUNTIME@", iree_safe::IREE_RUNTIME_BUILD)
            .into_bytes(),
        Err(_) => manifest.to_vec(),
    };
    write_private(&f.manifest, &manifest);
    match entry {
        Some(bytes) => write_private(&f.entry, bytes),
        None => {
            if let Err(e) = fs::remove_file(&f.entry) {
                assert_eq!(e.kind(), io::ErrorKind::NotFound, "removing the entry: {e}");
            }
        }
    }
    if let Ok(entries) = sheaf_integration::artifacts::open_for_fuzzing(f.dir.path()) {
        let text = std::str::from_utf8(&manifest).expect("an accepted manifest is text");
        let listed = text.lines().filter(|l| l.starts_with("entry\t")).count();
        assert_eq!(entries, listed, "{text:?}");
        assert!(entries == 0 || entry.is_some(), "an entry with no file");
    }
});
