//! The Redis backend against a scripted fake server (a loopback listener on
//! a thread that stops by itself): a request ends within its timeout as a
//! whole however slowly the server answers, or if it never answers; a
//! connect ends within its timeout when the server never accepts (a TCP or
//! Unix listener whose backlog is full); no reply makes the client
//! allocate past the bound it asked for; a reply the command cannot have is
//! a protocol error; a connection that failed is never used again; and a
//! well-behaved exchange puts exactly the expected bytes on the wire.

#![cfg(not(miri))] // sockets

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rustix::net::addr::SocketAddrArg;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use jit_cache::ErrorChain;
use jit_store::{RedisStore, RemoteError, RemoteStore, RemoteTimeouts, RemoteValue};

/// The longest the fake server waits for a connection or a byte: it stops
/// by itself whatever the client does.
const PATIENCE: Duration = Duration::from_secs(10);

/// The pause between two bytes of a dripped reply.
const DRIP: Duration = Duration::from_millis(100);

/// Timeouts far shorter than a dripped reply.
fn short() -> RemoteTimeouts {
    let mut timeouts = RemoteTimeouts::default();
    timeouts.connect = Duration::from_millis(300);
    timeouts.request = Duration::from_millis(300);
    timeouts
}

/// Timeouts no healthy exchange on loopback comes near, even on a busy
/// machine.
fn generous() -> RemoteTimeouts {
    let mut timeouts = RemoteTimeouts::default();
    timeouts.connect = Duration::from_secs(5);
    timeouts.request = Duration::from_secs(5);
    timeouts
}

/// The bound the tests ask `get` for.
const MAX_BYTES: u64 = 1024;

/// A fake Redis server on a loopback port: serves up to `connections`
/// connections in turn with a script, then stops.
struct FakeServer<R> {
    port: u16,
    thread: JoinHandle<Vec<Served<R>>>,
}

/// One connection, once its script ended: what the script returned, and
/// every byte the client sent on it.
struct Served<R> {
    outcome: R,
    received: Vec<u8>,
}

impl<R: Send + 'static> FakeServer<R> {
    /// Serves connection `n` (from 0) with `script(n, peer)`.
    fn start(
        connections: usize,
        mut script: impl FnMut(usize, &mut Peer) -> R + Send + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let thread = thread::spawn(move || {
            let mut served = Vec::new();
            while served.len() < connections {
                let Some(stream) = accept(&listener) else {
                    break;
                };
                let mut peer = Peer::new(stream);
                let outcome = script(served.len(), &mut peer);
                served.push(Served {
                    outcome,
                    received: peer.received(),
                });
            }
            served
        });
        FakeServer { port, thread }
    }

    /// `redis://127.0.0.1:PORT`, with `login` (`user:password@`) before the
    /// host and `path` (`/db`) after it.
    fn url(&self, login: &str, path: &str) -> String {
        format!("redis://{login}127.0.0.1:{}{path}", self.port)
    }

    /// Waits for the server to stop; what each connection saw.
    fn finish(self) -> Vec<Served<R>> {
        self.thread
            .join()
            .expect("the fake server's script panicked")
    }
}

/// The next connection, if one comes within [`PATIENCE`].
fn accept(listener: &TcpListener) -> Option<TcpStream> {
    listener.set_nonblocking(true).unwrap();
    let give_up = Instant::now() + PATIENCE;
    while Instant::now() < give_up {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                stream.set_read_timeout(Some(PATIENCE)).unwrap();
                stream.set_write_timeout(Some(PATIENCE)).unwrap();
                return Some(stream);
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(5));
            }
            Err(error) => panic!("accept: {error}"),
        }
    }
    None
}

/// The client at the other end of one connection, as a script sees it.
struct Peer {
    reader: BufReader<TcpStream>,
    received: Vec<u8>,
}

impl Peer {
    fn new(stream: TcpStream) -> Self {
        Peer {
            reader: BufReader::new(stream),
            received: Vec::new(),
        }
    }

    fn received(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.received)
    }

    /// The next command the client sent (name and arguments); `None` once
    /// it hung up.
    fn command(&mut self) -> Option<Vec<Vec<u8>>> {
        let count = self.number_after(b'*')?;
        let arguments = (0..count)
            .map(|_| {
                let len = self.number_after(b'$').expect("a bulk string");
                let mut argument = vec![0; len + 2];
                self.reader.read_exact(&mut argument).unwrap();
                self.received.extend_from_slice(&argument);
                assert!(argument.ends_with(b"\r\n"), "a bulk string ends in CRLF");
                argument.truncate(len);
                argument
            })
            .collect();
        Some(arguments)
    }

    /// The number on a `{kind}N\r\n` line; `None` at the end of the stream.
    fn number_after(&mut self, kind: u8) -> Option<usize> {
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).ok()?;
        if line.is_empty() {
            return None;
        }
        self.received.extend_from_slice(&line);
        let text = std::str::from_utf8(&line).unwrap();
        let number = text.strip_prefix(char::from(kind)).unwrap();
        Some(number.trim_end().parse().unwrap())
    }

    /// Reads the next command, which must be `expected`, and answers it.
    fn answer(&mut self, expected: &[&str], reply: &[u8]) {
        self.expect(expected);
        assert!(self.send(reply), "the client hung up before {expected:?}");
    }

    /// Reads the next command, which must be `expected`.
    fn expect(&mut self, expected: &[&str]) {
        let command = self.command().expect("a command");
        let expected: Vec<&[u8]> = expected.iter().map(|arg| arg.as_bytes()).collect();
        assert_eq!(command, expected);
    }

    /// Sends `bytes`; false when the client had hung up.
    fn send(&mut self, bytes: &[u8]) -> bool {
        self.reader.get_mut().write_all(bytes).is_ok()
    }

    /// Sends `bytes` one at a time, [`DRIP`] apart; false when the client
    /// hung up before the last.
    fn drip(&mut self, bytes: &[u8]) -> bool {
        bytes.iter().all(|&byte| {
            thread::sleep(DRIP);
            self.send(&[byte])
        })
    }

    /// Sends `chunk` over and over, `total` bytes in all; false when the
    /// client hung up before the end.
    fn flood(&mut self, chunk: &[u8], total: usize) -> bool {
        (0..total / chunk.len()).all(|_| self.send(chunk))
    }

    /// Whether the client closes the connection without sending more.
    fn hangs_up(&mut self) -> bool {
        let mut byte = [0];
        match self.reader.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(error) => error.kind() == io::ErrorKind::ConnectionReset,
        }
    }
}

/// The RESP encoding of a command, as the client must write it.
fn encoded(command: &[&str]) -> Vec<u8> {
    let mut bytes = format!("*{}\r\n", command.len()).into_bytes();
    for arg in command {
        bytes.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    bytes
}

fn store(url: &str, timeouts: RemoteTimeouts) -> RedisStore {
    RedisStore::new(url, timeouts).unwrap()
}

fn is_protocol_error(error: &RemoteError) -> bool {
    matches!(error, RemoteError::Protocol { .. })
}

#[test]
fn a_server_that_drips_its_reply_fails_the_request_at_its_timeout() {
    let server = FakeServer::start(1, |_, peer| {
        peer.answer(&["STRLEN", "key"], b":50\r\n");
        peer.expect(&["GETRANGE", "key", "0", "1023"]);
        let bulk = [&b"$50\r\n"[..], &[b'x'; 50], b"\r\n"].concat();
        peer.drip(&bulk)
    });
    let error = store(&server.url("", ""), short())
        .get("key", MAX_BYTES)
        .unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(
        matches!(&error, RemoteError::Unavailable { step: "GETRANGE", source, .. }
            if source.kind() == io::ErrorKind::TimedOut),
        "{message}"
    );
    assert!(
        message.contains("timeout") && message.contains("300ms"),
        "{message}"
    );
    let served = server.finish();
    assert!(!served[0].outcome, "the client hung up mid-reply");
}

#[test]
fn a_server_that_drips_its_login_reply_fails_the_connect_at_its_timeout() {
    let server = FakeServer::start(1, |_, peer| {
        peer.expect(&["AUTH", "secret"]);
        peer.drip(b"-ERR this reply comes too slowly to be waited for\r\n")
    });
    let error = store(&server.url(":secret@", ""), short())
        .get("key", MAX_BYTES)
        .unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(
        matches!(&error, RemoteError::Unavailable { step: "AUTH", source, .. }
            if source.kind() == io::ErrorKind::TimedOut),
        "{message}"
    );
    assert!(
        message.contains("connect") && message.contains("300ms"),
        "{message}"
    );
    assert!(!message.contains("secret"), "{message}");
    assert!(!server.finish()[0].outcome, "the client hung up mid-reply");
}

#[test]
fn a_lying_length_is_refused_before_anything_is_allocated() {
    let server = FakeServer::start(1, |_, peer| {
        // A length over the bound: nothing is downloaded.
        peer.answer(&["STRLEN", "key"], b":3221225472\r\n");
        // A bulk string over the bound: refused from its header.
        peer.answer(&["STRLEN", "key"], b":16\r\n");
        peer.expect(&["GETRANGE", "key", "0", "1023"]);
        let lie = [&b"$3221225472\r\n"[..], &[b'x'; 1024]].concat();
        peer.send(&lie) && peer.hangs_up()
    });
    let store = store(&server.url("", ""), short());
    assert_eq!(
        store.get("key", MAX_BYTES).unwrap(),
        RemoteValue::TooLarge(3_221_225_472)
    );
    let error = store.get("key", MAX_BYTES).unwrap_err();
    let message = error.to_string();
    assert!(is_protocol_error(&error), "{message}");
    assert!(
        message.contains("3221225472") && message.contains("1024"),
        "{message}"
    );
    assert!(
        server.finish()[0].outcome,
        "the client hung up after the header of the lie"
    );
}

#[test]
fn an_endless_array_is_refused_at_its_first_byte() {
    let server = FakeServer::start(1, |_, peer| {
        peer.answer(&["STRLEN", "key"], b"*1000000000\r\n");
        !peer.flood(&b"*1\r\n".repeat(4096), 64 << 20)
    });
    let error = store(&server.url("", ""), short())
        .get("key", MAX_BYTES)
        .unwrap_err();
    let message = error.to_string();
    assert!(is_protocol_error(&error), "{message}");
    assert!(message.contains("array"), "{message}");
    assert!(server.finish()[0].outcome, "the client hung up mid-flood");
}

#[test]
fn a_line_that_never_ends_is_refused_at_its_limit() {
    let server = FakeServer::start(1, |_, peer| {
        peer.answer(&["STRLEN", "key"], b"-ERR ");
        !peer.flood(&[b'a'; 4096], 10 << 20)
    });
    let error = store(&server.url("", ""), short())
        .get("key", MAX_BYTES)
        .unwrap_err();
    let message = error.to_string();
    assert!(is_protocol_error(&error), "{message}");
    assert!(message.contains("4096 bytes"), "{message}");
    assert!(server.finish()[0].outcome, "the client hung up mid-flood");
}

#[test]
fn replies_a_command_cannot_have_are_protocol_errors_and_error_replies_server_errors() {
    const STRLEN_REPLIES: [&[u8]; 12] = [
        b"%1\r\n+a\r\n+b\r\n",
        b">2\r\n+message\r\n+x\r\n",
        b"_\r\n",
        b"~1\r\n:1\r\n",
        b"#t\r\n",
        b",1.5\r\n",
        b"(12345678901234567890\r\n",
        b"!3\r\nerr\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"|1\r\n+a\r\n+b\r\n:5\r\n",
        b"$1\r\n5\r\n",
        b"+5\r\n",
    ];
    let cases = STRLEN_REPLIES.len();
    // One connection per case (a violation closes it), then `SET` answered
    // with an integer, then an error reply.
    let server = FakeServer::start(cases + 2, move |n, peer| {
        match n {
            n if n < cases => peer.answer(&["STRLEN", "key"], STRLEN_REPLIES[n]),
            n if n == cases => peer.answer(&["SET", "key", "value"], b":1\r\n"),
            _ => peer.answer(&["STRLEN", "key"], b"-WRONGTYPE not a string\r\n"),
        }
        peer.hangs_up()
    });
    let store = store(&server.url("", ""), generous());
    for reply in STRLEN_REPLIES {
        let error = store.get("key", MAX_BYTES).unwrap_err();
        let message = error.to_string();
        let reply = String::from_utf8_lossy(reply);
        assert!(is_protocol_error(&error), "{reply:?}: {message}");
        assert!(message.contains("STRLEN"), "{reply:?}: {message}");
    }
    let error = store.put("key", b"value").unwrap_err();
    assert!(is_protocol_error(&error), "{error}");
    let error = store.get("key", MAX_BYTES).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, RemoteError::Server { step: "STRLEN", .. }),
        "{message}"
    );
    assert!(message.contains("WRONGTYPE not a string"), "{message}");
    drop(store);
    let served = server.finish();
    assert_eq!(served.len(), cases + 2);
    assert!(served.iter().all(|served| served.outcome));
}

#[test]
fn a_well_behaved_exchange_puts_exactly_these_bytes_on_the_wire() {
    let server = FakeServer::start(1, |_, peer| {
        peer.answer(&["AUTH", "me", "p@ss"], b"+OK\r\n");
        peer.answer(&["SELECT", "3"], b"+OK\r\n");
        peer.answer(&["STRLEN", "found"], b":5\r\n");
        peer.answer(&["GETRANGE", "found", "0", "1023"], b"$5\r\nhello\r\n");
        peer.answer(&["STRLEN", "missing"], b":0\r\n");
        peer.answer(&["STRLEN", "deleted"], b":5\r\n");
        peer.answer(&["GETRANGE", "deleted", "0", "1023"], b"$0\r\n\r\n");
        peer.answer(&["STRLEN", "null"], b":5\r\n");
        peer.answer(&["GETRANGE", "null", "0", "1023"], b"$-1\r\n");
        peer.answer(&["SET", "new", "value"], b"+OK\r\n");
        peer.hangs_up()
    });
    let store = store(&server.url("me:p%40ss@", "/3"), generous());
    let found = store.get("found", MAX_BYTES).unwrap();
    assert_eq!(found, RemoteValue::Found(b"hello".to_vec()));
    for key in ["missing", "deleted", "null"] {
        assert_eq!(
            store.get(key, MAX_BYTES).unwrap(),
            RemoteValue::Missing,
            "{key}"
        );
    }
    store.put("new", b"value").unwrap();
    drop(store);

    let served = server.finish();
    assert_eq!(served.len(), 1, "one connection, used for every request");
    assert!(served[0].outcome, "closed when the store was dropped");
    let expected: Vec<u8> = [
        &["AUTH", "me", "p@ss"][..],
        &["SELECT", "3"],
        &["STRLEN", "found"],
        &["GETRANGE", "found", "0", "1023"],
        &["STRLEN", "missing"],
        &["STRLEN", "deleted"],
        &["GETRANGE", "deleted", "0", "1023"],
        &["STRLEN", "null"],
        &["GETRANGE", "null", "0", "1023"],
        &["SET", "new", "value"],
    ]
    .iter()
    .flat_map(|command| encoded(command))
    .collect();
    assert_eq!(
        String::from_utf8_lossy(&served[0].received),
        String::from_utf8_lossy(&expected)
    );
}

#[test]
fn a_connection_that_failed_is_not_used_again() {
    let server = FakeServer::start(3, |n, peer| {
        match n {
            // Kept after a good answer; then a reply that breaks the
            // protocol.
            0 => {
                peer.answer(&["STRLEN", "a"], b":0\r\n");
                peer.answer(&["STRLEN", "b"], b"+PONG\r\n");
            }
            // No answer: the request times out.
            1 => peer.expect(&["STRLEN", "c"]),
            _ => peer.answer(&["STRLEN", "d"], b":0\r\n"),
        }
        peer.hangs_up()
    });
    let store = store(&server.url("", ""), short());
    assert_eq!(store.get("a", MAX_BYTES).unwrap(), RemoteValue::Missing);
    let broken = store.get("b", MAX_BYTES).unwrap_err();
    assert!(is_protocol_error(&broken), "{broken}");
    let silent = store.get("c", MAX_BYTES).unwrap_err();
    assert!(
        matches!(silent, RemoteError::Unavailable { .. }),
        "{}",
        ErrorChain(&silent)
    );
    assert_eq!(store.get("d", MAX_BYTES).unwrap(), RemoteValue::Missing);
    drop(store);
    let served = server.finish();
    assert_eq!(served.len(), 3, "a new connection after each failure");
    assert!(
        served.iter().all(|served| served.outcome),
        "each connection was closed, none sent another command"
    );
}

/// How long a request that must end at its timeout (300 ms) may take at
/// most, loosely: a busy machine is slow, but not this slow.
const BOUND: Duration = Duration::from_secs(5);

/// What `request` returned, on a thread of its own, and how long it took;
/// `None` when it did not return within [`BOUND`] (it is left behind).
fn within_bound<T: Send + 'static>(
    request: impl FnOnce() -> T + Send + 'static,
) -> Option<(T, Duration)> {
    let (done, returned) = mpsc::channel();
    thread::spawn(move || {
        let start = Instant::now();
        let answer = request();
        let _ = done.send((answer, start.elapsed()));
    });
    returned.recv_timeout(BOUND).ok()
}

/// Whether `error` is a timeout in `step`.
fn timed_out_in(error: &RemoteError, step: &str) -> bool {
    matches!(error, RemoteError::Unavailable { step: s, source, .. }
        if *s == step && source.kind() == io::ErrorKind::TimedOut)
}

#[test]
fn a_server_that_never_answers_fails_each_request_at_its_timeout() {
    // One connection per request, each answered by silence (the AUTH of
    // the last answered, then its SELECT not).
    let server = FakeServer::start(3, |n, peer| {
        match n {
            0 => peer.expect(&["STRLEN", "key"]),
            1 => peer.expect(&["SET", "key", "value"]),
            _ => {
                peer.answer(&["AUTH", "secret"], b"+OK\r\n");
                peer.expect(&["SELECT", "2"]);
            }
        }
        peer.hangs_up()
    });
    let plain = server.url("", "");
    let (get, elapsed) = within_bound(move || store(&plain, short()).get("key", MAX_BYTES))
        .expect("a get the server never answers ends within its timeout");
    let get = get.unwrap_err();
    assert!(timed_out_in(&get, "STRLEN"), "{}", ErrorChain(&get));
    assert!(elapsed < BOUND, "{elapsed:?}");

    let plain = server.url("", "");
    let (put, _) = within_bound(move || store(&plain, short()).put("key", b"value"))
        .expect("a put the server never answers ends within its timeout");
    let put = put.unwrap_err();
    assert!(timed_out_in(&put, "SET"), "{}", ErrorChain(&put));

    let logged_in = server.url(":secret@", "/2");
    let (select, _) = within_bound(move || store(&logged_in, short()).get("key", MAX_BYTES))
        .expect("a SELECT the server never answers ends within the connect timeout");
    let select = select.unwrap_err();
    let message = ErrorChain(&select).to_string();
    assert!(timed_out_in(&select, "SELECT"), "{message}");
    assert!(message.contains("connecting"), "{message}");
    let served = server.finish();
    assert!(served.iter().all(|served| served.outcome), "each hung up");
}

/// A listening socket (`listen(0)`) bound to `address`, of `family`.
fn listen_without_backlog(family: AddressFamily, address: &impl SocketAddrArg) -> OwnedFd {
    let listener = rustix::net::socket(family, SocketType::STREAM, None).unwrap();
    rustix::net::bind(&listener, address).unwrap();
    rustix::net::listen(&listener, 0).unwrap();
    listener
}

#[test]
fn a_unix_server_that_never_accepts_fails_the_connect_at_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("redis.sock");
    let address = SocketAddrUnix::new(&path).unwrap();
    let _listener = listen_without_backlog(AddressFamily::UNIX, &address);
    // Connections never accepted, until one does not get in (the kernel
    // lets `backlog + 1` wait): the backlog is full.
    let mut waiting = Vec::new();
    let full = (0..16).any(|_| {
        let client = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )
        .unwrap();
        match rustix::net::connect(&client, &address) {
            Ok(()) => {
                waiting.push(client);
                false
            }
            Err(rustix::io::Errno::AGAIN) => true,
            Err(error) => panic!("connect: {error}"),
        }
    });
    assert!(
        full,
        "the backlog of a listen(0) socket took 16 connections"
    );

    let url = format!("redis+unix://{}", path.display());
    let (answer, elapsed) = within_bound(move || store(&url, short()).get("key", MAX_BYTES))
        .expect("a Unix connect to a full backlog ends within the connect timeout");
    let error = answer.unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(timed_out_in(&error, "connect"), "{message}");
    assert!(message.contains("300ms"), "{message}");
    assert!(elapsed < BOUND, "{elapsed:?}");
}

#[test]
fn a_tcp_server_that_never_accepts_fails_the_connect_at_its_timeout() {
    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let listener = TcpListener::from(listen_without_backlog(AddressFamily::INET, &loopback));
    let address = listener.local_addr().unwrap();
    // Connections never accepted, until one does not get in: a full accept
    // queue drops the SYNs of new connections, which then wait.
    let mut waiting = Vec::new();
    let full =
        (0..16).any(
            |_| match TcpStream::connect_timeout(&address, Duration::from_millis(500)) {
                Ok(stream) => {
                    waiting.push(stream);
                    false
                }
                Err(error) if error.kind() == io::ErrorKind::TimedOut => true,
                Err(error) => panic!("connect: {error}"),
            },
        );
    assert!(
        full,
        "the backlog of a listen(0) socket took 16 connections"
    );

    let url = format!("redis://{address}");
    let (answer, elapsed) = within_bound(move || store(&url, short()).get("key", MAX_BYTES))
        .expect("a TCP connect to a full backlog ends within the connect timeout");
    let error = answer.unwrap_err();
    assert!(timed_out_in(&error, "connect"), "{}", ErrorChain(&error));
    assert!(elapsed < BOUND, "{elapsed:?}");
}
