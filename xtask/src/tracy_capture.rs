//! The end of `cargo xtask test`'s tracing check: a program built on a
//! Tracy tracing runtime is run, and this side connects to it the way
//! Tracy's profiler does, so that the check sees the client in the runtime
//! accept a Tracy 0.11.1 profiler and stream its trace.
//!
//! Tracy's handshake (`common/TracyProtocol.hpp`, `Profiler::Worker` in
//! `client/TracyProfiler.cpp` of the pinned tracy-client-sys): the profiler
//! sends `TracyPrf` and its protocol version (a little-endian `u32`); the
//! client answers one status byte (1, welcome; 2, protocol mismatch), then
//! its welcome message and LZ4 frames of events. The program runs with
//! `TRACY_NO_EXIT=1`, so it waits, once its `main` is done, for a profiler
//! to take its events; it is ended once they have come.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Tracy 0.11.1's protocol version (`tracy::ProtocolVersion`).
const PROTOCOL_VERSION: u32 = 69;

/// The status byte of an accepted handshake (`HandshakeWelcome`).
const WELCOME: u8 = 1;

/// Bytes after the status that show events streamed: more than the
/// welcome message (`WelcomeMessage`, about 1.2 KiB) alone.
const STREAMED: usize = 4096;

/// The start of the program's last line (iree-safe's `load_call_drop`).
const LAST_LINE: &str = "local-task: ";

/// How long the program and its client get, at each stage.
const PATIENCE: Duration = Duration::from_secs(60);

/// Runs `program` (which prints lines, the last starting with `LAST_LINE`) with
/// Tracy's client on a free port, connects as a profiler once it has
/// printed them, and returns how many trace bytes came. The program is
/// ended in every case.
pub(crate) fn capture(program: &Path) -> Result<usize> {
    let port = free_port()?;
    let mut child = Command::new(program)
        .env("TRACY_NO_EXIT", "1")
        .env("TRACY_PORT", port.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {}", program.display()))?;
    let result = talk(&mut child, port);
    // The program waits for a profiler forever (TRACY_NO_EXIT); end it.
    let _ = child.kill();
    let _ = child.wait();
    result
}

/// Reads the program's output to its end (its `main` has returned), then
/// handshakes and reads the trace.
fn talk(child: &mut Child, port: u16) -> Result<usize> {
    let stdout = child.stdout.take().context("the program has no stdout")?;
    let mut done = false;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("cannot read the program's stdout")?;
        eprintln!("[xtask]   {line}");
        // Its main is done when the last driver's line is out; stdout
        // stays open while the client waits (TRACY_NO_EXIT).
        if line.starts_with(LAST_LINE) {
            done = true;
            break;
        }
    }
    if !done {
        let status = child.wait().context("cannot wait for the program")?;
        bail!("the program ended ({status}) before printing its `{LAST_LINE}` line");
    }
    if let Some(status) = child.try_wait().context("cannot poll the program")? {
        bail!(
            "the program ended ({status}) instead of waiting for a profiler with \
             TRACY_NO_EXIT=1: is Tracy's client in the runtime it linked?"
        );
    }
    let mut socket = connect(port)?;
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .context("cannot set a read timeout")?;
    let mut hello = b"TracyPrf".to_vec();
    hello.extend_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    socket
        .write_all(&hello)
        .context("cannot send Tracy's handshake")?;
    let mut status = [0u8];
    socket
        .read_exact(&mut status)
        .context("Tracy's client answered no handshake status")?;
    if status[0] != WELCOME {
        bail!(
            "Tracy's client refused a protocol {PROTOCOL_VERSION} (Tracy 0.11.1) profiler \
             with status {} (2: protocol mismatch): the runtime's Tracy is another release",
            status[0]
        );
    }
    let mut received = 0;
    let mut buffer = [0u8; 64 * 1024];
    while received <= STREAMED {
        match socket.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(count) => received += count,
        }
    }
    if received <= STREAMED {
        bail!("Tracy's client welcomed the profiler but sent only {received} bytes of trace");
    }
    Ok(received)
}

/// A TCP port free on this machine now.
fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("cannot find a free port")?;
    Ok(listener
        .local_addr()
        .context("a bound socket has no address")?
        .port())
}

/// Connects to Tracy's client on `port`, retrying while it starts listening.
fn connect(port: u16) -> Result<TcpStream> {
    let started = Instant::now();
    loop {
        match TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
            Ok(socket) => return Ok(socket),
            Err(error) if started.elapsed() > PATIENCE => {
                return Err(error).with_context(|| {
                    format!("no Tracy client listened on port {port} within {PATIENCE:?}")
                })
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
