//! The disk cache's entry reader on any file content: it never panics,
//! never allocates what the header claims, and returns a payload only for
//! exactly the entry this store's secret would have written.
#![no_main]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::OnceLock;

use jit_store::{ArtifactKey, ArtifactStore, KeyParts, StoreConfig};
use libfuzzer_sys::fuzz_target;

/// A store whose secret is fixed (so that the committed corpus holds
/// authentic entries), and the path of the fuzzed key's entry.
struct Fixture {
    _dir: tempfile::TempDir,
    store: ArtifactStore,
    entry: PathBuf,
}

fn key() -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program: "module @fuzz {}",
        compiler: "fuzz",
        runtime: "fuzz",
        target: "fuzz",
    })
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let secret = dir.path().join("secret");
        fs::write(&secret, [0x5e; 32]).expect("the secret");
        fs::set_permissions(&secret, fs::Permissions::from_mode(0o600)).expect("0600");
        let store = ArtifactStore::open(StoreConfig::at(dir.path())).expect("a private folder");
        let entry = store.entry_path(&key()).expect("enabled");
        Fixture {
            _dir: dir,
            store,
            entry,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    fs::write(&f.entry, data).expect("writing the entry");
    let found = f
        .store
        .fetch(&key(), |artifact| Ok::<_, String>(artifact.bytes().to_vec()));
    if let Some(payload) = found {
        // The store's own entry for this payload is byte for byte the input.
        assert!(f.store.insert(&key(), &payload));
        assert_eq!(fs::read(&f.entry).expect("the entry"), data);
    }
});
