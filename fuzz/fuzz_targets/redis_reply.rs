//! The Redis backend's reply reader on any bytes a server could send, as
//! the answer to each kind of command: it never panics, never returns a
//! bulk string over the bound asked for, never consumes more than a reply's
//! limits allow, and reads the same through a small buffer as straight from
//! the bytes.
#![no_main]

use std::fmt::Debug;
use std::io::{BufRead, BufReader};

use jit_store::redis_reply::{
    read_bulk, read_length, read_ok, read_ok_or_nil, ReplyError, MAX_ERROR_LINE, MAX_HEADER_LINE,
};
use libfuzzer_sys::fuzz_target;

/// The bound on `GETRANGE`'s answer.
const MAX_BULK: u64 = 64;

/// A read buffer smaller than most replies: lines and values straddle its
/// refills, as they do on a socket.
const SMALL_BUFFER: usize = 3;

/// The most a reader may consume: a type byte and an error line, or a type
/// byte, a header line, a bulk string within the bound and its CR LF.
const MAX_CONSUMED: u64 = {
    let error = 1 + MAX_ERROR_LINE;
    let bulk = 1 + MAX_HEADER_LINE + MAX_BULK + 2;
    if error > bulk {
        error
    } else {
        bulk
    }
};

fuzz_target!(|reply: &[u8]| {
    let _ = check(reply, |mut reader| read_length(&mut reader));
    let _ = check(reply, |mut reader| read_ok(&mut reader));
    let _ = check(reply, |mut reader| read_ok_or_nil(&mut reader));
    if let Ok(Some(bulk)) = check(reply, |mut reader| read_bulk(&mut reader, MAX_BULK)) {
        assert!(bulk.len() as u64 <= MAX_BULK, "{} bytes", bulk.len());
    }
});

/// Reads `reply` with `read` straight from the bytes and through a small
/// buffer: the same outcome both ways, and no more consumed than a reply's
/// limits allow. The outcome.
fn check<T: Debug>(
    reply: &[u8],
    read: impl Fn(&mut dyn BufRead) -> Result<T, ReplyError>,
) -> Result<T, ReplyError> {
    let mut rest = reply;
    let direct = read(&mut rest);
    let consumed = (reply.len() - rest.len()) as u64;
    assert!(consumed <= MAX_CONSUMED, "{consumed} bytes consumed");
    let buffered = read(&mut BufReader::with_capacity(SMALL_BUFFER, reply));
    assert_eq!(format!("{direct:?}"), format!("{buffered:?}"));
    direct
}
