//! The Redis protocol (RESP2) as [`RedisStore`](super::RedisStore) speaks
//! it: commands out, and replies read within bounds fixed before the first
//! byte arrives, whatever the server sends.
//!
//! A command is an array of bulk strings (`*2\r\n$6\r\nSTRLEN\r\n$1\r\nk\r\n`).
//! A reply starts with a type byte, and each reader accepts only what its
//! command can answer: an integer (`:`) for `STRLEN` and `EVAL` (the lease
//! scripts answer 0 or 1), a bulk string (`$`; `$-1` for none) for
//! `GETRANGE` and `GET`, `+OK` for `SET`, `AUTH` and `SELECT`, `+OK` or `$-1` for
//! `SET ... NX` (a lease), and an error (`-`) from any of them
//! ([`ReplyError::Server`]). Anything else
//! (an array, a RESP3 map or push, ...) is a [protocol
//! violation](ReplyError::Protocol), reported without reading further.
//!
//! What a reply can make the client hold is bounded:
//! - a header line (`:5`, `$123`, `+OK`) is at most [`MAX_HEADER_LINE`]
//!   bytes, an error line at most [`MAX_ERROR_LINE`]: a line that goes on is
//!   a violation once it passes the limit, not a growing buffer;
//! - a bulk string longer than the caller's bound is refused from its
//!   header, before anything is allocated for it; one within the bound is
//!   allocated once, at its declared length (`try_reserve_exact`);
//! - the readers read through a `BufRead` (a fixed-capacity `BufReader` on
//!   the socket), so the most held for a reply is that buffer and the bound.

use std::io::{self, BufRead, Read, Write};

/// The longest header line accepted after its type byte, CR LF included:
/// an integer (20 characters at most), a bulk string's length, `OK`.
pub const MAX_HEADER_LINE: u64 = 32;

/// The longest error line accepted after its `-`, CR LF included (Redis's
/// errors are a word and a sentence).
pub const MAX_ERROR_LINE: u64 = 4096;

/// Why a reply was not accepted.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyError {
    /// Reading or writing failed, or timed out
    /// ([`io::ErrorKind::TimedOut`]).
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The server closed the connection before its reply was complete.
    #[error("the connection closed mid-reply")]
    Closed,
    /// The server answered with an error (`-ERR ...`): its message, with
    /// control characters escaped.
    #[error("the error `{0}`")]
    Server(String),
    /// The reply is not one the command can have, or breaks RESP2: what was
    /// wrong.
    #[error("{0}")]
    Protocol(String),
}

/// Writes the command `name args...` to `out` (an array of bulk strings).
pub(crate) fn write_command(out: &mut impl Write, name: &str, args: &[&[u8]]) -> io::Result<()> {
    write!(out, "*{}\r\n", 1 + args.len())?;
    for arg in std::iter::once(name.as_bytes()).chain(args.iter().copied()) {
        write!(out, "${}\r\n", arg.len())?;
        out.write_all(arg)?;
        out.write_all(b"\r\n")?;
    }
    Ok(())
}

/// Reads the answer to `STRLEN`: a length (a non-negative integer).
///
/// # Errors
///
/// [`ReplyError::Io`] and [`ReplyError::Closed`] when the reply cannot be
/// read whole, [`ReplyError::Server`] for an error reply, and
/// [`ReplyError::Protocol`] for anything else.
pub fn read_length(reader: &mut impl BufRead) -> Result<u64, ReplyError> {
    let length = parse_integer(&read_header(reader, b':')?)?;
    u64::try_from(length).map_err(|_| protocol(format!("a negative length ({length})")))
}

/// Reads the answer to `GETRANGE`: a bulk string of at most `max_len` bytes,
/// or `None` (`$-1`). A longer one is a violation, refused from its header.
///
/// # Errors
///
/// As [`read_length`].
pub fn read_bulk(reader: &mut impl BufRead, max_len: u64) -> Result<Option<Vec<u8>>, ReplyError> {
    let len = match parse_integer(&read_header(reader, b'$')?)? {
        -1 => return Ok(None),
        len => u64::try_from(len)
            .map_err(|_| protocol(format!("a bulk string of negative length ({len})")))?,
    };
    if len > max_len {
        return Err(protocol(format!(
            "a bulk string of {len} bytes where at most {max_len} were asked for"
        )));
    }
    let mut bytes = allocate(len)?;
    read_exact(reader, &mut bytes)?;
    let mut end = [0; 2];
    read_exact(reader, &mut end)?;
    if end != *b"\r\n" {
        return Err(protocol(format!(
            "a bulk string longer than its declared {len} bytes"
        )));
    }
    Ok(Some(bytes))
}

/// Reads the answer to `SET`, `AUTH` or `SELECT`: `+OK`.
///
/// # Errors
///
/// As [`read_length`].
pub fn read_ok(reader: &mut impl BufRead) -> Result<(), ReplyError> {
    match read_header(reader, b'+')? {
        ok if ok == b"OK" => Ok(()),
        other => Err(protocol(format!(
            "`+{}` where `+OK` was expected",
            printable(&other)
        ))),
    }
}

/// Reads the answer to `SET ... NX`: `+OK` when it set the value (true),
/// the null bulk string `$-1` when the key existed (false).
///
/// # Errors
///
/// As [`read_length`]; a bulk string that is not null is a violation.
pub fn read_ok_or_nil(reader: &mut impl BufRead) -> Result<bool, ReplyError> {
    let first = reader.fill_buf()?.first().copied();
    match first {
        Some(b'$') => match read_bulk(reader, 0)? {
            None => Ok(false),
            Some(_) => Err(protocol(
                "an empty bulk string where `+OK` or `$-1` was expected".to_owned(),
            )),
        },
        _ => read_ok(reader).map(|()| true),
    }
}

/// Reads a reply's type byte, which must be `expected` or an error's (`-`),
/// and the rest of its line (without CR LF). An error reply becomes
/// [`ReplyError::Server`].
fn read_header(reader: &mut impl BufRead, expected: u8) -> Result<Vec<u8>, ReplyError> {
    let mut kind = [0];
    read_exact(reader, &mut kind)?;
    match kind[0] {
        b'-' => {
            let message = read_line(reader, MAX_ERROR_LINE)?;
            Err(ReplyError::Server(printable(&message)))
        }
        kind if kind == expected => read_line(reader, MAX_HEADER_LINE),
        kind => Err(protocol(format!(
            "{} where {} was expected",
            describe(kind),
            describe(expected)
        ))),
    }
}

/// Reads the rest of a line: at most `limit` bytes, CR LF included; the line
/// without CR LF.
fn read_line(reader: &mut impl BufRead, limit: u64) -> Result<Vec<u8>, ReplyError> {
    let mut line = Vec::new();
    reader.by_ref().take(limit).read_until(b'\n', &mut line)?;
    if line.ends_with(b"\r\n") {
        line.truncate(line.len() - 2);
        Ok(line)
    } else if line.ends_with(b"\n") {
        Err(protocol("a line that ends in LF without CR".to_owned()))
    } else if line.len() as u64 == limit {
        Err(protocol(format!(
            "a line longer than {limit} bytes (the limit for this kind of reply)"
        )))
    } else {
        Err(ReplyError::Closed)
    }
}

/// The integer on a header line.
fn parse_integer(line: &[u8]) -> Result<i64, ReplyError> {
    std::str::from_utf8(line)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| {
            protocol(format!(
                "`{}` where an integer was expected",
                printable(line)
            ))
        })
}

/// A zeroed buffer of `len` bytes (a length already within the caller's
/// bound), allocated at once and at that size.
fn allocate(len: u64) -> Result<Vec<u8>, ReplyError> {
    let out_of_memory = || {
        ReplyError::Io(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("no memory for a value of {len} bytes"),
        ))
    };
    let len = usize::try_from(len).map_err(|_| out_of_memory())?;
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len).map_err(|_| out_of_memory())?;
    bytes.resize(len, 0);
    Ok(bytes)
}

/// `read_exact`, the end of the stream being [`ReplyError::Closed`].
fn read_exact(reader: &mut impl Read, buf: &mut [u8]) -> Result<(), ReplyError> {
    reader.read_exact(buf).map_err(|error| match error.kind() {
        io::ErrorKind::UnexpectedEof => ReplyError::Closed,
        _ => ReplyError::Io(error),
    })
}

fn protocol(violation: String) -> ReplyError {
    ReplyError::Protocol(violation)
}

/// `bytes` from the server as text for a message: invalid UTF-8 replaced,
/// control characters escaped.
fn printable(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).escape_debug().to_string()
}

/// What a reply starting with `kind` is, for messages.
fn describe(kind: u8) -> String {
    let name = match kind {
        b'+' => "a simple string",
        b'-' => "an error",
        b':' => "an integer",
        b'$' => "a bulk string",
        b'*' => "an array",
        b'_' => "a RESP3 null",
        b'#' => "a RESP3 boolean",
        b',' => "a RESP3 double",
        b'(' => "a RESP3 big number",
        b'!' => "a RESP3 bulk error",
        b'=' => "a RESP3 verbatim string",
        b'%' => "a RESP3 map",
        b'~' => "a RESP3 set",
        b'|' => "a RESP3 attribute",
        b'>' => "a RESP3 push",
        _ => return format!("`{}`, which starts no reply", kind.escape_ascii()),
    };
    format!("{name} (`{}`)", char::from(kind))
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    fn length(reply: &[u8]) -> Result<u64, ReplyError> {
        read_length(&mut &reply[..])
    }

    fn bulk(reply: &[u8], max_len: u64) -> Result<Option<Vec<u8>>, ReplyError> {
        read_bulk(&mut &reply[..], max_len)
    }

    #[test]
    fn set_nx_answers_ok_or_null() {
        assert!(read_ok_or_nil(&mut &b"+OK\r\n"[..]).unwrap());
        assert!(!read_ok_or_nil(&mut &b"$-1\r\n"[..]).unwrap());
        for other in [&b"$0\r\n\r\n"[..], b"$3\r\nabc\r\n", b":1\r\n", b"*1\r\n"] {
            let error = read_ok_or_nil(&mut &other[..]).unwrap_err();
            assert!(matches!(error, ReplyError::Protocol(_)), "{error}");
        }
        let error = read_ok_or_nil(&mut &b"-ERR no\r\n"[..]).unwrap_err();
        assert!(matches!(error, ReplyError::Server(_)), "{error}");
        let error = read_ok_or_nil(&mut &b""[..]).unwrap_err();
        assert!(matches!(error, ReplyError::Closed), "{error}");
    }

    fn ok(reply: &[u8]) -> Result<(), ReplyError> {
        read_ok(&mut &reply[..])
    }

    /// The violation's message; panics on any other outcome.
    fn violation<T: std::fmt::Debug>(result: Result<T, ReplyError>) -> String {
        match result {
            Err(ReplyError::Protocol(violation)) => violation,
            other => panic!("expected a protocol violation, got {other:?}"),
        }
    }

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        let mut out = Vec::new();
        write_command(&mut out, "GETRANGE", &[b"k\r\n", b"0", b"9"]).unwrap();
        assert_eq!(
            out,
            b"*4\r\n$8\r\nGETRANGE\r\n$3\r\nk\r\n\r\n$1\r\n0\r\n$1\r\n9\r\n"
        );
        out.clear();
        write_command(&mut out, "SET", &[b"k", b""]).unwrap();
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    }

    #[test]
    fn each_reader_accepts_its_commands_answers() {
        assert_eq!(length(b":0\r\n").unwrap(), 0);
        assert_eq!(length(b":3221225472\r\n").unwrap(), 3_221_225_472);
        assert_eq!(bulk(b"$5\r\nhe\r\no\r\n", 5).unwrap().unwrap(), b"he\r\no");
        assert_eq!(bulk(b"$0\r\n\r\n", 5).unwrap().unwrap(), b"");
        assert_eq!(bulk(b"$-1\r\n", 5).unwrap(), None);
        ok(b"+OK\r\n").unwrap();
    }

    #[test]
    fn a_reply_ends_where_it_says_and_leaves_the_rest_unread() {
        let mut replies = &b":5\r\n$2\r\nab\r\n+OK\r\n:"[..];
        assert_eq!(read_length(&mut replies).unwrap(), 5);
        assert_eq!(read_bulk(&mut replies, 2).unwrap().unwrap(), b"ab");
        read_ok(&mut replies).unwrap();
        assert_eq!(replies, b":");
    }

    #[test]
    fn lines_and_values_may_straddle_buffer_refills() {
        let reply = b"$11\r\nhello world\r\n";
        for capacity in 1..reply.len() {
            let mut reader = BufReader::with_capacity(capacity, &reply[..]);
            let value = read_bulk(&mut reader, 11).unwrap().unwrap();
            assert_eq!(value, b"hello world", "capacity {capacity}");
        }
    }

    #[test]
    fn a_bulk_string_over_the_bound_is_refused_from_its_header() {
        // Only the header is there: reading more would be a closed
        // connection, not a violation.
        let message = violation(bulk(b"$3221225472\r\n", 1024));
        assert!(message.contains("3221225472") && message.contains("1024"));
        let message = violation(bulk(b"$6\r\nabcdef\r\n", 5));
        assert!(message.contains("at most 5"), "{message}");
        violation(bulk(b"$-2\r\n", 5));
        violation(bulk(b"$99999999999999999999999\r\n", 5));
        let longer = violation(bulk(b"$2\r\nabc\r\n", 5));
        assert!(longer.contains("longer than its declared 2"), "{longer}");
    }

    #[test]
    fn replies_of_another_type_are_refused_at_their_first_byte() {
        for reply in [
            &b"*1000000000\r\n*1\r\n*1\r\n"[..],
            b"%1\r\n",
            b">2\r\n",
            b"_\r\n",
            b"#t\r\n",
            b",1.5\r\n",
            b"(1\r\n",
            b"!3\r\nerr\r\n",
            b"=7\r\ntxt:abc\r\n",
            b"~1\r\n",
            b"|1\r\n",
            b"\0",
            b"$1\r\n5\r\n",
        ] {
            let message = violation(length(reply));
            assert!(message.ends_with("where an integer (`:`) was expected"));
        }
        assert!(violation(length(b"*1\r\n")).starts_with("an array (`*`)"));
        assert!(violation(length(b"\x07")).starts_with("`\\x07`, which starts no reply"));
        violation(bulk(b":5\r\n", 5));
        violation(ok(b":1\r\n"));
        violation(ok(b"$2\r\nOK\r\n"));
        assert!(violation(ok(b"+QUEUED\r\n")).contains("`+QUEUED`"));
    }

    #[test]
    fn an_error_reply_is_the_servers_message_escaped() {
        for result in [
            length(b"-ERR wrong\x1b[31m\r\n").map(drop),
            bulk(b"-ERR wrong\x1b[31m\r\n", 5).map(drop),
            ok(b"-ERR wrong\x1b[31m\r\n"),
        ] {
            match result {
                Err(ReplyError::Server(message)) => {
                    assert_eq!(message, "ERR wrong\\u{1b}[31m");
                }
                other => panic!("expected a server error, got {other:?}"),
            }
        }
    }

    #[test]
    fn lines_are_read_up_to_their_limit_and_no_further() {
        let endless = [&b"-ERR "[..], &[b'a'; 10_000]].concat();
        let mut reader = &endless[..];
        let message = violation(read_length(&mut reader));
        assert!(message.contains("longer than 4096 bytes"), "{message}");
        assert_eq!(endless.len() - reader.len(), 1 + 4096, "bytes consumed");

        let digits = [&b":"[..], &[b'1'; 100]].concat();
        let mut reader = &digits[..];
        let message = violation(read_length(&mut reader));
        assert!(message.contains("longer than 32 bytes"), "{message}");
        assert_eq!(digits.len() - reader.len(), 1 + 32, "bytes consumed");

        // A line of exactly the limit is accepted.
        let long = [&b"-"[..], &[b'e'; 4094], b"\r\n"].concat();
        assert!(matches!(length(&long), Err(ReplyError::Server(m)) if m.len() == 4094));
        violation(length(b":1\n"));
        violation(length(b":12a\r\n"));
        violation(length(b":-5\r\n"));
    }

    #[test]
    fn a_reply_cut_short_is_a_closed_connection() {
        let closed = |result: Result<(), ReplyError>| matches!(result, Err(ReplyError::Closed));
        assert!(closed(length(b"").map(drop)));
        assert!(closed(length(b":").map(drop)));
        assert!(closed(length(b":5\r").map(drop)));
        assert!(closed(bulk(b"$5\r\nab", 5).map(drop)));
        assert!(closed(bulk(b"$2\r\nab\r", 5).map(drop)));
        assert!(closed(ok(b"-ERR")));
    }
}
