//! [`RemoteOptions`]: the settings of a [`RemoteTier`](super::RemoteTier),
//! whether it may write ([`RemoteMode`]), and the deployment's
//! [`Namespace`] in its keys.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Settings of a [`RemoteTier`](super::RemoteTier).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// The largest artifact published or fetched, in bytes (the entry's
    /// header comes on top: 88 bytes, 152 for a signed entry).
    pub max_entry_bytes: u64,
    /// Consecutive failures of one kind of request (fetches, or
    /// publishes) that open the circuit breaker: a publish that succeeds
    /// does not reset the count of fetches that fail, nor the other way
    /// round.
    pub failure_threshold: u32,
    /// How long the breaker stays open before it probes the store again.
    pub cool_down: Duration,
    /// Publishes waiting for the background thread, at most; more are
    /// dropped.
    pub queue: usize,
    /// The start of every key, which names the entry format's version;
    /// the [`namespace`](Self::namespace) and the secret's identity follow
    /// (see [`RemoteTier::key_prefix`](super::RemoteTier::key_prefix)).
    pub key_prefix: String,
    /// The deployment's namespace in the keys: deployments that share one
    /// Redis database but not their artifacts (staging and production, two
    /// teams) choose different ones. `default` unless set.
    pub namespace: Namespace,
    /// How long a compile lease lives unless renewed (its owner renews it
    /// every third of this while it compiles): a dead owner's lease ends
    /// this long after its last renewal at most, and a waiter waits at
    /// least this long (plus one poll; counted up to
    /// [`MAX_TTL_WAIT`](Self::MAX_TTL_WAIT)), so that one waiter takes a
    /// dead owner's lease over before the others give up. Keep it at or
    /// under a compile. `None` (or zero): no leases, every process that misses
    /// compiles (as with a backend without leases).
    pub lease_ttl: Option<Duration>,
    /// The compile time a waiter assumes for another process's compile
    /// before this process measured one of its own: a waiter waits at most
    /// the longest build this process measured, at least this (and the
    /// lease's time to live), in all (never started again when the lease
    /// changes owner) and never over
    /// [`MAX_LEASE_WAIT`](Self::MAX_LEASE_WAIT), then compiles itself.
    pub compile_estimate: Duration,
    /// Whether this process publishes and takes compile leases
    /// ([`RemoteMode::ReadWrite`], the default) or only fetches
    /// ([`RemoteMode::ReadOnly`]). A tier that trusts signatures and has no
    /// key to sign with is read-only whatever this says.
    pub mode: RemoteMode,
}

/// Whether a [`RemoteTier`](super::RemoteTier) writes to its store.
///
/// ```
/// use jit_store::RemoteMode;
///
/// assert_eq!("read-only".parse(), Ok(RemoteMode::ReadOnly));
/// assert_eq!(RemoteMode::default().to_string(), "read-write");
/// assert!("ro".parse::<RemoteMode>().is_err());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemoteMode {
    /// Fetches, publishes what this process compiles, and takes compile
    /// leases so that the cluster compiles each artifact once.
    #[default]
    ReadWrite,
    /// Fetches and verifies only: never publishes, never takes or waits
    /// for a lease (a miss compiles here, and the artifact stays in this
    /// process's own disk cache). For readers that a store's ACL lets only
    /// read, and for every process that should not write to it.
    ReadOnly,
}

impl RemoteMode {
    /// The text of each mode, as [`FromStr`] reads it.
    pub const NAMES: [&'static str; 2] = ["read-write", "read-only"];
}

impl fmt::Display for RemoteMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RemoteMode::ReadWrite => Self::NAMES[0],
            RemoteMode::ReadOnly => Self::NAMES[1],
        })
    }
}

/// Text that is not a [`RemoteMode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a remote cache mode: expected `read-write` or `read-only`")]
pub struct RemoteModeError(String);

impl FromStr for RemoteMode {
    type Err = RemoteModeError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "read-write" => Ok(RemoteMode::ReadWrite),
            "read-only" => Ok(RemoteMode::ReadOnly),
            _ => Err(RemoteModeError(text.chars().take(100).collect())),
        }
    }
}

impl RemoteOptions {
    /// The default bound on an artifact: 64 MiB (the artifacts of a JIT
    /// are kilobytes to a few megabytes).
    pub const DEFAULT_MAX_ENTRY_BYTES: u64 = 64 << 20;
    /// The default failures before the breaker opens: 3.
    pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;
    /// The default cool-down of the breaker: 30 s.
    pub const DEFAULT_COOL_DOWN: Duration = Duration::from_secs(30);
    /// The default queue of publishes: 32.
    pub const DEFAULT_QUEUE: usize = 32;
    /// The default key prefix, which names the entry format's version.
    pub const DEFAULT_KEY_PREFIX: &'static str = "sheaf-jit:v1:";
    /// The default time to live of a compile lease: 2 s (renewed every
    /// 0.67 s while compiling; a loopback or LAN request takes well under a
    /// millisecond).
    pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(2);
    /// The default compile estimate of a waiter: the prior of the
    /// in-process cache's wait rule ([`jit_cache::PRIOR_COMPILE_TIME`],
    /// 1 s), so that the process and the cluster assume one compile time
    /// before either measured one.
    pub const DEFAULT_COMPILE_ESTIMATE: Duration = jit_cache::PRIOR_COMPILE_TIME;
    /// The most a lease's time to live adds to a waiter's bound: 30 s. A
    /// dead owner's lease that lives longer is not waited out (the waiter
    /// compiles without it).
    pub const MAX_TTL_WAIT: Duration = Duration::from_secs(30);
    /// The longest a miss ever waits for another process's compile,
    /// whatever the settings, the builds measured and the store's answers:
    /// 10 minutes (plus one request's timeout); then it compiles itself.
    pub const MAX_LEASE_WAIT: Duration = Duration::from_secs(600);
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            max_entry_bytes: Self::DEFAULT_MAX_ENTRY_BYTES,
            failure_threshold: Self::DEFAULT_FAILURE_THRESHOLD,
            cool_down: Self::DEFAULT_COOL_DOWN,
            queue: Self::DEFAULT_QUEUE,
            key_prefix: Self::DEFAULT_KEY_PREFIX.to_owned(),
            namespace: Namespace::default(),
            lease_ttl: Some(Self::DEFAULT_LEASE_TTL),
            compile_estimate: Self::DEFAULT_COMPILE_ESTIMATE,
            mode: RemoteMode::default(),
        }
    }
}

/// A deployment's namespace in the remote keys: 1 to
/// [`MAX_LEN`](Self::MAX_LEN) ASCII letters, digits, `.`, `_` and `-`
/// (no `:`, which separates the key's parts, and nothing a `SCAN` pattern
/// would read as a wildcard).
///
/// ```
/// use jit_store::Namespace;
///
/// let namespace: Namespace = "prod-eu.1".parse()?;
/// assert_eq!(namespace.as_str(), "prod-eu.1");
/// assert!("prod:eu".parse::<Namespace>().is_err());
/// # Ok::<(), jit_store::NamespaceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Namespace(String);

/// Why a text is not a [`Namespace`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{namespace}` is not a remote cache namespace: {reason}")]
#[non_exhaustive]
pub struct NamespaceError {
    /// The text refused (at most its first 100 characters).
    pub namespace: String,
    /// What is wrong, and what a namespace may be.
    pub reason: String,
}

impl Namespace {
    /// The longest namespace, in bytes.
    pub const MAX_LEN: usize = 64;
    /// The namespace of a tier that sets none.
    pub const DEFAULT: &'static str = "default";

    /// `namespace`, when it is one (see the type's docs).
    ///
    /// # Errors
    ///
    /// [`NamespaceError`] saying what is wrong: empty, too long, or a
    /// character outside `A-Z a-z 0-9 . _ -` (named).
    pub fn new(namespace: &str) -> Result<Namespace, NamespaceError> {
        let refused = |reason: String| NamespaceError {
            namespace: namespace.chars().take(100).collect(),
            reason,
        };
        const ALLOWED: &str = "1 to 64 ASCII letters, digits, `.`, `_` and `-`";
        if namespace.is_empty() {
            return Err(refused(format!("it is empty; expected {ALLOWED}")));
        }
        if let Some(bad) = namespace
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(refused(format!(
                "{bad:?} is not allowed; expected {ALLOWED}"
            )));
        }
        if namespace.len() > Self::MAX_LEN {
            return Err(refused(format!(
                "it is {} characters long; expected {ALLOWED}",
                namespace.len()
            )));
        }
        Ok(Namespace(namespace.to_owned()))
    }

    /// The namespace.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Namespace {
    /// [`Namespace::DEFAULT`].
    fn default() -> Self {
        Namespace(Self::DEFAULT.to_owned())
    }
}

impl FromStr for Namespace {
    type Err = NamespaceError;

    fn from_str(namespace: &str) -> Result<Self, Self::Err> {
        Namespace::new(namespace)
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_short_and_of_safe_characters() {
        for good in [
            "default",
            "prod",
            "staging-eu.2",
            "team_a",
            "A9",
            &"x".repeat(64),
        ] {
            assert_eq!(Namespace::new(good).unwrap().as_str(), good);
        }
        for (bad, reason) in [
            ("", "it is empty"),
            ("prod:eu", "':' is not allowed"),
            ("prod*", "'*' is not allowed"),
            ("with space", "' ' is not allowed"),
            ("café", "'é' is not allowed"),
            (&"x".repeat(65), "65 characters long"),
        ] {
            let error = bad.parse::<Namespace>().unwrap_err().to_string();
            assert!(error.contains(reason), "{bad}: {error}");
            assert!(error.contains("ASCII letters, digits"), "{bad}: {error}");
        }
        assert_eq!(Namespace::default().as_str(), "default");
    }
}
