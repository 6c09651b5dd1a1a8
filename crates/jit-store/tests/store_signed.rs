//! A folder of signed entries, as a builder exports a bundle
//! (`ArtifactStore::open_signing`) and a reader with public keys only reads
//! it (`ArtifactStore::open_read_only_signed`): the reader loads what a
//! trusted key signed and nothing else, whatever else the folder holds, and
//! says why in its counters and in `check_entry`.
#![cfg(not(miri))] // file system, and ring's Ed25519

mod support;

use std::fs;
use std::path::Path;

use jit_store::{ArtifactStore, EntryCheck, SigningKey, StoreConfig, TrustedKeys};
use support::key;

fn built(program: &str) -> Vec<u8> {
    format!("compiled {program} ").repeat(64).into_bytes()
}

/// `programs` written to `dir` by `signer` (a builder's export).
fn export(dir: &Path, signer: &SigningKey, programs: &[&str]) {
    let store = ArtifactStore::open_signing(StoreConfig::at(dir), signer.clone()).unwrap();
    for program in programs {
        assert!(store.insert(&key(program), &built(program)), "{program}");
    }
    // What the builder wrote, it reads back (it trusts its own key).
    assert_eq!(served(&store, programs[0]), Some(built(programs[0])));
}

/// What `store` hands the loader for `program`, if anything.
fn served(store: &ArtifactStore, program: &str) -> Option<Vec<u8>> {
    store.fetch(&key(program), |artifact| {
        Ok::<_, String>(artifact.bytes().to_vec())
    })
}

fn check(store: &ArtifactStore, program: &str) -> EntryCheck {
    store.check_entry(&store.stored_entry(&key(program)).expect("an entry"))
}

#[test]
fn a_reader_loads_what_a_trusted_key_signed_and_says_who_signed_it() {
    let dir = tempfile::tempdir().unwrap();
    let builder = SigningKey::from_seed(&[5; 32]);
    export(dir.path(), &builder, &["a", "b"]);
    assert!(
        !dir.path().join("secret").exists(),
        "a signed folder holds no secret"
    );

    let reader =
        ArtifactStore::open_read_only_signed(dir.path(), TrustedKeys::new([builder.public_key()]))
            .unwrap();
    assert_eq!(served(&reader, "a"), Some(built("a")));
    assert_eq!(served(&reader, "b"), Some(built("b")));
    let checked = check(&reader, "a");
    assert!(checked.is_authentic(), "{checked}");
    assert_eq!(
        checked,
        EntryCheck::Signed {
            artifact_bytes: built("a").len() as u64,
            signer: builder.public_key(),
        }
    );
    assert!(checked
        .to_string()
        .contains(&builder.public_key().to_string()));
    assert_eq!(reader.stats().hits, 2);
}

#[test]
fn unsigned_unknown_and_tampered_entries_are_refused_counted_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (builder, stranger) = (
        SigningKey::from_seed(&[5; 32]),
        SigningKey::from_seed(&[6; 32]),
    );
    export(dir.path(), &builder, &["good", "tampered"]);
    export(dir.path(), &stranger, &["foreign"]);
    // An entry tagged with a secret (a disk cache's, or an unsigned
    // bundle's), copied in.
    let tagged = tempfile::tempdir().unwrap();
    let cache = ArtifactStore::open(StoreConfig::at(tagged.path())).unwrap();
    assert!(cache.insert(&key("unsigned"), &built("unsigned")));
    let from = cache.entry_path(&key("unsigned")).unwrap();
    fs::copy(
        &from,
        dir.path().join("vmfb").join(from.file_name().unwrap()),
    )
    .unwrap();
    // A signed entry whose last payload byte changed.
    let reader_keys = TrustedKeys::new([builder.public_key()]);
    let reader = ArtifactStore::open_read_only_signed(dir.path(), reader_keys).unwrap();
    let tampered = reader.entry_path(&key("tampered")).unwrap();
    let mut bytes = fs::read(&tampered).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(&tampered, bytes).unwrap();

    assert_eq!(served(&reader, "good"), Some(built("good")));
    for program in ["tampered", "foreign", "unsigned"] {
        assert_eq!(served(&reader, program), None, "{program} was loaded");
    }
    assert_eq!(check(&reader, "tampered"), EntryCheck::Unauthenticated);
    assert_eq!(
        check(&reader, "foreign"),
        EntryCheck::UnknownSigner(stranger.public_key())
    );
    assert_eq!(check(&reader, "unsigned"), EntryCheck::Unsigned);
    let stats = reader.stats();
    assert_eq!(
        (
            stats.hits,
            stats.unauthenticated,
            stats.unknown_signer,
            stats.unsigned
        ),
        (1, 1, 1, 1)
    );
    // A read-only reader deletes nothing, and writes nothing.
    assert!(!reader.insert(&key("new"), &built("new")));
    assert_eq!(fs::read_dir(dir.path().join("vmfb")).unwrap().count(), 4);

    // A reader that trusts no key loads nothing at all.
    let nobody = ArtifactStore::open_read_only_signed(dir.path(), TrustedKeys::default()).unwrap();
    assert_eq!(served(&nobody, "good"), None);
    // And the folder's own rule still holds for a reader without keys: a
    // signed folder has no secret to open it with.
    let error = ArtifactStore::open_read_only(dir.path()).unwrap_err();
    assert!(error.to_string().contains("secret"), "{error}");
}
