//! A `redis-server` of the soak's own: started on a free loopback port with
//! a temporary folder and no persistence, waited for until it answers
//! `PING`, killed when dropped.

use anyhow::{bail, Context as _};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Overrides the `redis-server` binary (as for the tests).
const SERVER_ENV: &str = "SHEAF_JIT_TEST_REDIS_SERVER";

/// How long the server may take to answer its first `PING`.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `redis-server`, killed on drop.
pub(crate) struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    /// Starts one whose files go in `dir`.
    pub(crate) fn start(dir: &Path) -> anyhow::Result<RedisServer> {
        let binary = std::env::var_os(SERVER_ENV)
            .filter(|path| !path.is_empty())
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .context("no free loopback port")?
            .port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(dir)
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start {} (run `cargo xtask soak`, which installs Debian's \
                     redis-server, or set {SERVER_ENV})",
                    binary.display()
                )
            })?;
        let mut server = RedisServer { child, port };
        server.wait_until_it_answers()?;
        Ok(server)
    }

    /// Its address, `redis://127.0.0.1:PORT`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn wait_until_it_answers(&mut self) -> anyhow::Result<()> {
        let start = Instant::now();
        while !self.pong() {
            if let Ok(Some(status)) = self.child.try_wait() {
                bail!("redis-server exited ({status})");
            }
            if start.elapsed() > START_TIMEOUT {
                bail!("redis-server on port {} does not answer PING", self.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    fn pong(&self) -> bool {
        let timeout = Duration::from_millis(200);
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let mut reply = [0u8; 7];
        stream.set_read_timeout(Some(timeout)).is_ok()
            && stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
