//! One disk-cache entry: a file holding a checked header and the `.vmfb`,
//! written atomically.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | magic `SJITVMFB` |
//! | 4 | format version (1) |
//! | 4 | reserved, 0 |
//! | 8 | payload length |
//! | 32 | SHA-256 of the payload |
//! | 32 | the entry's [`ArtifactKey`] |
//! | n | payload: the `.vmfb` |
//!
//! Writers fill a uniquely named temporary file in the cache folder and
//! `rename` it over the entry's name, which replaces it atomically: readers
//! and concurrent writers of the same key see either the old or the new
//! file, each complete. Nothing is `fsync`ed: after a power loss an entry may
//! be truncated or zeroed, which its checksum detects.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::Path;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::key::ArtifactKey;

const MAGIC: [u8; 8] = *b"SJITVMFB";
const FORMAT_VERSION: u32 = 1;

/// Size of the header before the payload.
pub(crate) const HEADER_LEN: usize = 8 + 4 + 4 + 8 + 32 + 32;

/// Prefix of temporary files; they never end in [`ENTRY_EXTENSION`].
pub(crate) const TEMP_PREFIX: &str = ".tmp-";

/// Extension of entry files.
pub(crate) const ENTRY_EXTENSION: &str = "sjit";

/// What reading an entry found.
#[derive(Debug)]
pub(crate) enum ReadOutcome {
    /// A complete entry for the key; its payload.
    Found(Vec<u8>),
    /// No entry (or one that cannot be opened).
    Missing,
    /// An entry that is damaged or belongs to another key: why.
    Corrupt(String),
}

/// Reads the entry at `path`, checks it completely, and, when `touch` is set,
/// marks it as used (sets its modification time, the LRU order) when it is
/// good.
pub(crate) fn read(path: &Path, key: &ArtifactKey, touch: bool) -> ReadOutcome {
    let Ok(mut file) = File::open(path) else {
        return ReadOutcome::Missing;
    };
    let payload = match read_checked(&mut file, key) {
        Ok(payload) => payload,
        Err(reason) => return ReadOutcome::Corrupt(reason),
    };
    if touch {
        // Best effort: an entry we cannot touch just ages sooner.
        let _ = file.set_modified(SystemTime::now());
    }
    ReadOutcome::Found(payload)
}

fn read_checked(file: &mut File, key: &ArtifactKey) -> Result<Vec<u8>, String> {
    let file_len = file
        .metadata()
        .map_err(|e| format!("cannot stat: {e}"))?
        .len();
    let mut header = [0u8; HEADER_LEN];
    file.read_exact(&mut header)
        .map_err(|e| format!("truncated header ({e})"))?;
    let header = decode_header(&header, key)?;
    let expected_len = (HEADER_LEN as u64)
        .checked_add(header.payload_len)
        .ok_or_else(|| {
            format!(
                "the header promises an impossible {} bytes",
                header.payload_len
            )
        })?;
    if file_len != expected_len {
        return Err(format!(
            "file has {file_len} bytes, the header promises {expected_len}"
        ));
    }
    let len = usize::try_from(header.payload_len).map_err(|_| "payload too large".to_owned())?;
    let mut payload = vec![0u8; len];
    file.read_exact(&mut payload)
        .map_err(|e| format!("truncated payload ({e})"))?;
    if Sha256::digest(&payload)[..] != header.digest {
        return Err("payload checksum mismatch".to_owned());
    }
    Ok(payload)
}

/// The checked fields of a header.
#[derive(Debug, PartialEq, Eq)]
struct Header {
    payload_len: u64,
    digest: [u8; 32],
}

fn encode_header(key: &ArtifactKey, payload: &[u8]) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&MAGIC);
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    // 12..16 reserved, zero.
    header[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
    header[24..56].copy_from_slice(&Sha256::digest(payload));
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
    if header[56..88] != key.as_bytes()[..] {
        return Err("entry belongs to another key".to_owned());
    }
    Ok(Header {
        payload_len: u64::from_le_bytes(header[16..24].try_into().expect("8 bytes")),
        digest: header[24..56].try_into().expect("32 bytes"),
    })
}

/// Writes an entry for `key` to `path` (inside `dir`) atomically; returns
/// the bytes written.
pub(crate) fn write(dir: &Path, path: &Path, key: &ArtifactKey, payload: &[u8]) -> io::Result<u64> {
    let mut temporary = tempfile::Builder::new()
        .prefix(TEMP_PREFIX)
        .tempfile_in(dir)?;
    temporary.write_all(&encode_header(key, payload))?;
    temporary.write_all(payload)?;
    // `persist` renames over any existing entry; on failure the temporary
    // file is deleted when the error is dropped.
    temporary.persist(path).map_err(|e| e.error)?;
    Ok((HEADER_LEN + payload.len()) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::KeyParts;

    fn key(program: &str) -> ArtifactKey {
        ArtifactKey::new(&KeyParts {
            program,
            compiler: "test",
            runtime: "test",
            target: "generic",
        })
    }

    #[test]
    fn headers_round_trip_and_reject_damage() {
        let key = key("a");
        let header = encode_header(&key, b"payload");
        let decoded = decode_header(&header, &key).unwrap();
        assert_eq!(decoded.payload_len, 7);
        assert_eq!(decoded.digest[..], Sha256::digest(b"payload")[..]);

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
    #[cfg_attr(miri, ignore)] // touches the file system
    fn damaged_files_are_reported_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let key = key("a");
        let path = dir.path().join("entry");
        assert!(matches!(read(&path, &key, true), ReadOutcome::Missing));

        assert_eq!(write(dir.path(), &path, &key, b"0123456789").unwrap(), 98);
        assert!(matches!(read(&path, &key, true), ReadOutcome::Found(p) if p == b"0123456789"));

        let good = std::fs::read(&path).unwrap();
        let mut flipped = good.clone();
        *flipped.last_mut().unwrap() ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        assert!(
            matches!(read(&path, &key, true), ReadOutcome::Corrupt(r) if r.contains("checksum"))
        );

        std::fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(
            matches!(read(&path, &key, true), ReadOutcome::Corrupt(r) if r.contains("promises"))
        );

        std::fs::write(&path, &good[..10]).unwrap();
        assert!(
            matches!(read(&path, &key, true), ReadOutcome::Corrupt(r) if r.contains("truncated"))
        );
        // No temporary file is left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
