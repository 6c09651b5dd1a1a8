//! A real `redis-server` for the remote-cache tests and benchmarks: started
//! on a free loopback port with a temporary folder and no persistence,
//! waited for until it answers PING, killed when dropped; and a minimal
//! client for the tests' own commands (`KEYS`, `GET`, `SET`). A TLS server
//! ([`RedisServer::start_tls`]) listens on its TLS port only, with the
//! test's certificate.
//!
//! The binary is `$SHEAF_JIT_TEST_REDIS_SERVER`, else `redis-server` on the
//! `PATH`; `cargo xtask test` installs Debian's package when it is missing.
//! A missing server fails the test: it is never skipped.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Overrides the `redis-server` binary.
pub const SERVER_ENV: &str = "SHEAF_JIT_TEST_REDIS_SERVER";

/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// A server on a free loopback port.
    pub fn start() -> RedisServer {
        Self::start_on(free_port())
    }

    /// A server on `port` (e.g. the port of one that was killed).
    pub fn start_on(port: u16) -> RedisServer {
        let mut server = Self::spawn(port, &["--port".into(), port.to_string().into()]);
        server.wait_until_it_answers();
        server
    }

    /// A server on a free loopback port that speaks TLS only (`--port 0`),
    /// presenting the certificate `files.cert` (key `files.key`), and
    /// asking clients for none (`--tls-auth-clients no`). Waited for until
    /// its port accepts connections (its PING would need TLS). Debian's
    /// `redis-server` is built with TLS.
    pub fn start_tls(files: &TlsFiles<'_>) -> RedisServer {
        let port = free_port();
        let args: Vec<OsString> = vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string().into(),
            "--tls-cert-file".into(),
            files.cert.into(),
            "--tls-key-file".into(),
            files.key.into(),
            "--tls-ca-cert-file".into(),
            files.ca.into(),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        let mut server = Self::spawn(port, &args);
        server.wait_until_it_listens();
        server
    }

    /// The server process, listening as `listen` says on `port`.
    fn spawn(port: u16, listen: &[OsString]) -> RedisServer {
        let binary = binary();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(&binary)
            .args(listen)
            .args(["--bind", "127.0.0.1", "--dir"])
            .arg(dir.path())
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start {}: {error}; run `cargo xtask test` (it installs Debian's \
                     redis-server) or set {SERVER_ENV}",
                    binary.display()
                )
            });
        RedisServer {
            child,
            port,
            _dir: dir,
        }
    }

    /// Its address, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        url_of(self.port)
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A client connection to it.
    pub fn connection(&self) -> Client {
        Client::connect(self.port, Duration::from_secs(5)).unwrap()
    }

    fn wait_until_it_listens(&mut self) {
        let start = Instant::now();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        while let Err(error) = TcpStream::connect_timeout(&address, Duration::from_millis(200)) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("redis-server on TLS port {} exited ({status})", self.port);
            }
            assert!(
                start.elapsed() < START_TIMEOUT,
                "redis-server on TLS port {} does not accept connections: {error}",
                self.port
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_until_it_answers(&mut self) {
        let start = Instant::now();
        loop {
            let pong = Client::connect(self.port, Duration::from_millis(200))
                .and_then(|mut client| client.command(&[b"PING"]));
            match pong {
                Ok(Reply::Status(_)) => return,
                answer => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        panic!("redis-server on port {} exited ({status})", self.port);
                    }
                    assert!(
                        start.elapsed() < START_TIMEOUT,
                        "redis-server on port {} does not answer PING: {answer:?}",
                        self.port
                    );
                    thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

/// The certificate files of a TLS server (PEM).
#[derive(Debug, Clone, Copy)]
pub struct TlsFiles<'a> {
    /// The server's certificate.
    pub cert: &'a Path,
    /// Its private key.
    pub key: &'a Path,
    /// The CA that the server would check client certificates against
    /// (`--tls-ca-cert-file`; it asks for none).
    pub ca: &'a Path,
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of the test's server: sends a command, reads its whole reply.
/// It trusts the server (a `redis-server` started here), unlike the
/// runtime's client, which bounds everything a server sends.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<TcpStream>,
}

/// A reply, as much of RESP2 as the tests need.
#[derive(Debug, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

impl Client {
    /// A connection to the server on `port`, each read and write bounded by
    /// `timeout`.
    fn connect(port: u16, timeout: Duration) -> io::Result<Client> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let stream = TcpStream::connect_timeout(&address, timeout)?;
        stream.set_read_timeout(Some(timeout))?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Client {
            reader: BufReader::new(stream),
        })
    }

    /// The names of the keys matching `pattern`.
    pub fn keys(&mut self, pattern: &str) -> Vec<String> {
        match self.command(&[b"KEYS", pattern.as_bytes()]).unwrap() {
            Reply::Array(keys) => keys
                .into_iter()
                .map(|key| match key {
                    Reply::Bulk(Some(key)) => String::from_utf8(key).unwrap(),
                    other => panic!("KEYS answered {other:?}"),
                })
                .collect(),
            other => panic!("KEYS answered {other:?}"),
        }
    }

    /// The value of `key`, which must exist.
    pub fn get(&mut self, key: &str) -> Vec<u8> {
        match self.command(&[b"GET", key.as_bytes()]).unwrap() {
            Reply::Bulk(Some(value)) => value,
            other => panic!("GET {key} answered {other:?}"),
        }
    }

    /// Sets `key` to `value`.
    pub fn set(&mut self, key: &str, value: &[u8]) {
        let answer = self.command(&[b"SET", key.as_bytes(), value]).unwrap();
        assert_eq!(answer, Reply::Status("OK".to_owned()), "SET {key}");
    }

    /// The commands the server ran since it started or since the last
    /// `CONFIG RESETSTAT`, each with its calls, by any client (lower-case
    /// names, from `INFO commandstats`: `get`, `set`, `eval`, ...).
    pub fn commands_run(&mut self) -> Vec<(String, u64)> {
        let text = match self.command(&[b"INFO", b"commandstats"]).unwrap() {
            Reply::Bulk(Some(text)) => String::from_utf8(text).unwrap(),
            other => panic!("INFO commandstats answered {other:?}"),
        };
        text.lines()
            .filter_map(|line| line.strip_prefix("cmdstat_"))
            .map(|line| {
                let (name, fields) = line.split_once(':').expect("`name:fields`");
                let calls = fields
                    .split(',')
                    .find_map(|field| field.strip_prefix("calls="))
                    .and_then(|calls| calls.parse().ok())
                    .expect("a count of calls");
                (name.to_owned(), calls)
            })
            .collect()
    }

    /// Sends `args` (the command and its arguments); the reply.
    pub fn command(&mut self, args: &[&[u8]]) -> io::Result<Reply> {
        let mut command = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            command.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            command.extend_from_slice(arg);
            command.extend_from_slice(b"\r\n");
        }
        self.reader.get_mut().write_all(&command)?;
        self.reply()
    }

    fn reply(&mut self) -> io::Result<Reply> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let line = line.trim_end_matches("\r\n");
        let number = |text: &str| {
            text.parse::<i64>()
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("`{line}`")))
        };
        let Some(text) = line.get(1..) else {
            return Err(io::ErrorKind::UnexpectedEof.into());
        };
        Ok(match &line[..1] {
            "+" => Reply::Status(text.to_owned()),
            "-" => Reply::Error(text.to_owned()),
            ":" => Reply::Integer(number(text)?),
            "$" => match usize::try_from(number(text)?) {
                Err(_) => Reply::Bulk(None),
                Ok(len) => {
                    let mut value = vec![0; len + 2];
                    self.reader.read_exact(&mut value)?;
                    value.truncate(len);
                    Reply::Bulk(Some(value))
                }
            },
            "*" => Reply::Array(
                (0..number(text)?)
                    .map(|_| self.reply())
                    .collect::<io::Result<_>>()?,
            ),
            _ => {
                let message = format!("not a RESP2 reply: `{line}`");
                return Err(io::Error::new(io::ErrorKind::InvalidData, message));
            }
        })
    }
}

/// The ACL line of a documentation `page` that starts with `start`
/// (`user jit-prod `; exactly one must): the user's name and its rules, to
/// create that user as the page says (`ACL SETUSER name rules...`).
pub fn documented_acl(page: &str, start: &str) -> (String, Vec<String>) {
    let lines: Vec<&str> = page
        .lines()
        .filter(|line| line.starts_with(start))
        .collect();
    assert_eq!(lines.len(), 1, "one line starting `{start}`: {lines:?}");
    let mut words = lines[0].split_whitespace().skip(1);
    let user = words.next().unwrap().to_owned();
    (user, words.map(str::to_owned).collect())
}

/// `redis://127.0.0.1:PORT`.
pub fn url_of(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// A loopback port nothing listens on (now).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The server binary: the override, else `redis-server` on the `PATH`.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os(SERVER_ENV).filter(|path| !path.is_empty()) {
        return PathBuf::from(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("redis-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "redis-server is not installed: these tests need a real server. Run `cargo xtask \
             test`, which installs Debian's redis-server, or install it yourself (`apt-get \
             install redis-server`) or set {SERVER_ENV} to its path"
        )
    })
}
