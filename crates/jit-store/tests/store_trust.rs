//! The artifact store as an attacker or a careless user meets it: folders
//! others can write, foreign owners, symbolic links, special files, headers
//! that lie, entries forged or re-keyed from another artifact, and mutated
//! entries. Nothing planted is ever handed to the loader.
#![cfg(not(miri))] // file system

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use jit_store::{
    open_read_only_file, ArtifactKey, ArtifactStore, Fetched, KeyParts, StoreConfig, StoreError,
};

fn key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "test",
        runtime: "test",
        target: "generic",
    })
}

/// What `build` returns for `program`: the only bytes a loader may see.
fn built(program: &str) -> Vec<u8> {
    format!("compiled {program} ").repeat(64).into_bytes()
}

/// Fetches `program` with a loader that records every payload it is given.
fn fetch(store: &ArtifactStore, program: &str, seen: &Mutex<Vec<Vec<u8>>>) -> Fetched {
    let (_, fetched) = store
        .fetch_or_build(
            Some(&key(program)),
            |artifact| {
                seen.lock().unwrap().push(artifact.bytes().to_vec());
                Ok::<_, String>(())
            },
            || Ok::<_, String>(built(program)),
        )
        .unwrap();
    fetched
}

fn open(dir: &Path) -> ArtifactStore {
    ArtifactStore::open(StoreConfig::at(dir)).unwrap()
}

fn entry_path(store: &ArtifactStore, program: &str) -> PathBuf {
    store.entry_path(&key(program)).unwrap()
}

/// A store in a fresh folder holding the entry of `sigmoid`, the loader's
/// record, and the entry's path.
fn with_sigmoid() -> (
    tempfile::TempDir,
    ArtifactStore,
    Mutex<Vec<Vec<u8>>>,
    PathBuf,
) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let seen = Mutex::new(Vec::new());
    fetch(&store, "sigmoid", &seen);
    let path = entry_path(&store, "sigmoid");
    (dir, store, seen, path)
}

fn insecure(result: Result<ArtifactStore, StoreError>) -> String {
    match result {
        Err(error @ StoreError::Insecure { .. }) => error.to_string(),
        other => panic!("expected an insecure-folder error, got {other:?}"),
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn chmod(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}

/// The payload of `program`'s entry in `store`, if it serves one.
fn served(store: &ArtifactStore, program: &str) -> Option<Vec<u8>> {
    store.fetch(&key(program), |artifact| {
        Ok::<_, String>(artifact.bytes().to_vec())
    })
}

#[test]
fn folders_others_can_write_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let message = insecure(ArtifactStore::open(StoreConfig::at(dir.path())));
    assert!(
        message.contains("mode 777") && message.contains("chmod 700"),
        "{message}"
    );
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
    open(dir.path());
    // The entries' folder too, and the secret.
    fs::set_permissions(dir.path().join("vmfb"), fs::Permissions::from_mode(0o775)).unwrap();
    insecure(ArtifactStore::open(StoreConfig::at(dir.path())));
    fs::set_permissions(dir.path().join("vmfb"), fs::Permissions::from_mode(0o700)).unwrap();
    fs::set_permissions(dir.path().join("secret"), fs::Permissions::from_mode(0o644)).unwrap();
    let message = insecure(ArtifactStore::open(StoreConfig::at(dir.path())));
    assert!(message.contains("chmod 600"), "{message}");
}

#[test]
fn folders_of_another_user_are_refused() {
    if !is_root() {
        eprintln!("skipped: only root can give a folder to another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let foreign = dir.path().join("foreign");
    fs::create_dir(&foreign).unwrap();
    fs::set_permissions(&foreign, fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).unwrap();
    let message = insecure(ArtifactStore::open(StoreConfig::at(&foreign)));
    assert!(message.contains("belongs to user 4242"), "{message}");
    // A bundle installed by root is fine to read; by another user it is not.
    std::os::unix::fs::chown(&foreign, Some(0), Some(0)).unwrap();
    open(&foreign);
    std::os::unix::fs::chown(&foreign, Some(4242), Some(4242)).unwrap();
    assert!(matches!(
        ArtifactStore::open_read_only(&foreign),
        Err(StoreError::Insecure { .. })
    ));
}

#[test]
fn symbolic_links_are_never_followed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    let store = open(&real);
    let seen = Mutex::new(Vec::new());
    fetch(&store, "sigmoid", &seen);
    // A linked store folder, or a linked vmfb/ folder, is refused.
    let linked = dir.path().join("linked");
    symlink(&real, &linked).unwrap();
    insecure(ArtifactStore::open(StoreConfig::at(&linked)));
    let outer = dir.path().join("outer");
    fs::create_dir(&outer).unwrap();
    fs::set_permissions(&outer, fs::Permissions::from_mode(0o700)).unwrap();
    symlink(real.join("vmfb"), outer.join("vmfb")).unwrap();
    insecure(ArtifactStore::open(StoreConfig::at(&outer)));
    // An entry that is a link to a good entry is not followed: it is
    // removed and the artifact built again; the target stays.
    let target = entry_path(&store, "sigmoid");
    let planted = entry_path(&store, "softmax");
    fs::copy(&target, real.join("elsewhere")).unwrap();
    symlink(real.join("elsewhere"), &planted).unwrap();
    assert_eq!(fetch(&store, "softmax", &seen), Fetched::Built);
    assert!(
        fs::symlink_metadata(&planted).unwrap().is_file(),
        "replaced by a real entry"
    );
    assert!(real.join("elsewhere").exists());
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|b| *b == built("sigmoid") || *b == built("softmax")));
}

#[test]
fn a_fifo_entry_does_not_hang_the_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    let fifo = entry_path(&store, "sigmoid");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    // A lookup that opened the FIFO blocking would never return: run it
    // aside and give up after a bound far past any real lookup.
    let (sender, returned) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let seen = Mutex::new(Vec::new());
        let fetched = fetch(&store, "sigmoid", &seen);
        let _ = sender.send((fetched, store));
    });
    let (fetched, store) = returned
        .recv_timeout(Duration::from_secs(60))
        .expect("the lookup blocked on the FIFO");
    assert_eq!(fetched, Fetched::Built);
    assert!(
        fs::symlink_metadata(&fifo).unwrap().is_file(),
        "the FIFO was replaced"
    );
    assert_eq!(store.stats().insecure, 1);
}

#[test]
fn a_header_claiming_40_gib_is_refused_before_any_allocation() {
    let (_dir, store, seen, path) = with_sigmoid();
    // A sparse file as large as its header claims: sizes agree, the bound
    // does not.
    let mut bytes = fs::read(&path).unwrap();
    let claimed: u64 = 40 << 30;
    bytes[16..24].copy_from_slice(&claimed.to_le_bytes());
    fs::write(&path, &bytes).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(88 + claimed)
        .unwrap();
    assert_eq!(fetch(&store, "sigmoid", &seen), Fetched::Built);
    assert_eq!(store.stats().corrupt, 1);
    assert!(
        fs::metadata(&path).unwrap().len() < 1 << 20,
        "deleted and rewritten"
    );
}

#[test]
fn an_entry_re_keyed_from_another_artifact_is_rejected_and_rebuilt() {
    let (dir, store, seen, _) = with_sigmoid();
    fetch(&store, "softmax", &seen);
    // Another artifact's entry under this key, its header re-keyed: a
    // valid layout, a tag for the other key.
    let mut planted = fs::read(entry_path(&store, "softmax")).unwrap();
    planted[56..88].copy_from_slice(key("sigmoid").as_bytes());
    fs::write(entry_path(&store, "sigmoid"), &planted).unwrap();
    seen.lock().unwrap().clear();
    let fresh = open(dir.path());
    assert_eq!(fetch(&fresh, "sigmoid", &seen), Fetched::Built);
    assert_eq!(fresh.stats().unauthenticated, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        [built("sigmoid")],
        "softmax was never loaded"
    );
    // Forged by someone without the secret: a store with another secret
    // (another user's folder, copied in) fails authentication too.
    let other = tempfile::tempdir().unwrap();
    let foreign = open(other.path());
    fetch(&foreign, "sigmoid", &seen);
    fs::copy(
        entry_path(&foreign, "sigmoid"),
        entry_path(&fresh, "sigmoid"),
    )
    .unwrap();
    assert_eq!(fetch(&open(dir.path()), "sigmoid", &seen), Fetched::Built);
}

#[test]
fn mutated_entries_never_reach_the_loader() {
    let (_dir, store, seen, path) = with_sigmoid();
    let good = fs::read(&path).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % bound as u64) as usize
    };
    let mutants = 600;
    let mut rejected = 0;
    for m in 0..mutants {
        let mut bytes = good.clone();
        match m % 4 {
            0 => bytes[next(good.len())] ^= 1 << next(8),
            1 => bytes[next(good.len())] ^= 1 + next(255) as u8,
            2 => bytes.truncate(next(good.len())),
            _ => bytes.extend((0..1 + next(64)).map(|_| next(256) as u8)),
        }
        assert_ne!(bytes, good);
        fs::write(&path, &bytes).unwrap();
        seen.lock().unwrap().clear();
        if fetch(&store, "sigmoid", &seen) == Fetched::Built {
            rejected += 1;
        }
        assert_eq!(*seen.lock().unwrap(), [built("sigmoid")], "mutant {m}");
    }
    assert_eq!(rejected, mutants);
    let stats = store.stats();
    assert_eq!(stats.corrupt + stats.unauthenticated, mutants as u64);
    println!(
        "{mutants} mutants: {} malformed, {} failed authentication, none loaded",
        stats.corrupt, stats.unauthenticated
    );
}

#[test]
fn stray_temporary_files_count_toward_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    fs::write(dir.path().join("vmfb/.tmp-crashed"), vec![0u8; 5000]).unwrap();
    assert_eq!(store.stats().bytes_on_disk, 5000);
}

#[test]
fn entries_others_could_write_are_never_read() {
    let (dir, _, seen, path) = with_sigmoid();
    assert_eq!(
        served(
            &ArtifactStore::open_read_only(dir.path()).unwrap(),
            "sigmoid"
        ),
        Some(built("sigmoid"))
    );
    // In a folder read only (a bundle's): refused, counted, left in place.
    for mode in [0o666, 0o620, 0o602] {
        chmod(&path, mode);
        let bundle = ArtifactStore::open_read_only(dir.path()).unwrap();
        assert_eq!(served(&bundle, "sigmoid"), None, "mode {mode:o}");
        assert_eq!(bundle.stats().insecure, 1, "mode {mode:o}");
        assert!(path.exists(), "a read-only folder is not changed");
    }
    // In this user's own cache: refused, deleted and built again.
    chmod(&path, 0o666);
    seen.lock().unwrap().clear();
    let own = open(dir.path());
    assert_eq!(fetch(&own, "sigmoid", &seen), Fetched::Built);
    assert_eq!(own.stats().insecure, 1);
    assert_eq!(*seen.lock().unwrap(), [built("sigmoid")], "built, not read");
    let mode = fs::symlink_metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "rewritten");
}

#[test]
fn a_read_only_folders_entries_that_are_links_or_of_another_user_are_never_read() {
    let (dir, _, _, path) = with_sigmoid();
    let elsewhere = dir.path().join("elsewhere");
    fs::rename(&path, &elsewhere).unwrap();
    symlink(&elsewhere, &path).unwrap();
    let bundle = ArtifactStore::open_read_only(dir.path()).unwrap();
    assert_eq!(served(&bundle, "sigmoid"), None, "a link");
    assert_eq!(bundle.stats().insecure, 1);
    if !is_root() {
        eprintln!("skipped: only root can give a file to another user");
        return;
    }
    fs::remove_file(&path).unwrap();
    fs::rename(&elsewhere, &path).unwrap();
    std::os::unix::fs::chown(&path, Some(0), Some(0)).unwrap();
    let bundle = ArtifactStore::open_read_only(dir.path()).unwrap();
    assert_eq!(served(&bundle, "sigmoid"), Some(built("sigmoid")), "root's");
    std::os::unix::fs::chown(&path, Some(4242), Some(4242)).unwrap();
    let bundle = ArtifactStore::open_read_only(dir.path()).unwrap();
    assert_eq!(served(&bundle, "sigmoid"), None, "another user's");
    assert_eq!(bundle.stats().insecure, 1);
}

#[test]
fn a_read_only_file_must_be_regular_and_closed_to_others_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("manifest.txt");
    let refusal = |path: &Path| match open_read_only_file(path) {
        Err(StoreError::Insecure { reason, .. }) => reason,
        other => panic!("expected an insecure-file error, got {other:?}"),
    };
    fs::write(&path, "text").unwrap();
    chmod(&path, 0o644);
    let (_, metadata) = open_read_only_file(&path).unwrap();
    assert_eq!(metadata.len(), 4);
    chmod(&path, 0o666);
    let reason = refusal(&path);
    assert!(
        reason.contains("mode 666") && reason.contains("chmod go-w"),
        "{reason}"
    );
    fs::remove_file(&path).unwrap();
    for device in ["/dev/zero", "/dev/urandom"] {
        symlink(device, &path).unwrap();
        assert!(refusal(&path).contains("symbolic link"), "{device}");
        fs::remove_file(&path).unwrap();
    }
    // A FIFO with no writer: opened without blocking, then refused.
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    assert!(refusal(&path).contains("not a regular file"));
    assert!(matches!(
        open_read_only_file(&dir.path().join("missing")),
        Err(StoreError::Io { .. })
    ));
}

#[test]
fn the_recorded_builder_is_read_back_only_from_a_safe_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = ArtifactStore::open(StoreConfig::at(dir.path())).unwrap();
    assert_eq!(store.recorded_builder(), None);
    assert!(store.record_builder("iree 3.13 @ abc"));
    assert_eq!(store.recorded_builder().as_deref(), Some("iree 3.13 @ abc"));
    assert!(
        store.record_builder("iree 3.14 @ def"),
        "a new builder replaces the old"
    );
    let path = dir.path().join("builder");
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let again = ArtifactStore::open(StoreConfig::at(dir.path())).unwrap();
    assert_eq!(again.recorded_builder().as_deref(), Some("iree 3.14 @ def"));
    assert!(!again.record_builder(&"x".repeat(5000)), "over 4 KiB");

    // A file others could have written names no builder, nor does a link.
    fs::set_permissions(&path, fs::Permissions::from_mode(0o666)).unwrap();
    assert_eq!(again.recorded_builder(), None);
    fs::remove_file(&path).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    fs::write(&elsewhere, "planted").unwrap();
    symlink(&elsewhere, &path).unwrap();
    assert_eq!(again.recorded_builder(), None);
    assert!(!ArtifactStore::disabled().record_builder("iree"));
}

/// The names and bytes of the files in `dir`.
fn files_in(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|item| {
            let path = item.unwrap().path();
            let bytes = fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    files.sort();
    files
}

#[test]
fn nothing_is_deleted_through_a_linked_policy_or_entries_folder() {
    let (dir, store, _, _) = with_sigmoid();
    let outside = tempfile::tempdir().unwrap();
    // The user's files elsewhere, named as the store names its own: a
    // policy file, a damaged entry of `sigmoid`'s key, a writer's
    // temporary file two hours old.
    fs::write(
        outside.path().join(format!("{}.policy", "ab".repeat(32))),
        b"x",
    )
    .unwrap();
    let damaged = outside
        .path()
        .join(entry_path(&store, "sigmoid").file_name().unwrap());
    fs::write(&damaged, b"not an entry").unwrap();
    let temporary = outside.path().join(".tmp-old");
    fs::write(&temporary, b"half").unwrap();
    fs::File::options()
        .write(true)
        .open(&temporary)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
    let before = files_in(outside.path());

    // `policy/` a link: clearing and pruning delete nothing through it.
    symlink(outside.path(), dir.path().join("policy")).unwrap();
    assert_eq!(store.clear().policies, 0);
    assert_eq!(store.prune(Some(0), None).entries, 0, "cleared already");
    assert_eq!(files_in(outside.path()), before);

    // `vmfb/` replaced by a link after the store opened it: a lookup that
    // finds the damaged file there, an invalidation, a listing, clearing
    // and pruning delete nothing through it.
    fs::rename(dir.path().join("vmfb"), dir.path().join("vmfb-moved")).unwrap();
    symlink(outside.path(), dir.path().join("vmfb")).unwrap();
    assert!(store
        .fetch(&key("sigmoid"), |_| Ok::<_, String>(()))
        .is_none());
    assert!(!store.invalidate(&key("sigmoid")));
    assert!(
        store.stored_entries().is_empty(),
        "nothing listed through it"
    );
    store.clear();
    store.prune(Some(0), Some(Duration::ZERO));
    assert_eq!(files_in(outside.path()), before);
}
