//! Addresses refused before connecting, deadlines, and host-name
//! resolution bounded by the connect timeout (the wire itself is tested in
//! `tests/remote_wire.rs`).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;

use super::address::Endpoint;
use super::socket::{resolve, time_left};
use super::*;

#[test]
fn bad_addresses_are_refused_without_connecting() {
    let refused = |url: &str| match RedisStore::new(url, RemoteTimeouts::default()) {
        Err(error @ RemoteError::Address { .. }) => error.to_string(),
        other => panic!("{url}: expected an address error, got {other:?}"),
    };
    assert!(refused("http://cache").contains("redis://"));
    // Nothing listens there; nothing is tried yet.
    let store = RedisStore::new("redis://127.0.0.1:1", RemoteTimeouts::default()).unwrap();
    assert!(format!("{store:?}").contains("127.0.0.1:1"));
}

#[test]
fn a_deadline_that_passed_fails_at_once() {
    let passed = Instant::now();
    let error = time_left(passed).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
    assert!(time_left(deadline_after(Duration::from_secs(60))).is_ok());
    // Too far for an `Instant`: no panic.
    assert!(deadline_after(Duration::MAX) > passed);
}

/// A resolver that never answers in a test's time.
fn stuck(_: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
    thread::sleep(Duration::from_secs(3600));
    Ok(Vec::new())
}

/// What `work` returned, on a thread of its own, if it returned within
/// 5 s (loosely: the timeouts it is given are 200 ms); else it is left
/// behind.
fn within_5s<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, returned) = mpsc::channel();
    thread::spawn(move || done.send(work()));
    returned.recv_timeout(Duration::from_secs(5)).ok()
}

#[test]
#[cfg_attr(miri, ignore)] // threads that outlive the test
fn a_resolver_that_never_answers_fails_the_connect_at_its_deadline() {
    let timeout = Duration::from_millis(200);
    let error = within_5s(move || {
        resolve("cache.invalid", 6379, deadline_after(timeout), stuck).unwrap_err()
    })
    .expect("the resolution was given up at its deadline");
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);

    // Through a connect: the step says what timed out.
    let failed = within_5s(move || {
        let endpoint = Endpoint::Tcp {
            host: "cache.invalid".to_owned(),
            port: 6379,
        };
        match Socket::connect(&endpoint, None, deadline_after(timeout), stuck) {
            Ok(_) => panic!("connected through a resolver that never answers"),
            Err(failed) => failed,
        }
    })
    .expect("the connect was given up at its deadline");
    assert_eq!(failed.step, "resolve");
    assert!(
        matches!(&failed.error, ReplyError::Io(e) if e.kind() == io::ErrorKind::TimedOut),
        "{:?}",
        failed.error
    );
}

#[test]
#[cfg_attr(miri, ignore)] // threads
fn ip_literals_skip_the_resolver_and_its_answers_and_errors_come_back() {
    fn unreachable(host: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        panic!("`{host}` was resolved")
    }
    fn fixed(_: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
    }
    fn failing(host: &str, _: u16) -> io::Result<Vec<SocketAddr>> {
        Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no `{host}`"),
        ))
    }
    let deadline = deadline_after(Duration::from_secs(60));
    for (host, address) in [("127.0.0.1", "127.0.0.1:6379"), ("::1", "[::1]:6379")] {
        let resolved = resolve(host, 6379, deadline, unreachable).unwrap();
        assert_eq!(resolved, [address.parse().unwrap()]);
    }
    let resolved = resolve("cache", 7000, deadline, fixed).unwrap();
    assert_eq!(resolved, [SocketAddr::from(([127, 0, 0, 1], 7000))]);
    let error = resolve("cache", 7000, deadline, failing).unwrap_err();
    assert_eq!(
        (error.kind(), error.to_string()),
        (io::ErrorKind::NotFound, "no `cache`".to_owned())
    );
    // A deadline that passed: not even started.
    let passed = Instant::now();
    let error = resolve("cache", 7000, passed, unreachable).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::TimedOut);
}
