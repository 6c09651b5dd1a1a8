//! Signed entries, for a remote tier that a few builders publish to and many
//! readers only read: a builder signs each entry with its Ed25519
//! [`SigningKey`]; a reader accepts an entry only when it is signed by one
//! of its [`TrustedKeys`], and holds nothing that could sign one. Unlike
//! the shared [`Secret`](super::Secret), whose every holder can publish
//! what every other holder runs, a reader's public keys let it verify,
//! never forge (the model of Nix's binary caches: `secret-key-files` on
//! the builders, `trusted-public-keys` on the readers).
//!
//! What is signed: a fixed label, the entry's [`ArtifactKey`], the
//! payload's length and its SHA-256 (so that a payload of megabytes is
//! hashed in place, never copied into one message), with Ed25519 (RFC 8032,
//! ring's implementation). A signature binds the artifact to its key: an
//! entry copied under another key does not verify.
//!
//! Text forms: a public key is `ed25519:` and 64 hex digits
//! ([`PublicKey`]'s `Display` and `FromStr`); a signing key is a file of 32
//! random bytes, the Ed25519 seed, made by [`SigningKey::create_file`] (or
//! `(umask 077; head -c 32 /dev/urandom > FILE)`) and read as the shared
//! secret's file is.

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;

use ring::signature::{Ed25519KeyPair, KeyPair, UnparsedPublicKey, ED25519};
use sha2::{Digest, Sha256};

use super::super::escaped::Escaped;
use super::super::file_io;
use super::super::key::ArtifactKey;
use super::{mounted, read_key_file, StoreError};

/// Length of a signature.
pub(crate) const SIGNATURE_LEN: usize = 64;

/// Length of a public key.
pub(crate) const PUBLIC_KEY_LEN: usize = 32;

/// What every signed message starts with: a signature of this store is
/// never a valid signature of anything else made with the same key.
const LABEL: &[u8] = b"sheaf-jit signed entry v1\0";

/// What every signed document's message starts with
/// ([`SigningKey::sign_document`]): never an entry's.
const DOCUMENT_LABEL: &[u8] = b"sheaf-jit signed document v1\0";

/// The largest file of trusted keys read: a few hundred keys and comments.
const MAX_TRUSTED_KEYS_FILE: u64 = 64 << 10;

/// An Ed25519 public key that a reader may trust: `ed25519:` and 64
/// lower-case hex digits as text.
///
/// ```
/// use jit_store::PublicKey;
///
/// let text = "ed25519:0d4a05b07352a5436e180356da0ae6efa0345ff7fb1572575772e8005ed978e9";
/// let key: PublicKey = text.parse()?;
/// assert_eq!(key.to_string(), text);
/// assert!("ed25519:0d4a".parse::<PublicKey>().is_err());
/// # Ok::<(), jit_store::PublicKeyError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey([u8; PUBLIC_KEY_LEN]);

impl PublicKey {
    /// What the text form starts with.
    pub const PREFIX: &'static str = "ed25519:";

    /// The key of these 32 bytes.
    pub fn from_bytes(bytes: [u8; PUBLIC_KEY_LEN]) -> PublicKey {
        PublicKey(bytes)
    }

    /// Its 32 bytes.
    pub fn as_bytes(&self) -> &[u8; PUBLIC_KEY_LEN] {
        &self.0
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", Self::PREFIX, jit_cache::hex::encode(&self.0))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

/// Text that is not a [`PublicKey`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{} is not a public key: a key is `ed25519:` and 64 lower-case hex digits, as \
     `sheaf-jit-cache keygen` prints it",
    Escaped::new(.text)
)]
#[non_exhaustive]
pub struct PublicKeyError {
    /// The text (its first 100 characters).
    pub text: String,
}

impl FromStr for PublicKey {
    type Err = PublicKeyError;

    fn from_str(text: &str) -> Result<PublicKey, PublicKeyError> {
        text.strip_prefix(Self::PREFIX)
            .and_then(jit_cache::hex::decode)
            .and_then(|bytes| <[u8; PUBLIC_KEY_LEN]>::try_from(bytes).ok())
            .map(PublicKey)
            .ok_or_else(|| PublicKeyError {
                text: text.chars().take(100).collect(),
            })
    }
}

/// A builder's Ed25519 key, which signs the entries it publishes. `Debug`
/// shows only its public half.
#[derive(Clone)]
pub struct SigningKey {
    pair: Arc<Ed25519KeyPair>,
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({}, ..)", self.public)
    }
}

impl SigningKey {
    /// Length of a seed: 32 bytes.
    pub const SEED_LEN: usize = 32;

    /// The key of this seed (32 random bytes).
    pub fn from_seed(seed: &[u8; Self::SEED_LEN]) -> SigningKey {
        // ring refuses a seed only when its length is not 32 bytes.
        let pair = Ed25519KeyPair::from_seed_unchecked(seed).expect("any 32 bytes are a seed");
        let public = PublicKey(
            pair.public_key()
                .as_ref()
                .try_into()
                .expect("an Ed25519 public key is 32 bytes"),
        );
        SigningKey {
            pair: Arc::new(pair),
            public,
        }
    }

    /// The key in the file `path`: a seed of exactly 32 bytes, read under
    /// the rules of the shared secret's file
    /// ([`Secret::from_file`](super::Secret::from_file): links of secret
    /// mounts followed, every folder on the way and the file closed to
    /// others, the file unreadable by others unless root's).
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] naming what is wrong and what to do, and
    /// [`StoreError::Io`] for a file that cannot be opened or is shorter.
    pub fn from_file(path: &Path) -> Result<SigningKey, StoreError> {
        read_key_file(path).map(|seed| Self::from_seed(&seed))
    }

    /// Makes a new key (32 random bytes) in the file `path`, mode 0600,
    /// which must not exist yet, and returns it.
    ///
    /// # Errors
    ///
    /// [`StoreError::Io`] when the file exists (`AlreadyExists`: a key is
    /// never overwritten) or cannot be written, or no randomness is
    /// available.
    pub fn create_file(path: &Path) -> Result<SigningKey, StoreError> {
        let mut seed = [0u8; Self::SEED_LEN];
        getrandom::fill(&mut seed)
            .map_err(|e| StoreError::io(path)(std::io::Error::other(e.to_string())))?;
        match file_io::write_new(path, &seed) {
            Ok(true) => Ok(Self::from_seed(&seed)),
            Ok(false) => Err(StoreError::io(path)(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "a file is already there: a signing key is never overwritten",
            ))),
            Err(e) => Err(StoreError::io(path)(e)),
        }
    }

    /// Its public half, which readers trust.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The signature of the entry of `payload` under `key`.
    pub(crate) fn sign(&self, key: &ArtifactKey, payload: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.sign_message(&message(key, payload))
    }

    /// Its signature of `message` (an entry's or a document's).
    fn sign_message(&self, message: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.pair
            .sign(message)
            .as_ref()
            .try_into()
            .expect("an Ed25519 signature is 64 bytes")
    }
}

/// The public keys whose signatures a reader accepts: several at once
/// while a builder's key is rotated (trust the new key, move the builders
/// to it, then drop the old one).
///
/// ```
/// use jit_store::TrustedKeys;
///
/// let keys = TrustedKeys::parse(
///     "# CI, 2026\n\
///      ed25519:0d4a05b07352a5436e180356da0ae6efa0345ff7fb1572575772e8005ed978e9,\n\
///      ed25519:3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29",
/// )?;
/// assert_eq!(keys.keys().len(), 2);
/// # Ok::<(), jit_store::PublicKeyError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedKeys(Vec<PublicKey>);

impl TrustedKeys {
    /// These keys (each once).
    pub fn new(keys: impl IntoIterator<Item = PublicKey>) -> TrustedKeys {
        let mut trusted = TrustedKeys::default();
        trusted.extend(keys);
        trusted
    }

    /// The keys in `text`: public keys separated by white space or commas;
    /// `#` starts a comment that runs to the end of its line.
    ///
    /// # Errors
    ///
    /// [`PublicKeyError`] for the first word that is not a key.
    pub fn parse(text: &str) -> Result<TrustedKeys, PublicKeyError> {
        let words = text
            .lines()
            .map(|line| line.split_once('#').map_or(line, |(keys, _)| keys))
            .flat_map(|line| line.split(|c: char| c == ',' || c.is_whitespace()))
            .filter(|word| !word.is_empty());
        let keys = words.map(str::parse).collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedKeys::new(keys))
    }

    /// The keys in the file `path`, as [`parse`](Self::parse) reads them:
    /// a file of this user's or root's that group and others may not
    /// write, in folders nobody else may write (symbolic links followed,
    /// as orchestrators mount configuration), of 64 KiB at most. Anyone may
    /// read it: public keys are not secret.
    ///
    /// # Errors
    ///
    /// [`StoreError::Insecure`] naming what is wrong and what to do,
    /// [`StoreError::Invalid`] for a file that holds anything but keys, or
    /// none, and
    /// [`StoreError::Io`] for one that cannot be read.
    pub fn from_file(path: &Path) -> Result<TrustedKeys, StoreError> {
        let (file, _) = mounted::open_secret_file(path)?;
        let mut text = String::new();
        let read = file
            .take(MAX_TRUSTED_KEYS_FILE + 1)
            .read_to_string(&mut text);
        let invalid = |reason: String| StoreError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        match read {
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(invalid("it is not UTF-8 text".to_owned()))
            }
            Err(e) => return Err(StoreError::io(path)(e)),
            Ok(n) if n as u64 > MAX_TRUSTED_KEYS_FILE => {
                return Err(invalid(format!(
                    "it is larger than {MAX_TRUSTED_KEYS_FILE} bytes: not a list of keys"
                )))
            }
            Ok(_) => {}
        }
        let keys = Self::parse(&text).map_err(|e| invalid(e.to_string()))?;
        if keys.is_empty() {
            return Err(invalid(format!(
                "it holds no public key (`{}` and 64 hex digits)",
                PublicKey::PREFIX
            )));
        }
        Ok(keys)
    }

    /// Adds `keys` (each once).
    pub fn extend(&mut self, keys: impl IntoIterator<Item = PublicKey>) {
        for key in keys {
            if !self.0.contains(&key) {
                self.0.push(key);
            }
        }
    }

    /// The keys, in the order first given.
    pub fn keys(&self) -> &[PublicKey] {
        &self.0
    }

    /// Whether there are none (a reader with none accepts nothing).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// What `signature` by `signer` says of the entry of `payload` under
    /// `key`.
    pub(crate) fn check(
        &self,
        signer: &PublicKey,
        key: &ArtifactKey,
        payload: &[u8],
        signature: &[u8; SIGNATURE_LEN],
    ) -> SignatureCheck {
        self.check_message(signer, &message(key, payload), signature)
    }

    /// What `signature` by `signer` says of `message` (an entry's or a
    /// document's).
    fn check_message(
        &self,
        signer: &PublicKey,
        message: &[u8],
        signature: &[u8; SIGNATURE_LEN],
    ) -> SignatureCheck {
        if !self.0.contains(signer) {
            return SignatureCheck::UnknownSigner;
        }
        let public = UnparsedPublicKey::new(&ED25519, signer.as_bytes());
        match public.verify(message, signature) {
            Ok(()) => SignatureCheck::Valid,
            Err(_) => SignatureCheck::Invalid,
        }
    }
}

impl SigningKey {
    /// Its signature of `document`, a whole file kept beside what it
    /// describes (a bundle's manifest), made for `purpose` (a fixed name of
    /// the kind of document: a signature made for one purpose is refused
    /// for any other, and never passes for an entry's).
    pub fn sign_document(&self, purpose: &str, document: &[u8]) -> DocumentSignature {
        DocumentSignature {
            signer: self.public,
            signature: self.sign_message(&document_message(purpose, document)),
        }
    }
}

impl TrustedKeys {
    /// Who signed `document` for `purpose` with `signature`
    /// ([`SigningKey::sign_document`]), when that is one of these keys and
    /// the signature verifies.
    ///
    /// # Errors
    ///
    /// [`DocumentSignatureError::UnknownSigner`] for a signature by a key
    /// not among these, [`DocumentSignatureError::Invalid`] for one that
    /// does not verify (the document changed since it was signed, or was
    /// signed for another purpose).
    pub fn check_document(
        &self,
        purpose: &str,
        document: &[u8],
        signature: &DocumentSignature,
    ) -> Result<PublicKey, DocumentSignatureError> {
        let signer = signature.signer;
        let message = document_message(purpose, document);
        match self.check_message(&signer, &message, &signature.signature) {
            SignatureCheck::Valid => Ok(signer),
            SignatureCheck::UnknownSigner => Err(DocumentSignatureError::UnknownSigner(signer)),
            SignatureCheck::Invalid => Err(DocumentSignatureError::Invalid(signer)),
        }
    }
}

/// A builder's signature of a whole document ([`SigningKey::sign_document`]),
/// kept beside it: the signer's public key and an Ed25519 signature of a
/// fixed label, the purpose, and the document's length and SHA-256. As
/// text, one line: the public key (`ed25519:` and 64 hex digits), a
/// space, and the signature's 128 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DocumentSignature {
    signer: PublicKey,
    signature: [u8; SIGNATURE_LEN],
}

impl DocumentSignature {
    /// The key that says it signed (checked only by
    /// [`TrustedKeys::check_document`]).
    pub fn signer(&self) -> PublicKey {
        self.signer
    }
}

impl fmt::Display for DocumentSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}",
            self.signer,
            jit_cache::hex::encode(&self.signature)
        )
    }
}

impl fmt::Debug for DocumentSignature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DocumentSignature({}, ..)", self.signer)
    }
}

impl FromStr for DocumentSignature {
    type Err = DocumentSignatureError;

    /// One line as `Display` writes it (surrounding white space ignored).
    fn from_str(text: &str) -> Result<DocumentSignature, DocumentSignatureError> {
        let malformed = || DocumentSignatureError::Malformed {
            text: text.chars().take(100).collect(),
        };
        let (signer, signature) = text.trim().split_once(' ').ok_or_else(malformed)?;
        let signer = signer.parse().map_err(|_| malformed())?;
        let signature = jit_cache::hex::decode(signature)
            .and_then(|bytes| <[u8; SIGNATURE_LEN]>::try_from(bytes).ok())
            .ok_or_else(malformed)?;
        Ok(DocumentSignature { signer, signature })
    }
}

/// Why a [`DocumentSignature`] is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentSignatureError {
    /// The text is not a signature.
    #[error(
        "{} is not a document signature: one line holding the signer's public key \
         (`ed25519:` and 64 hex digits), a space and 128 hex digits",
        Escaped::new(.text)
    )]
    Malformed {
        /// The text (its first 100 characters).
        text: String,
    },
    /// Signed by this key, which is not trusted.
    #[error(
        "it is signed by {0}, which is not among the trusted keys (a new builder's key to add, \
         or a stranger's)"
    )]
    UnknownSigner(PublicKey),
    /// Signed by this trusted key, but the signature does not verify: the
    /// document changed since it was signed (or was signed for another
    /// purpose).
    #[error(
        "its signature by {0} does not verify: it was changed since it was signed, or damaged"
    )]
    Invalid(PublicKey),
}

/// The signed message of `document` made for `purpose`.
fn document_message(purpose: &str, document: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(DOCUMENT_LABEL.len() + 8 + purpose.len() + 8 + 32);
    message.extend_from_slice(DOCUMENT_LABEL);
    message.extend_from_slice(&(purpose.len() as u64).to_le_bytes());
    message.extend_from_slice(purpose.as_bytes());
    message.extend_from_slice(&(document.len() as u64).to_le_bytes());
    message.extend_from_slice(&Sha256::digest(document));
    message
}

/// What a signature says of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SignatureCheck {
    /// Made by a trusted key over this message (key and payload).
    Valid,
    /// Made by a key this reader does not trust (whether or not it
    /// verifies).
    UnknownSigner,
    /// By a trusted key, but not over this message: tampered with,
    /// copied from another key, or damaged.
    Invalid,
}

/// The signed message of the entry of `payload` under `key`.
fn message(key: &ArtifactKey, payload: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(LABEL.len() + 32 + 8 + 32);
    message.extend_from_slice(LABEL);
    message.extend_from_slice(key.as_bytes());
    message.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    message.extend_from_slice(&Sha256::digest(payload));
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::tests::key;

    #[test]
    fn public_keys_round_trip_as_text_and_refuse_anything_else() {
        let key = PublicKey([0xab; 32]);
        assert_eq!(key.to_string().parse::<PublicKey>(), Ok(key));
        for bad in [
            "",
            "ed25519:",
            "ed25519:ab",
            &format!("ed25519:{}", "AB".repeat(32)),
            &format!("ed448:{}", "ab".repeat(32)),
            &format!("ed25519:{}", "ab".repeat(33)),
        ] {
            let error = bad.parse::<PublicKey>().unwrap_err().to_string();
            assert!(error.contains("64 lower-case hex digits"), "{error}");
        }
    }

    #[test]
    fn lists_of_keys_take_commas_spaces_comments_and_each_key_once() {
        let (a, b) = (PublicKey([1; 32]), PublicKey([2; 32]));
        let text = format!("# builders\n{a}, {b}\n\n{a} # again\n");
        let keys = TrustedKeys::parse(&text).unwrap();
        assert_eq!(keys.keys(), &[a, b]);
        assert!(TrustedKeys::parse("# none\n").unwrap().is_empty());
        let error = TrustedKeys::parse(&format!("{a} ed25519:12")).unwrap_err();
        assert_eq!(error.text, "ed25519:12");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // ring's Ed25519 is C and assembly
    fn signatures_bind_the_key_and_the_payload_and_need_a_trusted_signer() {
        let builder = SigningKey::from_seed(&[5; 32]);
        let stranger = SigningKey::from_seed(&[6; 32]);
        let trusted = TrustedKeys::new([builder.public_key()]);
        let (a, b) = (key("a"), key("b"));
        let signature = builder.sign(&a, b"payload");
        let check = |signer: &SigningKey, key: &ArtifactKey, payload: &[u8], signature| {
            trusted.check(&signer.public_key(), key, payload, signature)
        };
        assert_eq!(
            check(&builder, &a, b"payload", &signature),
            SignatureCheck::Valid
        );
        assert_eq!(
            check(&builder, &b, b"payload", &signature),
            SignatureCheck::Invalid,
            "re-keyed"
        );
        assert_eq!(
            check(&builder, &a, b"payloae", &signature),
            SignatureCheck::Invalid,
            "changed"
        );
        let theirs = stranger.sign(&a, b"payload");
        assert_eq!(
            check(&stranger, &a, b"payload", &theirs),
            SignatureCheck::UnknownSigner
        );
        assert_eq!(
            SigningKey::from_seed(&[5; 32]).public_key(),
            builder.public_key(),
            "a seed is its key"
        );
        let shown = format!("{builder:?}");
        assert!(shown.starts_with("SigningKey(ed25519:"), "{shown}");
    }

    #[test]
    #[cfg_attr(miri, ignore)] // ring's Ed25519 is C and assembly
    fn document_signatures_bind_the_purpose_and_the_document_and_round_trip_as_text() {
        let builder = SigningKey::from_seed(&[5; 32]);
        let stranger = SigningKey::from_seed(&[6; 32]);
        let trusted = TrustedKeys::new([builder.public_key()]);
        let signature = builder.sign_document("manifest", b"line 1\n");
        let text = signature.to_string();
        assert_eq!(text.parse::<DocumentSignature>(), Ok(signature));
        assert_eq!(
            format!("{text}\n").parse::<DocumentSignature>(),
            Ok(signature)
        );
        assert_eq!(
            trusted.check_document("manifest", b"line 1\n", &signature),
            Ok(builder.public_key())
        );
        let invalid = Err(DocumentSignatureError::Invalid(builder.public_key()));
        assert_eq!(
            trusted.check_document("manifest", b"line 2\n", &signature),
            invalid
        );
        assert_eq!(
            trusted.check_document("other", b"line 1\n", &signature),
            invalid
        );
        let theirs = stranger.sign_document("manifest", b"line 1\n");
        assert_eq!(
            trusted.check_document("manifest", b"line 1\n", &theirs),
            Err(DocumentSignatureError::UnknownSigner(stranger.public_key()))
        );
        // A document signature is never an entry's, whatever the bytes.
        let entry_key = key("a");
        let as_entry = trusted.check(
            &builder.public_key(),
            &entry_key,
            b"line 1\n",
            &signature.signature,
        );
        assert_eq!(as_entry, SignatureCheck::Invalid);
        for bad in [
            "",
            "ed25519:ab",
            &text[..text.len() - 2],
            &text.replace(' ', "\t"),
        ] {
            assert!(
                matches!(
                    bad.parse::<DocumentSignature>(),
                    Err(DocumentSignatureError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
    }
}
