//! [`RedisStore`]: the remote tier's backend on a Redis server (or anything
//! that speaks its protocol: Valkey, KeyDB, Dragonfly), with a client of its
//! own: the seven commands it sends, over `resp.rs`.
//!
//! # Why a client of its own, not the `redis` crate
//!
//! The tier sits on the path of a call that would otherwise build, so a
//! server that is slow, lying or hostile must cost at most a bounded wait
//! and a bounded allocation. The `redis` crate, used first, gave neither:
//!
//! - **A deadline per request.** It applied the request timeout to each
//!   socket read, so a server dripping one byte every 0.3 s held a
//!   blocking call until the process was killed. Here a request has one
//!   deadline and every read and write gets the time left.
//! - **Replies bounded before allocation.** Its reply parser allocated
//!   whatever a bulk or array header declared (a lying 3 GiB bulk made the
//!   process hold 6.3 GB; under an address-space limit it aborted). Here a
//!   bulk over the bound is refused from its header, one within it is
//!   allocated once (`try_reserve_exact`), header and error lines have a
//!   length limit, and arrays and RESP3 types are refused at their first
//!   byte (`resp.rs`; fuzzed by the `redis_reply` target).
//! - **Only the replies each command can give.** `:` for `STRLEN` and
//!   `EVAL`, `$` within the bound for `GETRANGE` and `GET`, `+OK` for
//!   `SET`, `AUTH` and `SELECT` (or `$-1` for `SET ... NX`), `-` from any; anything else is a
//!   [`RemoteError::Protocol`](super::RemoteError::Protocol) and the
//!   connection is closed.
//! - **No handshake.** Its connect sent `CLIENT SETINFO` and waited for the
//!   replies, so a server that accepts and never answers held a connect
//!   for about twice the connect timeout; here a connect is the TCP (or
//!   Unix) connect, plus `AUTH` and `SELECT` only when the address names
//!   them.
//! - **Seven commands.** The tier needs `STRLEN`, `GETRANGE`, `SET`,
//!   `AUTH`, `SELECT`, and for the compile leases `GET` (a lease's owner,
//!   bounded) and `EVAL` of two fixed scripts, so the client is small enough to bound every
//!   wait and every byte of: this file, `resp.rs` and `redis/address.rs`
//!   (the URL forms the old client accepted), on `std::net`; with the
//!   `remote-tls` feature, `redis/tls.rs` runs rustls over the same
//!   deadline socket for `rediss://` (the handshake within the connect
//!   deadline, every TLS record of a request within its deadline).
//!
//! Each request takes an idle connection, or opens one within the connect
//! timeout: resolving the host name (on a helper thread, waited for until
//! the deadline), the TCP or Unix connect, then `AUTH` and `SELECT` when the
//! address names a password or a database, their replies included. The
//! request then has a deadline, the request timeout from its start: every
//! write and read of it gets the time left as its socket timeout, so a
//! server that drips its answer fails the request at the deadline like one
//! that never answers, and nothing waits on the server (or the resolver)
//! longer than the two timeouts together. The README's "Every wait of the
//! remote tier" lists each wait, its bound and its test.
//! A Unix connect is made non-blocking and retried with a short back-off
//! while the server's listen backlog is full (Linux answers `EAGAIN` where
//! a blocking connect would wait for an `accept` that may never come), so
//! it ends at the deadline like a TCP connect.
//! A connection that failed (a timeout, an error, a reply that breaks the
//! protocol) is closed and the idle ones dropped (the next request opens a
//! new one); one that answered goes back to the idle list.
//!
//! `get` asks for the value's length first (`STRLEN`) and downloads it
//! (`GETRANGE`, bounded) only when it is within the bound; a reply longer
//! than asked for is refused from its header, so no answer makes the
//! process allocate past the bound. `put` is a plain `SET`: concurrent
//! publishers of one key write complete, self-authenticating values, and
//! Redis keeps one of them whole.
//!
//! A compile lease is a key holding its owner's name with a time to live:
//! taken with `SET lease owner NX PX ttl` (`+OK`, or `$-1` when another
//! holds it: then `GET lease` names the holder), renewed and released by two `EVAL` scripts that compare the
//! owner first ([`RENEW_SCRIPT`], [`RELEASE_SCRIPT`]; Redis runs a script
//! atomically), so an owner whose lease expired and was taken by another
//! never extends or deletes the new owner's.

mod address;
mod socket;
#[cfg(test)]
mod tests;
#[cfg(feature = "remote-tls")]
mod tls;
// Without `remote-tls`, a stand-in that is never made: `rediss://` is
// refused when the address is parsed.
#[cfg(not(feature = "remote-tls"))]
mod tls_left_out;
#[cfg(not(feature = "remote-tls"))]
use self::tls_left_out as tls;

use std::fmt;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use self::address::Address;
use self::socket::{deadline_after, system_resolver, DeadlineSocket, Socket};
use self::tls::TlsConfig;
use super::remote::{LeaseAnswer, RemoteError, RemoteStore, RemoteValue};
use super::resp::{self, ReplyError};

/// Idle connections kept for later requests, at most (the compile threads
/// and the publisher).
const MAX_IDLE: usize = 4;

/// A connection's read buffer: what it may hold of a reply besides the
/// value being read.
const READ_BUFFER: usize = 16 << 10;

/// What a command's small pieces are gathered in before they are written
/// (a larger value goes straight to the socket).
const WRITE_BUFFER: usize = 8 << 10;

/// The longest pause between two tries of a Unix connect whose server's
/// backlog is full (the first is 1 ms; each doubles).
const MAX_CONNECT_PAUSE: Duration = Duration::from_millis(20);

/// The longest lease owner read (a host name, a process id, 16 hex
/// digits).
const MAX_OWNER_BYTES: u64 = 1024;

/// Extends a lease (`KEYS[1]`) to `ARGV[2]` ms if `ARGV[1]` holds it:
/// answers 1, else 0.
const RENEW_SCRIPT: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

/// Deletes a lease (`KEYS[1]`) if `ARGV[1]` holds it: answers 1, else 0.
const RELEASE_SCRIPT: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
     return redis.call('del', KEYS[1]) else return 0 end";

/// How long a [`RedisStore`] waits for the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteTimeouts {
    /// To open a connection: resolving the host name, the TCP or Unix
    /// connect, and the replies of `AUTH` and `SELECT` when the address
    /// names a password or a database.
    pub connect: Duration,
    /// For a request (`get` or `put`) as a whole: every read and write of
    /// it ends within this time from its start.
    pub request: Duration,
}

impl Default for RemoteTimeouts {
    /// 200 ms to connect, 500 ms per request: a fetch only happens instead
    /// of a compile (hundreds of milliseconds), and a loopback or LAN server
    /// answers in well under a millisecond.
    fn default() -> Self {
        RemoteTimeouts {
            connect: Duration::from_millis(200),
            request: Duration::from_millis(500),
        }
    }
}

/// A [`RemoteStore`] on a Redis server (see the module docs).
pub struct RedisStore {
    address: Address,
    /// What a `rediss://` connection trusts; `None` for `redis://`.
    tls: Option<TlsConfig>,
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
    /// The store at `url`: `redis://[user:password@]host[:port][/db]`,
    /// `rediss://...` (the same over TLS; the `remote-tls` feature), or
    /// `redis+unix:///path/to/socket[?db=N&pass=PASSWORD]`. Does not
    /// connect: the first request does, so a server that is down at start
    /// costs nothing until then. A `rediss://` server's certificate must be
    /// issued for the address's host and signed by a root of the system's
    /// store ([`with_ca_file`](Self::with_ca_file) names a CA instead).
    ///
    /// # Errors
    ///
    /// [`RemoteError::Address`] for an address that is not one of the above
    /// (saying why, without the password; `rediss://` without the
    /// `remote-tls` feature names it), and [`RemoteError::Tls`] for a
    /// `rediss://` address on a system without root certificates.
    pub fn new(url: &str, timeouts: RemoteTimeouts) -> Result<RedisStore, RemoteError> {
        Self::open(url, timeouts, None)
    }

    /// The store at the `rediss://` address `url`, as [`new`](Self::new),
    /// whose server's certificate must be signed by a certificate of the
    /// PEM file `ca_file` (read now), the system's roots left aside.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), and [`RemoteError::Tls`] when `url` is not a
    /// `rediss://` address or `ca_file` cannot be read or holds no
    /// certificate.
    #[cfg(feature = "remote-tls")]
    pub fn with_ca_file(
        url: &str,
        timeouts: RemoteTimeouts,
        ca_file: &Path,
    ) -> Result<RedisStore, RemoteError> {
        Self::open(url, timeouts, Some(ca_file))
    }

    /// The store at `url`; a `rediss://` one trusting `ca_file`, else the
    /// system's roots.
    fn open(
        url: &str,
        timeouts: RemoteTimeouts,
        ca_file: Option<&Path>,
    ) -> Result<RedisStore, RemoteError> {
        let shown = Self::redacted(url);
        let address = Address::parse(url).map_err(|reason| RemoteError::Address {
            url: shown.clone(),
            reason,
        })?;
        let tls = match (address.tls, ca_file) {
            (false, None) => None,
            (true, None) => Some(TlsConfig::system_roots()),
            (true, Some(ca_file)) => Some(TlsConfig::ca_file(ca_file)),
            (false, Some(ca_file)) => Some(Err(format!(
                "a CA file ({}) is for a `rediss://` address (TLS); this one is not",
                ca_file.display()
            ))),
        };
        let tls = tls.transpose().map_err(|reason| RemoteError::Tls {
            url: shown.clone(),
            reason,
        })?;
        Ok(RedisStore {
            address,
            tls,
            shown,
            timeouts,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// `url` with its password, if any, replaced by `***`: for messages and
    /// logs.
    pub fn redacted(url: &str) -> String {
        address::redacted(url)
    }

    /// The timeouts.
    pub fn timeouts(&self) -> RemoteTimeouts {
        self.timeouts
    }

    /// Runs `request` on a connection, within the request timeout; keeps
    /// the connection if it answered.
    fn with_connection<T>(
        &self,
        request: impl FnOnce(&mut Connection) -> Result<T, Failed>,
    ) -> Result<T, RemoteError> {
        let idle = self.idle().pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.connect()?,
        };
        connection.set_deadline(deadline_after(self.timeouts.request));
        match request(&mut connection) {
            Ok(answer) => {
                let mut idle = self.idle();
                if idle.len() < MAX_IDLE {
                    idle.push(connection);
                }
                Ok(answer)
            }
            Err(failed) => {
                // The idle ones most likely lead to the same failed server:
                // a restarted one would otherwise fail once per stale
                // connection. This one may still have a late reply coming:
                // it is closed.
                self.idle().clear();
                Err(self.error(failed, Phase::Request))
            }
        }
    }

    fn idle(&self) -> MutexGuard<'_, Vec<Connection>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn connect(&self) -> Result<Connection, RemoteError> {
        let deadline = deadline_after(self.timeouts.connect);
        Connection::open(&self.address, self.tls.as_ref(), deadline)
            .map_err(|failed| self.error(failed, Phase::Connect))
    }

    /// What `failed` in `phase` means, for the tier's counters and logs.
    fn error(&self, failed: Failed, phase: Phase) -> RemoteError {
        let Failed { step, error } = failed;
        let url = self.shown.clone();
        let source = match error {
            ReplyError::Io(error) if error.kind() == io::ErrorKind::TimedOut => {
                let (doing, timeout) = match phase {
                    Phase::Connect => ("connecting", self.timeouts.connect),
                    Phase::Request => ("the request", self.timeouts.request),
                };
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{doing} took longer than its {timeout:?} timeout"),
                )
            }
            ReplyError::Io(error) => error,
            ReplyError::Closed => io::Error::new(io::ErrorKind::UnexpectedEof, ReplyError::Closed),
            ReplyError::Server(message) => return RemoteError::Server { url, step, message },
            ReplyError::Protocol(violation) => {
                return RemoteError::Protocol {
                    url,
                    step,
                    violation,
                }
            }
        };
        RemoteError::Unavailable { url, step, source }
    }
}

impl RemoteStore for RedisStore {
    fn get(&self, key: &str, max_bytes: u64) -> Result<RemoteValue, RemoteError> {
        self.with_connection(|connection| {
            let len = connection.call("STRLEN", &[key.as_bytes()], resp::read_length)?;
            if len == 0 {
                // Redis's answer for a missing key; no entry is empty.
                return Ok(RemoteValue::Missing);
            }
            if len > max_bytes {
                return Ok(RemoteValue::TooLarge(len));
            }
            // Bounded even if the value grew since `STRLEN`.
            let last = (max_bytes - 1).to_string();
            let range = [key.as_bytes(), b"0", last.as_bytes()];
            let value = connection.call("GETRANGE", &range, |reply| {
                resp::read_bulk(reply, max_bytes)
            })?;
            // Empty or none: deleted since `STRLEN`.
            Ok(match value {
                Some(bytes) if !bytes.is_empty() => RemoteValue::Found(bytes),
                _ => RemoteValue::Missing,
            })
        })
    }

    fn put(&self, key: &str, value: &[u8]) -> Result<(), RemoteError> {
        self.with_connection(|connection| {
            connection.call("SET", &[key.as_bytes(), value], resp::read_ok)
        })
    }

    fn take_lease(
        &self,
        lease: &str,
        owner: &str,
        ttl: Duration,
    ) -> Result<LeaseAnswer, RemoteError> {
        let ttl = millis(ttl);
        let args = [
            lease.as_bytes(),
            owner.as_bytes(),
            b"NX",
            b"PX",
            ttl.as_bytes(),
        ];
        self.with_connection(|connection| {
            if connection.call("SET", &args, resp::read_ok_or_nil)? {
                return Ok(LeaseAnswer::Taken);
            }
            let holder = connection.call("GET", &[lease.as_bytes()], |reply| {
                resp::read_bulk(reply, MAX_OWNER_BYTES)
            })?;
            let owner = String::from_utf8_lossy(&holder.unwrap_or_default()).into_owned();
            Ok(LeaseAnswer::Held { owner })
        })
    }

    fn renew_lease(&self, lease: &str, owner: &str, ttl: Duration) -> Result<bool, RemoteError> {
        let ttl = millis(ttl);
        let args = [
            RENEW_SCRIPT.as_bytes(),
            b"1",
            lease.as_bytes(),
            owner.as_bytes(),
            ttl.as_bytes(),
        ];
        let renewed =
            self.with_connection(|connection| connection.call("EVAL", &args, resp::read_length))?;
        Ok(renewed == 1)
    }

    fn release_lease(&self, lease: &str, owner: &str) -> Result<(), RemoteError> {
        let args = [
            RELEASE_SCRIPT.as_bytes(),
            b"1",
            lease.as_bytes(),
            owner.as_bytes(),
        ];
        self.with_connection(|connection| connection.call("EVAL", &args, resp::read_length))
            .map(drop)
    }
}

/// `duration` in whole milliseconds, at least 1 (`PX 0` is an error).
fn millis(duration: Duration) -> String {
    duration
        .as_millis()
        .clamp(1, u128::from(u64::MAX))
        .to_string()
}

/// What a failure happened in: which timeout applied.
#[derive(Debug, Clone, Copy)]
enum Phase {
    Connect,
    Request,
}

/// A step of a request or of connecting that failed, and why.
struct Failed {
    /// The command, or `connect`.
    step: &'static str,
    error: ReplyError,
}

/// A connection to the server, read through a buffer of fixed size.
struct Connection {
    socket: BufReader<DeadlineSocket>,
}

impl Connection {
    /// Connects to `address` (through TLS with `tls`) and logs in (`AUTH`,
    /// `SELECT`), by `deadline`.
    fn open(
        address: &Address,
        tls: Option<&TlsConfig>,
        deadline: Instant,
    ) -> Result<Connection, Failed> {
        let socket = Socket::connect(&address.endpoint, tls, deadline, system_resolver)?;
        let mut connection = Connection {
            socket: BufReader::with_capacity(READ_BUFFER, DeadlineSocket { socket, deadline }),
        };
        if let Some(login) = &address.login {
            let credentials: Vec<&[u8]> = login
                .user
                .iter()
                .chain([&login.password])
                .map(Vec::as_slice)
                .collect();
            connection.call("AUTH", &credentials, resp::read_ok)?;
        }
        if address.database != 0 {
            let database = address.database.to_string();
            connection.call("SELECT", &[database.as_bytes()], resp::read_ok)?;
        }
        Ok(connection)
    }

    /// From now on, every read and write ends by `deadline`.
    fn set_deadline(&mut self, deadline: Instant) {
        self.socket.get_mut().deadline = deadline;
    }

    /// Sends `command args...` and reads its reply with `read`.
    fn call<T>(
        &mut self,
        command: &'static str,
        args: &[&[u8]],
        read: impl FnOnce(&mut BufReader<DeadlineSocket>) -> Result<T, ReplyError>,
    ) -> Result<T, Failed> {
        self.send(command, args)
            .map_err(ReplyError::Io)
            .and_then(|()| read(&mut self.socket))
            .map_err(|error| Failed {
                step: command,
                error,
            })
    }

    fn send(&mut self, command: &str, args: &[&[u8]]) -> io::Result<()> {
        let mut out = BufWriter::with_capacity(WRITE_BUFFER, self.socket.get_mut());
        resp::write_command(&mut out, command, args)?;
        out.flush()
    }
}
