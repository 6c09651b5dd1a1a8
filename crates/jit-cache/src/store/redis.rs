//! [`RedisStore`]: the remote tier's backend on a Redis server (or anything
//! that speaks its protocol: Valkey, KeyDB, Dragonfly).
//!
//! Each request takes an idle connection, or opens one within the connect
//! timeout (a TCP connect, plus `AUTH` and `SELECT` when the address names
//! a password or a database: the client's `CLIENT SETINFO` handshake is
//! turned off); every read and write on it is bounded by the request
//! timeout.
//! A connection that failed is dropped with the idle ones (the next request
//! opens a new one), one that answered goes back to the idle list. `get` asks for the value's
//! length first (`STRLEN`) and downloads it (`GETRANGE`, bounded) only when
//! it is within the bound; `put` is a plain `SET`: concurrent publishers of
//! one key write complete, self-authenticating values, and Redis keeps one
//! of them whole.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use ::redis::{Client, Connection, RedisError};

use super::remote::{RemoteError, RemoteStore, RemoteValue};

/// Idle connections kept for later requests, at most (the compile threads
/// and the publisher).
const MAX_IDLE: usize = 4;

/// How long a [`RedisStore`] waits for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteTimeouts {
    /// To open a connection: the TCP connect, and each reply of `AUTH` and
    /// `SELECT` when the address names a password or a database.
    pub connect: Duration,
    /// For each read or write of a request.
    pub request: Duration,
}

impl Default for RemoteTimeouts {
    /// 200 ms to connect, 500 ms per read or write: a fetch only happens
    /// instead of a compile (hundreds of milliseconds), and a loopback or
    /// LAN server answers in well under a millisecond.
    fn default() -> Self {
        RemoteTimeouts {
            connect: Duration::from_millis(200),
            request: Duration::from_millis(500),
        }
    }
}

/// A [`RemoteStore`] on a Redis server (see the module docs).
pub struct RedisStore {
    client: Client,
    /// The address without its password, for messages.
    shown: String,
    timeouts: RemoteTimeouts,
    idle: Mutex<Vec<Connection>>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.shown)
            .field("timeouts", &self.timeouts)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The store at `url` (`redis://[:password@]host[:port][/db]`, or
    /// `redis+unix:///path`). Does not connect: the first request does, so
    /// a server that is down at start costs nothing until then. TLS
    /// (`rediss://`) is not supported.
    pub fn new(url: &str, timeouts: RemoteTimeouts) -> Result<RedisStore, RemoteError> {
        let shown = Self::redacted(url);
        let refused = |reason: String| RemoteError::Address {
            url: shown.clone(),
            reason,
        };
        if url.starts_with("rediss://") {
            return Err(refused(
                "TLS (`rediss://`) is not supported by this build; use `redis://` on a network \
                 you trust, or a TLS tunnel to the server (stunnel, ssh -L)"
                    .to_owned(),
            ));
        }
        let client = Client::open(url).map_err(|error| {
            refused(format!(
                "{error}; expected `redis://[:password@]host[:port][/db]` or \
                 `redis+unix:///path/to/socket`"
            ))
        })?;
        Ok(RedisStore {
            client,
            shown,
            timeouts,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// `url` with its password, if any, replaced by `***`: for messages and
    /// logs.
    pub fn redacted(url: &str) -> String {
        without_password(url)
    }

    /// The timeouts.
    pub fn timeouts(&self) -> RemoteTimeouts {
        self.timeouts
    }

    /// Runs `request` on a connection; keeps the connection if it answered.
    fn with_connection<T>(
        &self,
        request: impl FnOnce(&mut Connection) -> Result<T, RedisError>,
    ) -> Result<T, RemoteError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.connect()?,
        };
        let answer = request(&mut connection).map_err(|error| {
            // The idle ones most likely lead to the same failed server: a
            // restarted one would otherwise fail once per stale connection.
            self.idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            self.error(&error)
        })?;
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(connection);
        }
        Ok(answer)
    }

    fn connect(&self) -> Result<Connection, RemoteError> {
        let connection = self
            .client
            .get_connection_with_timeout(self.timeouts.connect)
            .map_err(|error| self.error(&error))?;
        let timeout = Some(self.timeouts.request);
        connection
            .set_read_timeout(timeout)
            .and_then(|()| connection.set_write_timeout(timeout))
            .map_err(|error| self.error(&error))?;
        Ok(connection)
    }

    fn error(&self, error: &RedisError) -> RemoteError {
        if error.is_timeout() {
            return RemoteError::Unavailable(format!(
                "{}: no answer within {:?} (connect) / {:?} (request)",
                self.shown, self.timeouts.connect, self.timeouts.request
            ));
        }
        let message = format!("{}: {error}", self.shown);
        if error.is_io_error() || error.is_connection_dropped() {
            RemoteError::Unavailable(message)
        } else {
            RemoteError::Server(message)
        }
    }
}

impl RemoteStore for RedisStore {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        self.with_connection(|connection| {
            let len: u64 = ::redis::cmd("STRLEN").arg(key).query(connection)?;
            if len == 0 {
                // Redis's answer for a missing key; no entry is empty.
                return Ok(RemoteValue::Missing);
            }
            if len > max_bytes {
                return Ok(RemoteValue::TooLarge(len));
            }
            // Bounded even if the value grew since `STRLEN`.
            let bytes: Vec<u8> = ::redis::cmd("GETRANGE")
                .arg(key)
                .arg(0)
                .arg(max_bytes - 1)
                .query(connection)?;
            Ok(if bytes.is_empty() {
                RemoteValue::Missing
            } else {
                RemoteValue::Found(bytes)
            })
        })
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        self.with_connection(|connection| ::redis::cmd("SET").arg(key).arg(value).query(connection))
    }
}

/// `url` with any password replaced by `***`.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The authority ends at the first `/`; its user info at the last `@`.
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            without_password("redis://:hunter2@cache:6379/0"),
            "redis://:***@cache:6379/0"
        );
        assert_eq!(
            without_password("redis://me:p@ss@cache/1"),
            "redis://me:***@cache/1"
        );
        assert_eq!(without_password("redis://cache:6379"), "redis://cache:6379");
        assert_eq!(without_password("nonsense"), "nonsense");
    }

    #[test]
    fn bad_and_tls_addresses_are_refused_without_connecting() {
        let refused = |url: &str| match RedisStore::new(url, RemoteTimeouts::default()) {
            Err(error @ RemoteError::Address { .. }) => error.to_string(),
            other => panic!("{url}: expected an address error, got {other:?}"),
        };
        let tls = refused("rediss://:secret@cache:6380");
        assert!(
            tls.contains("not supported") && !tls.contains("secret"),
            "{tls}"
        );
        assert!(refused("http://cache").contains("redis://"));
        // Nothing listens there; nothing is tried yet.
        let store = RedisStore::new("redis://127.0.0.1:1", RemoteTimeouts::default()).unwrap();
        assert!(format!("{store:?}").contains("127.0.0.1:1"));
    }
}
