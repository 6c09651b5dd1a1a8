//! One disk-cache entry: a file holding a header, an authentication tag and
//! the `.vmfb`, written atomically. The remote tier stores the same bytes as
//! one value (`remote/`), tagged under the cluster's secret.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `SJITVMFB` |
//! | 4 | format version (2) |
//! | 4 | reserved, 0 |
//! | 8 | payload length |
//! | 32 | HMAC-SHA256 of the key, the payload length and the payload, under the folder's secret (`trust.rs`) |
//! | 32 | the entry's [`ArtifactKey`] |
//! | n | payload: the `.vmfb` |
//!
//! Reading trusts nothing in the file before the tag verifies, and reads
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
//! loss an entry may be truncated or zeroed, which its tag detects.

use std::io::{self, Read};
use std::path::Path;
use std::time::SystemTime;

use super::file_io;
use super::key::ArtifactKey;
use super::trust::{open_file, Owners, Secret, StoreError, CLOSE_FILE, TAG_LEN};
use super::verified::VerifiedArtifact;

const MAGIC: [u8; 8] = *b"SJITVMFB";
const FORMAT_VERSION: u32 = 2;

/// Size of the header before the payload.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 4 + 8 + TAG_LEN + 32;

/// Prefix of temporary files; they never end in [`ENTRY_EXTENSION`].
pub(crate) use super::file_io::TEMP_PREFIX;

/// Extension of entry files.
pub(crate) const ENTRY_EXTENSION: &str = "sjit";

/// What reading an entry found.
#[derive(Debug)]
pub(crate) enum ReadOutcome {
    /// A complete, authentic entry for the key; its payload.
    Found(Vec<u8>),
    /// No entry (or one that cannot be read now, e.g. for lack of memory).
    Missing,
    /// A file that is not a well-formed entry for the key: why.
    Corrupt(String),
    /// A well-formed entry whose tag does not verify: forged, re-keyed from
    /// another entry, or damaged.
    Unauthenticated,
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
    /// Its tag does not verify: forged, re-keyed from another entry, or
    /// damaged.
    Unauthenticated,
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
        ReadOutcome::Found(artifact) => match load(VerifiedArtifact::authenticated(&artifact)) {
            Ok(value) => Verdict::Loaded { value, artifact },
            Err(reason) => Verdict::Rejected(Rejection::Refused(reason.to_string())),
        },
        ReadOutcome::Missing => Verdict::Missing,
        ReadOutcome::Corrupt(reason) => Verdict::Rejected(Rejection::Corrupt(reason)),
        ReadOutcome::Unauthenticated => Verdict::Rejected(Rejection::Unauthenticated),
    }
}

/// Reads the entry at `path`, checks it completely, and, when `touch` is
/// set, marks it as used (sets its modification time, the LRU order) when it
/// is good. Entries with payloads over `max_payload` bytes are corrupt.
///
/// `Err` when the file is not safe to read, which leaves it unread: a link,
/// a FIFO or device, or a file that someone other than `owners` could have
/// written. The error says why, and what to run.
pub(crate) fn read(
    path: &Path,
    key: &ArtifactKey,
    secret: &Secret,
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
        Err(StoreError::Insecure { reason, .. }) => return Err(reason),
    };
    let outcome = parse(&mut file, metadata.len(), key, secret, max_payload);
    if touch && matches!(outcome, ReadOutcome::Found(_)) {
        // Best effort: an entry we cannot touch just ages sooner.
        let _ = file.set_modified(SystemTime::now());
    }
    Ok(outcome)
}

/// Parses and authenticates an entry of `file_len` bytes from `file`.
pub(crate) fn parse(
    file: &mut impl Read,
    file_len: u64,
    key: &ArtifactKey,
    secret: &Secret,
    max_payload: u64,
) -> ReadOutcome {
    let Some(payload_len) = file_len.checked_sub(HEADER_LEN as u64) else {
        return ReadOutcome::Corrupt(format!("{file_len} bytes: shorter than a header"));
    };
    if payload_len > max_payload {
        return ReadOutcome::Corrupt(format!(
            "a {payload_len}-byte payload, over the {max_payload}-byte bound"
        ));
    }
    let mut header = [0u8; HEADER_LEN];
    if let Err(e) = file.read_exact(&mut header) {
        return ReadOutcome::Corrupt(format!("truncated header ({e})"));
    }
    let header = match decode_header(&header, key) {
        Ok(header) => header,
        Err(reason) => return ReadOutcome::Corrupt(reason),
    };
    if header.payload_len != payload_len {
        return ReadOutcome::Corrupt(format!(
            "the header promises {} payload bytes, the file holds {payload_len}",
            header.payload_len
        ));
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
    if !secret.verify(key, &payload, &header.tag) {
        return ReadOutcome::Unauthenticated;
    }
    ReadOutcome::Found(payload)
}

/// The checked fields of a header.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    payload_len: u64,
    tag: [u8; TAG_LEN],
}

fn encode_header(key: &ArtifactKey, secret: &Secret, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    // 12..16 reserved, zero.
    header[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[24..56].copy_from_slice(&secret.tag(key, payload));
    header[56..88].copy_from_slice(key.as_bytes());
    header
}

fn decode_header(header: &[u8; HEADER_LEN], key: &ArtifactKey) -> Result<Header, String> {
    if header[..8] != MAGIC {
        return Err("not a cache entry (bad magic)".to_owned());
    }
    let version = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(format!("entry format {version}, expected {FORMAT_VERSION}"));
    }
    if header[12..16] != [0; 4] {
        return Err("reserved header bytes are set".to_owned());
    }
    if header[56..88] != key.as_bytes()[..] {
        return Err("entry belongs to another key".to_owned());
    }
    Ok(Header {
        payload_len: u64::from_le_bytes(header[16..24].try_into().expect("8 bytes")),
        tag: header[24..56].try_into().expect("32 bytes"),
    })
}

/// The entry of `payload` under `key` as one buffer: the value the remote
/// tier stores (`remote/`), in the same format as a file.
#[cfg(any(feature = "remote", test))]
pub(crate) fn encode(key: &ArtifactKey, secret: &Secret, payload: &[u8]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(HEADER_LEN + payload.len());
    bytes.extend_from_slice(&encode_header(key, secret, payload));
    bytes.extend_from_slice(payload);
    bytes
}

/// Writes an entry for `key` to `path` (inside `dir`) atomically; returns
/// the bytes written.
pub(crate) fn write(
    dir: &Path,
    path: &Path,
    key: &ArtifactKey,
    secret: &Secret,
    payload: &[u8],
) -> io::Result<u64> {
    debug_assert_eq!(path.parent(), Some(dir));
    let header = encode_header(key, secret, payload);
    file_io::write_parts(path, &[&header, payload], 0o600)?;
    Ok((HEADER_LEN + payload.len()) as u64)
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
        encode(key, &secret(), payload)
    }

    fn parsed(bytes: &[u8], key: &ArtifactKey) -> ReadOutcome {
        parse(&mut &bytes[..], bytes.len() as u64, key, &secret(), 1 << 20)
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
            Verdict::Rejected(Rejection::Unauthenticated | Rejection::Corrupt(_))
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
        let header = encode_header(&key, &secret(), b"payload");
        let decoded = decode_header(&header, &key).unwrap();
        assert_eq!(decoded.payload_len, 7);
        assert_eq!(decoded.tag, secret().tag(&key, b"payload"));

        let mut bad_magic = header;
        bad_magic[0] ^= 1;
        assert!(decode_header(&bad_magic, &key)
            .unwrap_err()
            .contains("magic"));
        let mut bad_version = header;
        bad_version[8] = 9;
        assert!(decode_header(&bad_version, &key)
            .unwrap_err()
            .contains("format 9"));
        assert!(decode_header(&header, &self::key("b"))
            .unwrap_err()
            .contains("another key"));
    }

    #[test]
    fn only_authentic_well_formed_entries_are_found() {
        let key = key("a");
        let good = entry(&key, b"0123456789");
        assert!(matches!(parsed(&good, &key), ReadOutcome::Found(p) if p == b"0123456789"));
        // Every single-byte change is refused, and none is found.
        for i in 0..good.len() {
            let mut changed = good.clone();
            changed[i] ^= 0x40;
            assert!(
                !matches!(parsed(&changed, &key), ReadOutcome::Found(_)),
                "byte {i}"
            );
        }
        // Another artifact re-keyed under this key: a valid header, no tag.
        let mut rekeyed = entry(&self::key("b"), b"0123456789");
        rekeyed[56..88].copy_from_slice(key.as_bytes());
        assert!(matches!(
            parsed(&rekeyed, &key),
            ReadOutcome::Unauthenticated
        ));
        // A header promising more than the file holds, or than the bound.
        let mut huge = good.clone();
        huge[16..24].copy_from_slice(&(40u64 << 30).to_le_bytes());
        assert!(matches!(parsed(&huge, &key), ReadOutcome::Corrupt(r) if r.contains("promises")));
        let bounded = parse(&mut &good[..], 40 << 30, &key, &secret(), 1 << 20);
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
        let read = |path: &Path| self::read(path, &key, &secret(), Owners::User, 1 << 20, true);
        assert!(matches!(read(&path), Ok(ReadOutcome::Missing)));
        assert_eq!(
            write(dir.path(), &path, &key, &secret(), b"0123456789").unwrap(),
            98
        );
        assert!(matches!(read(&path), Ok(ReadOutcome::Found(p)) if p == b"0123456789"));
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
