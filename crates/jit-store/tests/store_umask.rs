//! The store's folders and secret are private whatever the process's umask.
//! In a file of its own: the umask is process-wide, and a test that clears
//! it would make the temporary folders of tests running beside it
//! world-writable (which the store then rightly refuses).
#![cfg(not(miri))] // file system

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use jit_store::{ArtifactStore, StoreConfig};

#[test]
fn folders_and_the_secret_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("a/b/cache");
    let old = rustix::process::umask(rustix::fs::Mode::empty());
    let store = ArtifactStore::open(StoreConfig::at(&folder));
    rustix::process::umask(old);
    store.unwrap();
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&folder), 0o700);
    assert_eq!(mode(&folder.join("vmfb")), 0o700);
    assert_eq!(mode(&folder.join("secret")), 0o600);
}
