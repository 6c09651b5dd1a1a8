//! Signed bundles ("CI builds, everyone reads" in `docs/cluster.md`): a
//! builder with a signing key exports a bundle that a reader holding only
//! its public key serves, with no secret anywhere; the reader refuses a
//! bundle signed by a key it does not trust, one whose manifest changed
//! after it was signed, and an unsigned one; a runtime without keys refuses
//! a signed bundle, naming its signer; an entry swapped for one a stranger
//! signed is never run (the call compiles instead).

mod support;

use std::fs;
use std::path::Path;

use jit_store::{ArtifactKey, ArtifactStore, EntryCheck, StoreConfig};
use sheaf_integration::{
    artifacts::{verify_bundle, ArtifactSource},
    compiler::CompilerPreference,
    reference,
    settings::{
        DiskCacheFolder, PublicKey, SigningKey, SigningKeySource, TrustSettings, TrustedKey,
    },
    Dispatched, ErrorChain, JitError, JitRuntime, Value,
};
use support::array;
use tempfile::TempDir;

/// Trust settings that sign with `signer`.
fn builder_of(signer: &SigningKey) -> TrustSettings {
    let mut trust = TrustSettings::default();
    trust.signing_key = Some(SigningKeySource::Key(signer.clone()));
    trust
}

/// Trust settings that trust `keys` only.
fn reader_of(keys: &[PublicKey]) -> TrustSettings {
    let mut trust = TrustSettings::default();
    trust.trusted_keys = keys.iter().copied().map(TrustedKey::Key).collect();
    trust
}

fn x() -> [Value; 1] {
    [Value::from(array(&[2, 5], 4))]
}

/// A bundle of the sigmoid of an `f32[2,5]`, exported by a runtime with
/// `trust` (signed when it has a signing key).
fn exported(trust: TrustSettings) -> TempDir {
    let (cache, bundle) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let jit = JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.path().into()))
            .trust(|t| *t = trust.clone())
            .build()
            .unwrap(),
    )
    .unwrap();
    let outcome = jit.dispatch(&reference::sigmoid(), &x(), &[]).unwrap();
    assert!(matches!(outcome, Dispatched::Compiled(_)), "{outcome:?}");
    let summary = jit.export_artifacts(bundle.path()).unwrap();
    assert_eq!((summary.artifacts, summary.variants), (1, 1), "{summary:?}");
    assert_eq!(
        summary.signer,
        trust.signing_key.as_ref().map(|key| match key {
            SigningKeySource::Key(key) => key.public_key(),
            other => panic!("{other:?}"),
        })
    );
    bundle
}

/// A runtime with no compiler and no disk cache that serves `bundle` with
/// `trust`.
fn serving(bundle: &Path, trust: TrustSettings) -> Result<JitRuntime, JitError> {
    JitRuntime::new(
        support::blocking()
            .compile(|compile| compile.compiler = CompilerPreference::Disabled)
            .disk(|disk| disk.folder = DiskCacheFolder::Disabled)
            .trust(|t| *t = trust)
            .artifact_bundle(bundle)
            .build()
            .unwrap(),
    )
}

/// Why a runtime with `trust` does not start on `bundle`, with causes.
fn refusal(bundle: &Path, trust: TrustSettings) -> String {
    let error = serving(bundle, trust).map(drop).expect_err("refused");
    assert!(matches!(error, JitError::Bundle { .. }), "{error:?}");
    ErrorChain(&error).to_string()
}

/// Where the sigmoid's artifact came from in a runtime serving `bundle`.
fn source_of_sigmoid(jit: &JitRuntime) -> Option<ArtifactSource> {
    match jit.dispatch(&reference::sigmoid(), &x(), &[]).unwrap() {
        Dispatched::Compiled(compiled) => {
            support::assert_close(
                &compiled.outputs[0],
                &reference::interpret_sigmoid(&x()).unwrap()[0],
                "sigmoid",
            );
            Some(compiled.source())
        }
        _ => None,
    }
}

fn the_entry(bundle: &Path) -> std::path::PathBuf {
    let mut entries: Vec<_> = fs::read_dir(bundle.join("vmfb"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    entries.remove(0)
}

#[test]
fn a_reader_with_public_keys_only_serves_what_its_builder_signed() {
    let signer = SigningKey::from_seed(&[21; 32]);
    let bundle = exported(builder_of(&signer));
    assert!(!bundle.path().join("secret").exists(), "no secret ships");
    let signature = fs::read_to_string(bundle.path().join("manifest.sig")).unwrap();
    assert!(
        signature.starts_with(&signer.public_key().to_string()),
        "{signature}"
    );

    let reader = serving(bundle.path(), reader_of(&[signer.public_key()])).unwrap();
    assert_eq!(source_of_sigmoid(&reader), Some(ArtifactSource::Bundle));

    // Several keys at once (a rotation): the builder's among them.
    let next = SigningKey::from_seed(&[22; 32]).public_key();
    let rotating = serving(bundle.path(), reader_of(&[next, signer.public_key()])).unwrap();
    assert_eq!(source_of_sigmoid(&rotating), Some(ArtifactSource::Bundle));

    let verdict = verify_bundle(bundle.path(), &reader_of(&[signer.public_key()])).unwrap();
    assert!(verdict.is_ok(), "{verdict:?}");
    assert_eq!(verdict.signer, Some(signer.public_key()));
    assert!(matches!(
        verdict.entries[..],
        [(_, EntryCheck::Signed { signer: by, .. })] if by == signer.public_key()
    ));
}

#[test]
fn a_bundle_signed_by_another_key_or_changed_after_signing_or_unsigned_is_refused() {
    let signer = SigningKey::from_seed(&[21; 32]);
    let stranger = SigningKey::from_seed(&[23; 32]);
    let bundle = exported(builder_of(&signer));
    let trusts_builder = || reader_of(&[signer.public_key()]);

    let unknown = refusal(bundle.path(), reader_of(&[stranger.public_key()]));
    assert!(
        unknown.contains(&signer.public_key().to_string()) && unknown.contains("not among"),
        "{unknown}"
    );

    // A runtime that trusts no key has no secret to check a signed bundle
    // with: it says who signed it, and what to set.
    let keyless = refusal(bundle.path(), TrustSettings::default());
    assert!(
        keyless.contains(&signer.public_key().to_string())
            && keyless.contains("SHEAF_JIT_TRUSTED_KEYS"),
        "{keyless}"
    );

    // The manifest changed after it was signed (a variant added by hand).
    let manifest = bundle.path().join("manifest.txt");
    let signed_text = fs::read_to_string(&manifest).unwrap();
    fs::write(&manifest, format!("{signed_text}# an edit\n")).unwrap();
    let changed = refusal(bundle.path(), trusts_builder());
    assert!(changed.contains("does not verify"), "{changed}");

    // Signed again by a stranger, after the change: not a trusted key.
    let resigned = stranger.sign_document(
        "sheaf-jit bundle manifest",
        fs::read(&manifest).unwrap().as_slice(),
    );
    fs::write(bundle.path().join("manifest.sig"), format!("{resigned}\n")).unwrap();
    let by_stranger = refusal(bundle.path(), trusts_builder());
    assert!(
        by_stranger.contains(&stranger.public_key().to_string()),
        "{by_stranger}"
    );

    // No signature at all.
    fs::remove_file(bundle.path().join("manifest.sig")).unwrap();
    let missing = refusal(bundle.path(), trusts_builder());
    assert!(missing.contains("not signed"), "{missing}");

    // An unsigned bundle (tagged with its own secret) is refused by a
    // reader too: its secret ships with it, so it proves nothing.
    let unsigned = exported(TrustSettings::default());
    let refused = refusal(unsigned.path(), trusts_builder());
    assert!(refused.contains("not signed"), "{refused}");
    // A runtime without keys still serves it, as before.
    let keyless = serving(unsigned.path(), TrustSettings::default()).unwrap();
    assert_eq!(source_of_sigmoid(&keyless), Some(ArtifactSource::Bundle));
}

#[test]
fn an_entry_swapped_for_one_a_stranger_signed_is_never_run() {
    let signer = SigningKey::from_seed(&[21; 32]);
    let stranger = SigningKey::from_seed(&[23; 32]);
    let bundle = exported(builder_of(&signer));
    let entry = the_entry(bundle.path());
    let key = ArtifactKey::from_hex(entry.file_stem().unwrap().to_str().unwrap()).unwrap();
    // The same artifact under the same key and of the same size, signed
    // by the stranger: the manifest's signature still verifies, so the
    // bundle opens, but the entry is not the builder's.
    let artifact = {
        let own = ArtifactStore::open_read_only_signed(
            bundle.path(),
            jit_store::TrustedKeys::new([signer.public_key()]),
        )
        .unwrap();
        own.fetch(&key, |a| Ok::<_, String>(a.bytes().to_vec()))
            .unwrap()
    };
    let forged = tempfile::tempdir().unwrap();
    let theirs =
        ArtifactStore::open_signing(StoreConfig::at(forged.path()), stranger.clone()).unwrap();
    assert!(theirs.insert(&key, &artifact));
    fs::copy(theirs.entry_path(&key).unwrap(), &entry).unwrap();

    let reader_keys = reader_of(&[signer.public_key()]);
    let verdict = verify_bundle(bundle.path(), &reader_keys).unwrap();
    assert!(!verdict.is_ok());
    assert!(verdict.opens.is_ok(), "the manifest is still the builder's");
    assert_eq!(
        verdict.entries[0].1,
        EntryCheck::UnknownSigner(stranger.public_key())
    );
    // With no compiler, a call that cannot be served compiled runs on
    // the interpreter: never the stranger's entry.
    let reader = serving(bundle.path(), reader_keys).unwrap();
    assert_ne!(source_of_sigmoid(&reader), Some(ArtifactSource::Bundle));
}
