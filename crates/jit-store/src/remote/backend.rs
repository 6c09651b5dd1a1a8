//! [`RemoteStore`]: what the tier needs of a backend, and what a backend
//! answers ([`RemoteValue`], [`LeaseAnswer`], [`RemoteError`]).

use std::fmt;
use std::io;
use std::time::Duration;

/// A remote key-value store of artifact entries: what [`RemoteTier`](super::RemoteTier) needs
/// of a backend. Implementations bound every request with timeouts (the
/// whole request, not each read) and never hold more of a reply than the
/// bound asked for; the tier handles failures, authentication and sizes.
pub trait RemoteStore: Send + Sync + fmt::Debug {
    /// The value stored under `key`, unless it is longer than `max_bytes`
    /// (then it is not downloaded).
    ///
    /// # Errors
    ///
    /// A [`RemoteError`] when the store cannot be reached in time, answers
    /// with an error, or breaks its protocol.
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError>;

    /// Stores `value` under `key`, replacing any value there. Concurrent
    /// puts of one key may race: the store must keep one of the values
    /// whole.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError>;

    /// Takes the compile lease `lease` for `owner` (a name unique to this
    /// lease: host, process, random) for `ttl`, unless another owner holds
    /// it: the store keeps it at most `ttl` unless
    /// [renewed](Self::renew_lease), so that a dead owner's lease ends by
    /// itself. The default answers [`LeaseAnswer::Unsupported`]: a backend
    /// without leases compiles every miss, as before leases existed.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        let _ = (lease, owner, ttl);
        Ok(LeaseAnswer::Unsupported)
    }

    /// Extends `lease` to `ttl` from now if `owner` still holds it; false
    /// when it does not (it expired, and perhaps another took it). The
    /// default (no leases) answers false.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        let _ = (lease, owner, ttl);
        Ok(false)
    }

    /// Ends `lease` if `owner` still holds it (another owner's is left
    /// alone). The default (no leases) does nothing.
    ///
    /// # Errors
    ///
    /// As [`get`](Self::get).
    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        let _ = (lease, owner);
        Ok(())
    }
}

/// What [`RemoteStore::take_lease`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseAnswer {
    /// The lease is the caller's now: it compiles, and publishes.
    Taken,
    /// Another owner holds it: the caller waits for its artifact.
    Held {
        /// The holder's name, as it took the lease (empty when the store
        /// cannot say, e.g. it ended meanwhile): a waiter that sees it
        /// change knows that another compile started.
        owner: String,
    },
    /// The backend has no leases: the caller compiles.
    Unsupported,
}

/// What [`RemoteStore::get`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteValue {
    /// Nothing under the key.
    Missing,
    /// The value.
    Found(Vec<u8>),
    /// A value of this many bytes, over the bound: not downloaded.
    TooLarge(u64),
}

/// Why a remote store could not be set up or answer. At run time these
/// become misses (and count towards the circuit breaker), never errors of a
/// call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The store's address cannot be used.
    #[error("remote artifact store `{url}`: {reason}")]
    Address {
        /// The address, without its password.
        url: String,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// TLS cannot be set up for the store (a `rediss://` address): its CA
    /// file cannot be read or holds no certificate, or the system has no
    /// root certificates.
    #[error("remote artifact store `{url}`: {reason}")]
    Tls {
        /// The address, without its password.
        url: String,
        /// What is wrong, and what to do about it.
        reason: String,
    },
    /// The store cannot be reached, or did not answer in time.
    #[error("cannot reach the remote artifact store `{url}` ({step})")]
    Unavailable {
        /// The address, without its password.
        url: String,
        /// What failed: `resolve` (the host name), `connect` (for Redis,
        /// `AUTH` and `SELECT` too), `TLS handshake` (the server's
        /// certificate did not verify, saying why), or the request (for Redis, its
        /// command: `STRLEN`, `GETRANGE`, `SET`, ...).
        step: &'static str,
        /// Why: the operating system's error, a timeout
        /// ([`io::ErrorKind::TimedOut`], saying which), or the connection
        /// closed mid-reply ([`io::ErrorKind::UnexpectedEof`]).
        #[source]
        source: io::Error,
    },
    /// The store answered with an error.
    #[error("the remote artifact store `{url}` answered {step} with the error `{message}`")]
    Server {
        /// The address, without its password.
        url: String,
        /// The request (for Redis, its command).
        step: &'static str,
        /// The store's error, with control characters escaped.
        message: String,
    },
    /// The store answered with something its protocol does not allow there
    /// (a reply of another type, a value longer than asked for, a line
    /// without end): not read further, the connection closed.
    #[error(
        "the remote artifact store `{url}` broke the protocol in its reply to {step}: \
         {violation}; is the address that of a Redis server?"
    )]
    Protocol {
        /// The address, without its password.
        url: String,
        /// The request (for Redis, its command).
        step: &'static str,
        /// What was wrong with the reply.
        violation: String,
    },
}
