//! One disk-cache entry: a file holding a header, a seal and the `.vmfb`,
//! written atomically. The remote tier stores the same bytes as one value
//! (`remote/`), sealed with the cluster's secret or a builder's signature.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `SJITVMFB` |
//! | 4 | format version: 2 (a tag) or 3 (a signature) |
//! | 4 | reserved, 0 |
//! | 8 | payload length |
//! | 32 (format 2) | tag: HMAC-SHA256 of the key, the payload length and the payload, under a secret (`trust.rs`) |
//! | 32 + 64 (format 3) | the signer's Ed25519 public key, and its signature of the key, the payload length and the payload's SHA-256 (`trust/signatures.rs`) |
//! | 32 | the entry's [`ArtifactKey`] |
//! | n | payload: the `.vmfb` |
//!
//! A disk cache writes and reads format 2 under its folder's secret; a
//! remote tier whichever its [`RemoteTrust`](crate::RemoteTrust) says, and
//! a reader that trusts signatures refuses a format 2 entry (unsigned) and
//! one signed by a key it does not trust, before its payload is read.
//!
//! Reading trusts nothing in the file before the seal verifies, and reads
//! nothing of a file that is not safe: the file is opened without following
//! links or blocking, and must be a regular file that only the folder's
//! owners can change (`trust::open_file`, checked on the opened file); its
//! real size must match the header and stay under the bound before anything
//! is allocated, and the allocation is fallible.
//!
//! Writers fill a uniquely named temporary file (mode 0600) in the cache
//! folder and `rename` it over the entry's name, which replaces it
//! atomically: readers and concurrent writers of the same key see either the
//! old or the new file, each complete. Nothing is `fsync`ed: after a power
//! loss an entry may be truncated or zeroed, which its seal detects.

use std::io::{self, Read};
use std::path::Path;
use std::time::SystemTime;

use super::file_io;
use super::key::ArtifactKey;
use super::trust::{
    open_file, Owners, PublicKey, Secret, SignatureCheck, SigningKey, StoreError, TrustedKeys,
    CLOSE_FILE, PUBLIC_KEY_LEN, SIGNATURE_LEN, TAG_LEN,
};
use super::verified::VerifiedArtifact;

const MAGIC: [u8; 8] = *b"SJITVMFB";
/// The format of an entry sealed with a tag.
const TAGGED: u32 = 2;
/// The format of an entry sealed with a signature.
const SIGNED: u32 = 3;

/// Size of the header's fixed start: magic, version, reserved, length.
const PREFIX_LEN: usize = 8 + 4 + 4 + 8;

/// Size of the header before the payload of a tagged entry (a disk cache's).
pub(crate) const HEADER_LEN: usize = PREFIX_LEN + TAG_LEN + 32;

/// Size of the longest header before a payload: a signed entry's.
pub(crate) const MAX_HEADER_LEN: usize = PREFIX_LEN + PUBLIC_KEY_LEN + SIGNATURE_LEN + 32;

/// Prefix of temporary files; they never end in [`ENTRY_EXTENSION`].
pub(crate) use super::file_io::TEMP_PREFIX;

/// Extension of entry files.
pub(crate) const ENTRY_EXTENSION: &str = "sjit";

/// What seals the entries written: a secret's tag, or a signature.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sealer<'a> {
    /// A tag under this secret (format 2).
    Secret(&'a Secret),
    /// A signature by this key (format 3).
    Signer(&'a SigningKey),
}

/// What checks the seal of the entries read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Checker<'a> {
    /// A tag under this secret: format 2 only.
    Secret(&'a Secret),
    /// A signature by one of these keys: format 3 only.
    Signatures(&'a TrustedKeys),
}

/// An entry's seal, as its header holds it.
#[derive(Debug, PartialEq, Eq)]
enum Seal {
    Tag([u8; TAG_LEN]),
    Signature {
        signer: PublicKey,
        signature: [u8; SIGNATURE_LEN],
    },
}

/// What reading an entry found.
#[derive(Debug)]
pub(crate) enum ReadOutcome {
    /// A complete, authentic entry for the key: its payload, and the key
    /// that signed it (`None` for a tagged entry).
    Found(Vec<u8>, Option<PublicKey>),
    /// No entry (or one that cannot be read now, e.g. for lack of memory).
    Missing,
    /// A file that is not a well-formed entry for the key: why.
    Corrupt(String),
    /// A well-formed entry whose seal the reader does not accept: why.
    Unauthenticated(Untrusted),
}

/// Why a well-formed entry's seal is not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Untrusted {
    /// The tag or signature does not verify: forged, re-keyed from another
    /// entry, tampered with, or damaged.
    Unverified,
    /// A tag where a signature is required: published by a holder of a
    /// shared secret, not by a builder.
    Unsigned,
    /// Signed by this key, which the reader does not trust.
    UnknownSigner(PublicKey),
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untrusted::Unverified => f.write_str(
                "it failed authentication (forged, sealed with another secret or key, copied \
                 from another key, tampered with, or damaged)",
            ),
            Untrusted::Unsigned => f.write_str(
                "it is not signed (published with a shared secret, not by a trusted builder)",
            ),
            Untrusted::UnknownSigner(key) => write!(
                f,
                "it is signed by {key}, which is not among the trusted keys (a new builder's key \
                 to add, or a stranger's)"
            ),
        }
    }
}

/// What an entry read (from disk or from a remote store) comes to once
/// the caller's `load` had its artifact: the one verdict both tiers give.
#[derive(Debug)]
pub(crate) enum Verdict<V> {
    /// Authentic, and `load` took it: its value and the artifact.
    Loaded { value: V, artifact: Vec<u8> },
    /// No entry.
    Missing,
    /// An entry not to be used, and why.
    Rejected(Rejection),
}

/// Why an entry is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rejection {
    /// Not a well-formed entry for the key: why.
    Corrupt(String),
    /// Its seal is not accepted: why.
    Unauthenticated(Untrusted),
    /// Authentic, but the caller's `load` refused the artifact: why.
    Refused(String),
}

/// The verdict on a read entry: an authentic artifact is handed to `load`
/// (as [`VerifiedArtifact::authenticated`]); anything else is not.
pub(crate) fn judge<V, L: std::fmt::Display>(
    outcome: ReadOutcome,
    load: impl FnOnce(VerifiedArtifact<'_>) -> Result<V, L>,
) -> Verdict<V> {
    match outcome {
        ReadOutcome::Found(artifact, _) => match load(VerifiedArtifact::authenticated(&artifact)) {
            Ok(value) => Verdict::Loaded { value, artifact },
            Err(reason) => Verdict::Rejected(Rejection::Refused(reason.to_string())),
        },
        ReadOutcome::Missing => Verdict::Missing,
        ReadOutcome::Corrupt(reason) => Verdict::Rejected(Rejection::Corrupt(reason)),
        ReadOutcome::Unauthenticated(why) => Verdict::Rejected(Rejection::Unauthenticated(why)),
    }
}

/// Reads the entry at `path`, checks it completely with `checker`, and,
/// when `touch` is set, marks it as used (sets its modification time, the
/// LRU order) when it is good. Entries with payloads over `max_payload`
/// bytes are corrupt.
///
/// `Err` when the file is not safe to read, which leaves it unread: a link,
/// a FIFO or device, or a file that someone other than `owners` could have
/// written. The error says why, and what to run.
pub(crate) fn read(
    path: &Path,
    key: &ArtifactKey,
    checker: Checker<'_>,
    owners: Owners,
    max_payload: u64,
    touch: bool,
) -> Result<ReadOutcome, String> {
    let (mut file, metadata) = match open_file(path, owners, CLOSE_FILE) {
        Ok(opened) => opened,
        Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            return Ok(ReadOutcome::Missing)
        }
        Err(StoreError::Io { source, .. }) => {
            return Ok(ReadOutcome::Corrupt(format!("cannot open it: {source}")))
        }
        Err(StoreError::Insecure { reason, .. } | StoreError::Invalid { reason, .. }) => {
            return Err(reason)
        }
    };
    let outcome = parse(&mut file, metadata.len(), key, checker, max_payload);
    if touch && matches!(outcome, ReadOutcome::Found(..)) {
        // Best effort: an entry we cannot touch just ages sooner.
        let _ = file.set_modified(SystemTime::now());
    }
    Ok(outcome)
}

/// Parses an entry of `file_len` bytes from `file` and checks its seal with
/// `checker`.
pub(crate) fn parse(
    file: &mut impl Read,
    file_len: u64,
    key: &ArtifactKey,
    checker: Checker<'_>,
    max_payload: u64,
) -> ReadOutcome {
    let shorter = || ReadOutcome::Corrupt(format!("{file_len} bytes: shorter than a header"));
    if file_len < PREFIX_LEN as u64 {
        return shorter();
    }
    let mut prefix = [0u8; PREFIX_LEN];
    if let Err(e) = file.read_exact(&mut prefix) {
        return ReadOutcome::Corrupt(format!("truncated header ({e})"));
    }
    let (seal_len, promised) = match decode_prefix(&prefix) {
        Ok(decoded) => decoded,
        Err(reason) => return ReadOutcome::Corrupt(reason),
    };
    let rest_len = seal_len + 32;
    let Some(payload_len) = file_len.checked_sub((PREFIX_LEN + rest_len) as u64) else {
        return shorter();
    };
    if payload_len > max_payload {
        return ReadOutcome::Corrupt(format!(
            "a {payload_len}-byte payload, over the {max_payload}-byte bound"
        ));
    }
    if promised != payload_len {
        return ReadOutcome::Corrupt(format!(
            "the header promises {promised} payload bytes, the file holds {payload_len}"
        ));
    }
    let mut rest = [0u8; MAX_HEADER_LEN - PREFIX_LEN];
    let rest = &mut rest[..rest_len];
    if let Err(e) = file.read_exact(rest) {
        return ReadOutcome::Corrupt(format!("truncated header ({e})"));
    }
    let (seal, entry_key) = rest.split_at(seal_len);
    if entry_key != key.as_bytes() {
        return ReadOutcome::Corrupt("entry belongs to another key".to_owned());
    }
    let seal = decode_seal(seal);
    // What the seal alone decides, before a byte of payload is read.
    match (checker, &seal) {
        (Checker::Secret(_), Seal::Signature { .. }) => {
            return ReadOutcome::Corrupt(format!(
                "entry format {SIGNED} (signed), where entries carry a secret's tag"
            ))
        }
        (Checker::Signatures(_), Seal::Tag(_)) => {
            return ReadOutcome::Unauthenticated(Untrusted::Unsigned)
        }
        (Checker::Signatures(trusted), Seal::Signature { signer, .. })
            if !trusted.keys().contains(signer) =>
        {
            return ReadOutcome::Unauthenticated(Untrusted::UnknownSigner(*signer))
        }
        _ => {}
    }
    let Ok(len) = usize::try_from(payload_len) else {
        return ReadOutcome::Corrupt("payload too large for this machine".to_owned());
    };
    let mut payload = Vec::new();
    if payload.try_reserve_exact(len).is_err() {
        return ReadOutcome::Missing;
    }
    if let Err(e) = file.take(payload_len).read_to_end(&mut payload) {
        return ReadOutcome::Corrupt(format!("unreadable payload ({e})"));
    }
    if payload.len() != len {
        return ReadOutcome::Corrupt("truncated payload".to_owned());
    }
    let verified = match (checker, &seal) {
        (Checker::Secret(secret), Seal::Tag(tag)) => secret.verify(key, &payload, tag),
        (Checker::Signatures(trusted), Seal::Signature { signer, signature }) => {
            trusted.check(signer, key, &payload, signature) == SignatureCheck::Valid
        }
        _ => false,
    };
    if !verified {
        return ReadOutcome::Unauthenticated(Untrusted::Unverified);
    }
    let signer = match seal {
        Seal::Signature { signer, .. } => Some(signer),
        Seal::Tag(_) => None,
    };
    ReadOutcome::Found(payload, signer)
}

/// The header's first [`PREFIX_LEN`] bytes checked: the length of the seal
/// its version names, and the payload length it promises.
fn decode_prefix(prefix: &[u8; PREFIX_LEN]) -> Result<(usize, u64), String> {
    if prefix[..8] != MAGIC {
        return Err("not a cache entry (bad magic)".to_owned());
    }
    let version = u32::from_le_bytes(prefix[8..12].try_into().expect("4 bytes"));
    let seal_len = match version {
        TAGGED => TAG_LEN,
        SIGNED => PUBLIC_KEY_LEN + SIGNATURE_LEN,
        other => {
            return Err(format!(
                "entry format {other}, expected {TAGGED} or {SIGNED}"
            ))
        }
    };
    if prefix[12..16] != [0; 4] {
        return Err("reserved header bytes are set".to_owned());
    }
    let promised = u64::from_le_bytes(prefix[16..24].try_into().expect("8 bytes"));
    Ok((seal_len, promised))
}

impl Sealer<'_> {
    /// The length of the header of the entries this sealer writes.
    pub(crate) fn header_len(&self) -> usize {
        match self {
            Sealer::Secret(_) => HEADER_LEN,
            Sealer::Signer(_) => MAX_HEADER_LEN,
        }
    }
}

impl Checker<'_> {
    /// The length of the header of the entries this checker accepts.
    #[cfg(feature = "remote")]
    pub(crate) fn header_len(&self) -> usize {
        match self {
            Checker::Secret(_) => HEADER_LEN,
            Checker::Signatures(_) => MAX_HEADER_LEN,
        }
    }
}

/// The seal of [`decode_prefix`]'s length.
fn decode_seal(seal: &[u8]) -> Seal {
    match seal.split_at_checked(PUBLIC_KEY_LEN) {
        Some((signer, signature)) if signature.len() == SIGNATURE_LEN => Seal::Signature {
            signer: PublicKey::from_bytes(signer.try_into().expect("32 bytes")),
            signature: signature.try_into().expect("64 bytes"),
        },
        _ => Seal::Tag(seal.try_into().expect("a tag's 32 bytes")),
    }
}

/// The header of `payload` under `key`, sealed by `sealer`.
fn encode_header(key: &ArtifactKey, sealer: Sealer<'_>, payload: &[u8]) -> Vec<u8> {
    let mut header = Vec::with_capacity(MAX_HEADER_LEN);
    header.extend_from_slice(&MAGIC);
    let version = match sealer {
        Sealer::Secret(_) => TAGGED,
        Sealer::Signer(_) => SIGNED,
    };
    header.extend_from_slice(&version.to_le_bytes());
    header.extend_from_slice(&[0; 4]); // reserved
    header.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    match sealer {
        Sealer::Secret(secret) => header.extend_from_slice(&secret.tag(key, payload)),
        Sealer::Signer(signer) => {
            header.extend_from_slice(signer.public_key().as_bytes());
            header.extend_from_slice(&signer.sign(key, payload));
        }
    }
    header.extend_from_slice(key.as_bytes());
    header
}

/// The entry of `payload` under `key` as one buffer: the value the remote
/// tier stores (`remote/`), in the same format as a file.
#[cfg(any(feature = "remote", test))]
pub(crate) fn encode(key: &ArtifactKey, sealer: Sealer<'_>, payload: &[u8]) -> Vec<u8> {
    let mut bytes = encode_header(key, sealer, payload);
    bytes.reserve_exact(payload.len());
    bytes.extend_from_slice(payload);
    bytes
}

/// Writes an entry for `key` to `path` (inside `dir`) atomically, sealed
/// by `sealer`; returns the bytes written.
pub(crate) fn write(
    dir: &Path,
    path: &Path,
    key: &ArtifactKey,
    sealer: Sealer<'_>,
    payload: &[u8],
) -> io::Result<u64> {
    debug_assert_eq!(path.parent(), Some(dir));
    let header = encode_header(key, sealer, payload);
    file_io::write_parts(path, &[&header, payload], 0o600)?;
    Ok((header.len() + payload.len()) as u64)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::KeyParts;

    pub(crate) fn key(program: &str) -> ArtifactKey {
        ArtifactKey::new(&KeyParts {
            program,
            compiler: "test",
            runtime: "test",
            target: "generic",
        })
    }

    pub(crate) fn secret() -> Secret {
        Secret::from_bytes([3; TAG_LEN])
    }

    fn entry(key: &ArtifactKey, payload: &[u8]) -> Vec<u8> {
        encode(key, Sealer::Secret(&secret()), payload)
    }

    fn parsed(bytes: &[u8], key: &ArtifactKey) -> ReadOutcome {
        parse_with(bytes, key, Checker::Secret(&secret()))
    }

    fn parse_with(bytes: &[u8], key: &ArtifactKey, checker: Checker<'_>) -> ReadOutcome {
        parse(&mut &bytes[..], bytes.len() as u64, key, checker, 1 << 20)
    }

    #[test]
    fn the_verdict_hands_load_only_authentic_artifacts() {
        let (k, other) = (key("a"), key("b"));
        let load = |artifact: VerifiedArtifact<'_>| -> Result<usize, &str> {
            match artifact.bytes() {
                b"refuse me" => Err("no"),
                bytes => Ok(bytes.len()),
            }
        };
        let good = entry(&k, b"payload");
        assert!(matches!(
            judge(parsed(&good, &k), load),
            Verdict::Loaded { value: 7, artifact } if artifact == b"payload"
        ));
        assert!(matches!(
            judge(ReadOutcome::Missing, load),
            Verdict::Missing
        ));
        // An entry of another key is not authentic for this one; a cut one
        // is corrupt; neither reaches `load`.
        let never = |_: VerifiedArtifact<'_>| -> Result<(), &str> { panic!("loaded") };
        assert!(matches!(
            judge(parsed(&entry(&other, b"payload"), &k), never),
            Verdict::Rejected(Rejection::Unauthenticated(_) | Rejection::Corrupt(_))
        ));
        assert!(matches!(
            judge(parsed(&good[..good.len() - 1], &k), never),
            Verdict::Rejected(Rejection::Corrupt(_))
        ));
        let refused = entry(&k, b"refuse me");
        assert!(matches!(
            judge(parsed(&refused, &k), load),
            Verdict::Rejected(Rejection::Refused(reason)) if reason == "no"
        ));
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let key = key("a");
        let header = encode_header(&key, Sealer::Secret(&secret()), b"payload");
        assert_eq!(header.len(), HEADER_LEN);
        let prefix: [u8; PREFIX_LEN] = header[..PREFIX_LEN].try_into().unwrap();
        assert_eq!(decode_prefix(&prefix), Ok((TAG_LEN, 7)));
        assert_eq!(
            decode_seal(&header[PREFIX_LEN..PREFIX_LEN + TAG_LEN]),
            Seal::Tag(secret().tag(&key, b"payload"))
        );

        let mut bad_magic = prefix;
        bad_magic[0] ^= 1;
        assert!(decode_prefix(&bad_magic).unwrap_err().contains("magic"));
        let mut bad_version = prefix;
        bad_version[8] = 9;
        assert!(decode_prefix(&bad_version)
            .unwrap_err()
            .contains("format 9"));
        let mut reserved = prefix;
        reserved[13] = 1;
        assert!(decode_prefix(&reserved).unwrap_err().contains("reserved"));
        let whole = entry(&key, b"payload");
        assert!(
            matches!(parsed(&whole, &self::key("b")), ReadOutcome::Corrupt(r) if r.contains("another key"))
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // ring's Ed25519 is C and assembly
    fn signed_entries_need_a_trusted_signer_and_tagged_ones_are_unsigned() {
        let key = key("a");
        let builder = SigningKey::from_seed(&[5; 32]);
        let stranger = SigningKey::from_seed(&[6; 32]);
        let trusted = TrustedKeys::new([builder.public_key()]);
        let check = Checker::Signatures(&trusted);
        let signed = encode(&key, Sealer::Signer(&builder), b"0123456789");
        assert_eq!(signed.len(), MAX_HEADER_LEN + 10);
        assert!(
            matches!(parse_with(&signed, &key, check), ReadOutcome::Found(p, Some(by)) if p == b"0123456789" && by == builder.public_key())
        );
        // Every single-byte change is refused, and none is found.
        for i in 0..signed.len() {
            let mut changed = signed.clone();
            changed[i] ^= 0x40;
            assert!(
                !matches!(parse_with(&changed, &key, check), ReadOutcome::Found(..)),
                "byte {i}"
            );
        }
        // Tampered with, then signed again by a key not trusted.
        let resigned = encode(&key, Sealer::Signer(&stranger), b"0123456789 evil");
        assert!(matches!(
            parse_with(&resigned, &key, check),
            ReadOutcome::Unauthenticated(Untrusted::UnknownSigner(k)) if k == stranger.public_key()
        ));
        // Tampered with, the builder's signature kept.
        let mut tampered = encode(&key, Sealer::Signer(&builder), b"0123456789");
        *tampered.last_mut().unwrap() = b'X';
        assert!(matches!(
            parse_with(&tampered, &key, check),
            ReadOutcome::Unauthenticated(Untrusted::Unverified)
        ));
        // Published with a shared secret: authentic for its holders, unsigned here.
        assert!(matches!(
            parse_with(&entry(&key, b"0123456789"), &key, check),
            ReadOutcome::Unauthenticated(Untrusted::Unsigned)
        ));
        // And a disk cache never takes a signed entry for one of its own.
        assert!(matches!(parsed(&signed, &key), ReadOutcome::Corrupt(r) if r.contains("signed")));
    }

    #[test]
    fn only_authentic_well_formed_entries_are_found() {
        let key = key("a");
        let good = entry(&key, b"0123456789");
        assert!(matches!(parsed(&good, &key), ReadOutcome::Found(p, None) if p == b"0123456789"));
        // Every single-byte change is refused, and none is found.
        for i in 0..good.len() {
            let mut changed = good.clone();
            changed[i] ^= 0x40;
            assert!(
                !matches!(parsed(&changed, &key), ReadOutcome::Found(..)),
                "byte {i}"
            );
        }
        // Another artifact re-keyed under this key: a valid header, no tag.
        let mut rekeyed = entry(&self::key("b"), b"0123456789");
        rekeyed[56..88].copy_from_slice(key.as_bytes());
        assert!(matches!(
            parsed(&rekeyed, &key),
            ReadOutcome::Unauthenticated(Untrusted::Unverified)
        ));
        // A header promising more than the file holds, or than the bound.
        let mut huge = good.clone();
        huge[16..24].copy_from_slice(&(40u64 << 30).to_le_bytes());
        assert!(matches!(parsed(&huge, &key), ReadOutcome::Corrupt(r) if r.contains("promises")));
        let bounded = parse(
            &mut &good[..],
            40 << 30,
            &key,
            Checker::Secret(&secret()),
            1 << 20,
        );
        assert!(matches!(bounded, ReadOutcome::Corrupt(r) if r.contains("bound")));
        assert!(
            matches!(parsed(&good[..10], &key), ReadOutcome::Corrupt(r) if r.contains("shorter"))
        );
    }

    #[test]
    #[cfg_attr(miri, ignore)] // touches the file system
    fn files_round_trip_and_links_and_folders_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = key("a");
        let path = dir.path().join("entry");
        let secret = secret();
        let read = |path: &Path| {
            self::read(
                path,
                &key,
                Checker::Secret(&secret),
                Owners::User,
                1 << 20,
                true,
            )
        };
        assert!(matches!(read(&path), Ok(ReadOutcome::Missing)));
        assert_eq!(
            write(
                dir.path(),
                &path,
                &key,
                Sealer::Secret(&secret),
                b"0123456789"
            )
            .unwrap(),
            98
        );
        assert!(matches!(read(&path), Ok(ReadOutcome::Found(p, None)) if p == b"0123456789"));
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(
            matches!(read(&link), Err(r) if r.contains("symbolic link")),
            "a symlink"
        );
        assert!(
            matches!(read(dir.path()), Err(r) if r.contains("not a regular file")),
            "a folder"
        );
        // Writable by others: refused unread, saying what to run.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(
            matches!(read(&path), Err(r) if r.contains("chmod go-w")),
            "group-writable"
        );
    }
}
