//! The Redis client's sockets: TCP (each address of the host in turn) or
//! a Unix socket, plain or through TLS, connected by a deadline, and a
//! [`DeadlineSocket`] whose every read and write ends by the deadline of
//! the connect or of the request. Host names are resolved on a thread of
//! their own, so that a stuck resolver costs the connect timeout, not more.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use super::address::Endpoint;
use super::tls::TlsConfig;
use super::{Failed, MAX_CONNECT_PAUSE};

/// A socket whose every read and write ends by `deadline`: each gets the
/// time left as its timeout, and none starts once it has passed.
pub(super) struct DeadlineSocket {
    pub(super) socket: Socket,
    pub(super) deadline: Instant,
}

impl Read for DeadlineSocket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = time_left(self.deadline)?;
        self.socket.pass_on(self.deadline);
        self.socket.set_read_timeout(left)?;
        self.socket.read(buf).map_err(timeout_as_such)
    }
}

impl Write for DeadlineSocket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = time_left(self.deadline)?;
        self.socket.pass_on(self.deadline);
        self.socket.set_write_timeout(left)?;
        self.socket.write(buf).map_err(timeout_as_such)
    }

    fn flush(&mut self) -> io::Result<()> {
        // A TLS stream writes its pending records here.
        self.socket.pass_on(self.deadline);
        self.socket.flush().map_err(timeout_as_such)
    }
}

/// The time until `deadline`; a timeout error once it has passed.
pub(super) fn time_left(deadline: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|left| !left.is_zero())
        .ok_or_else(|| io::ErrorKind::TimedOut.into())
}

/// `timeout` from now (a timeout too long for an `Instant` is a year: as
/// good as none).
pub(super) fn deadline_after(timeout: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(365 * 24 * 3600))
}

/// A socket timeout reads as `WouldBlock` (`EAGAIN`) on Unix: `TimedOut`,
/// to the callers.
fn timeout_as_such(error: io::Error) -> io::Error {
    match error.kind() {
        io::ErrorKind::WouldBlock => io::ErrorKind::TimedOut.into(),
        _ => error,
    }
}

/// A connected socket: TCP, Unix, or TLS over TCP.
pub(super) enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// The TCP socket underneath has a deadline of its own, passed on from
    /// the [`DeadlineSocket`] above before each read and write
    /// ([`pass_on`](Self::pass_on)): every read and write of a TLS record
    /// gets the time left.
    #[cfg(feature = "remote-tls")]
    Tls(Box<super::tls::TlsStream>),
}

impl Socket {
    /// A connection to `endpoint`, made by `deadline`, a host name resolved
    /// by `resolver` (see [`resolve`]); through TLS, handshake included,
    /// with `tls`.
    pub(super) fn connect(
        endpoint: &Endpoint,
        tls: Option<&TlsConfig>,
        deadline: Instant,
        resolver: Resolver,
    ) -> Result<Socket, Failed> {
        let failed = |step| {
            move |error: io::Error| Failed {
                step,
                error: error.into(),
            }
        };
        match endpoint {
            Endpoint::Tcp { host, port } => {
                let addresses =
                    resolve(host, *port, deadline, resolver).map_err(failed("resolve"))?;
                let socket =
                    Self::connect_tcp(host, &addresses, deadline).map_err(failed("connect"))?;
                match tls {
                    None => Ok(socket),
                    Some(tls) => tls
                        .handshake(host, DeadlineSocket { socket, deadline })
                        .map_err(failed("TLS handshake")),
                }
            }
            Endpoint::Unix(path) => connect_unix(path, deadline)
                .map(Socket::Unix)
                .map_err(failed("connect")),
        }
    }

    /// A TCP connection to the first of `addresses` (those of `host`) that
    /// answers, by `deadline`.
    fn connect_tcp(host: &str, addresses: &[SocketAddr], deadline: Instant) -> io::Result<Socket> {
        let mut last_error = None;
        for address in addresses {
            match TcpStream::connect_timeout(address, time_left(deadline)?) {
                Ok(stream) => {
                    // A command's last piece goes out at once.
                    stream.set_nodelay(true)?;
                    return Ok(Socket::Tcp(stream));
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, format!("`{host}` has no address"))
        }))
    }

    fn set_read_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.set_read_timeout(Some(timeout)),
            Socket::Unix(socket) => socket.set_read_timeout(Some(timeout)),
            // Set by the socket underneath, per read.
            #[cfg(feature = "remote-tls")]
            Socket::Tls(_) => Ok(()),
        }
    }

    fn set_write_timeout(&self, timeout: Duration) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.set_write_timeout(Some(timeout)),
            Socket::Unix(socket) => socket.set_write_timeout(Some(timeout)),
            // Set by the socket underneath, per write.
            #[cfg(feature = "remote-tls")]
            Socket::Tls(_) => Ok(()),
        }
    }

    /// Gives the socket under a TLS stream `deadline` (nothing to do for
    /// a plain one).
    #[cfg_attr(
        not(feature = "remote-tls"),
        allow(unused_variables, reason = "only a TLS stream takes it")
    )]
    fn pass_on(&mut self, deadline: Instant) {
        match self {
            Socket::Tcp(_) | Socket::Unix(_) => {}
            #[cfg(feature = "remote-tls")]
            Socket::Tls(stream) => stream.sock.deadline = deadline,
        }
    }
}

/// What resolves a host name and port to socket addresses: the system's
/// resolver ([`system_resolver`]), or a test's.
pub(super) type Resolver = fn(&str, u16) -> io::Result<Vec<SocketAddr>>;

/// The system's resolver (`getaddrinfo`), which has timeouts of its own
/// (seconds per server and try, from `/etc/resolv.conf`), none of them
/// ours.
pub(super) fn system_resolver(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// The addresses of `host` (a name or an IP literal) at `port`, by
/// `deadline`. An IP literal is its own address; a name is resolved by
/// `resolver` on a helper thread, waited for until `deadline` and then
/// given up (a timeout error): the thread, if it outlives the wait, holds
/// nothing but its answer's end of a channel, and ends when the resolver
/// returns (its answer dropped).
pub(super) fn resolve(
    host: &str,
    port: u16,
    deadline: Instant,
    resolver: Resolver,
) -> io::Result<Vec<SocketAddr>> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let wait = time_left(deadline)?;
    // Room for the answer: the helper never blocks on sending it.
    let (answer, answered) = mpsc::sync_channel(1);
    let name = host.to_owned();
    thread::Builder::new()
        .name("sheaf-jit-resolve".to_owned())
        .spawn(move || {
            // Nobody waits any more once the deadline passed: dropped.
            let _ = answer.send(resolver(&name, port));
        })?;
    match answered.recv_timeout(wait) {
        Ok(addresses) => addresses,
        Err(RecvTimeoutError::Timeout) => Err(io::ErrorKind::TimedOut.into()),
        Err(RecvTimeoutError::Disconnected) => Err(io::Error::other(format!(
            "the resolver of `{host}` ended without an answer"
        ))),
    }
}

/// A Unix connection to the socket at `path`, by `deadline`: a
/// non-blocking connect, tried again after a pause (1 ms, doubling up to
/// [`MAX_CONNECT_PAUSE`], never past `deadline`) while the server's listen
/// backlog is full, then made blocking (each read and write has its own
/// timeout).
fn connect_unix(path: &Path, deadline: Instant) -> io::Result<UnixStream> {
    use rustix::io::Errno;
    use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

    let address = SocketAddrUnix::new(path)?;
    // Linux sets both flags as it creates the socket.
    #[cfg(not(target_vendor = "apple"))]
    let socket = rustix::net::socket_with(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        None,
    )?;
    // Apple's `socket` takes no flags: they are set right after, as std's
    // own sockets do there (a fork and exec on another thread in between
    // would inherit the descriptor).
    #[cfg(target_vendor = "apple")]
    let socket = {
        let socket = rustix::net::socket_with(
            AddressFamily::UNIX,
            SocketType::STREAM,
            SocketFlags::empty(),
            None,
        )?;
        rustix::io::fcntl_setfd(&socket, rustix::io::FdFlags::CLOEXEC)?;
        rustix::io::ioctl_fionbio(&socket, true)?;
        socket
    };
    let mut pause = Duration::from_millis(1);
    loop {
        match rustix::net::connect(&socket, &address) {
            // `EISCONN`: a connect in progress (below) completed.
            Ok(()) | Err(Errno::ISCONN) => break,
            Err(Errno::INTR) => {}
            // The backlog is full (`EAGAIN`), or, where a system makes Unix
            // connects wait, one is in progress: try again after a pause.
            Err(Errno::AGAIN | Errno::INPROGRESS | Errno::ALREADY) => {
                thread::sleep(pause.min(time_left(deadline)?));
                pause = (pause * 2).min(MAX_CONNECT_PAUSE);
            }
            Err(error) => return Err(error.into()),
        }
    }
    let stream = UnixStream::from(socket);
    stream.set_nonblocking(false)?;
    Ok(stream)
}

impl Read for Socket {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(socket) => socket.read(buf),
            Socket::Unix(socket) => socket.read(buf),
            #[cfg(feature = "remote-tls")]
            Socket::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for Socket {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(socket) => socket.write(buf),
            Socket::Unix(socket) => socket.write(buf),
            #[cfg(feature = "remote-tls")]
            Socket::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Socket::Tcp(socket) => socket.flush(),
            Socket::Unix(socket) => socket.flush(),
            #[cfg(feature = "remote-tls")]
            Socket::Tls(stream) => stream.flush(),
        }
    }
}
