//! A real `redis-server` for the remote-cache tests and benchmark: started
//! on a free loopback port with a temporary folder and no persistence,
//! waited for until it answers PING, killed when dropped.
//!
//! The binary is `$SHEAF_JIT_TEST_REDIS_SERVER`, else `redis-server` on the
//! `PATH`; `cargo xtask test` installs Debian's package when it is missing.
//! A missing server fails the test: it is never skipped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// Overrides the `redis-server` binary.
pub(crate) const SERVER_ENV: &str = "SHEAF_JIT_TEST_REDIS_SERVER";

/// How long a server may take to answer its first PING.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `redis-server`, killed on drop.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl RedisServer {
    /// A server on a free loopback port.
    pub(crate) fn start() -> RedisServer {
        Self::start_on(free_port())
    }

    /// A server on `port` (e.g. the port of one that was killed).
    pub(crate) fn start_on(port: u16) -> RedisServer {
        let binary = binary();
        let dir = tempfile::tempdir().unwrap();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
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
        let mut server = RedisServer {
            child,
            port,
            _dir: dir,
        };
        server.wait_until_it_answers();
        server
    }

    /// Its address, `redis://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        url_of(self.port)
    }

    /// Its port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// A client connection to it.
    pub(crate) fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }

    fn wait_until_it_answers(&mut self) {
        let client = redis::Client::open(self.url()).unwrap();
        let start = Instant::now();
        loop {
            let pong = client
                .get_connection_with_timeout(Duration::from_millis(200))
                .and_then(|mut connection| redis::cmd("PING").query::<String>(&mut connection));
            match pong {
                Ok(_) => return,
                Err(error) => {
                    if let Ok(Some(status)) = self.child.try_wait() {
                        panic!("redis-server on port {} exited ({status})", self.port);
                    }
                    assert!(
                        start.elapsed() < START_TIMEOUT,
                        "redis-server on port {} does not answer PING: {error}",
                        self.port
                    );
                    thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `redis://127.0.0.1:PORT`.
pub(crate) fn url_of(port: u16) -> String {
    format!("redis://127.0.0.1:{port}")
}

/// A loopback port nothing listens on (now).
pub(crate) fn free_port() -> u16 {
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
