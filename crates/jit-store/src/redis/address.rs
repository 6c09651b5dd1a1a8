//! A Redis server's address, from a URL: `redis://[user:password@]host[:port][/db]`,
//! `rediss://...` (the same over TLS, with the `remote-tls` feature) or
//! `redis+unix:///path/to/socket[?db=N&user=USER&pass=PASSWORD]`
//! (`valkey` for `redis`, `valkeys` for `rediss` and `unix` for
//! `redis+unix` are accepted too); and the URL with its password hidden,
//! for messages.
//!
//! User, password and socket path are percent-decoded (`%40` for `@`);
//! `rediss://` in a build without `remote-tls` is refused, naming the
//! feature.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The port of a `redis://` address that names none.
const DEFAULT_PORT: u16 = 6379;

/// The forms accepted, for messages.
const FORMS: &str = "expected `redis://[user:password@]host[:port][/db]`, `rediss://...` \
                     (TLS) or `redis+unix:///path/to/socket[?db=N&pass=PASSWORD]`";

/// Where the server is, and what to send after connecting.
pub(super) struct Address {
    pub(super) endpoint: Endpoint,
    /// For `AUTH`, when the address names a password.
    pub(super) login: Option<Login>,
    /// For `SELECT`, when not 0.
    pub(super) database: u64,
    /// Whether the connection is TLS (`rediss://`; TCP only).
    pub(super) tls: bool,
}

/// Where the server listens.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Endpoint {
    Tcp { host: String, port: u16 },
    Unix(PathBuf),
}

/// `AUTH [user] password`.
pub(super) struct Login {
    /// `None`: Redis's default user.
    pub(super) user: Option<Vec<u8>>,
    pub(super) password: Vec<u8>,
}

impl Address {
    /// The address `url` names; what is wrong with it otherwise, without
    /// its password.
    pub(super) fn parse(url: &str) -> Result<Address, String> {
        Self::parse_in_a_build(url, cfg!(feature = "remote-tls"))
    }

    /// [`parse`](Self::parse) in a build with TLS (`remote-tls`) or without.
    fn parse_in_a_build(url: &str, with_tls: bool) -> Result<Address, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| format!("not a URL; {FORMS}"))?;
        match scheme {
            "redis" | "valkey" => Self::tcp(rest, false),
            "rediss" | "valkeys" if with_tls => Self::tcp(rest, true),
            "rediss" | "valkeys" => Err(
                "TLS (`rediss://`) needs jit-cache's `remote-tls` feature (sheaf-integration's \
                 `remote-cache-tls`), which this build leaves out; build with it, or use \
                 `redis://` on a network you trust"
                    .to_owned(),
            ),
            "redis+unix" | "valkey+unix" | "unix" => Self::unix(rest),
            _ => Err(format!("unknown scheme `{scheme}`; {FORMS}")),
        }
    }

    /// `[user:password@]host[:port][/db]`. The user information ends at
    /// the last `@`, as in [`redacted`].
    fn tcp(rest: &str, tls: bool) -> Result<Address, String> {
        let (user_info, location) = match rest.rsplit_once('@') {
            Some((user_info, location)) => (Some(user_info), location),
            None => (None, rest),
        };
        if location.contains(['?', '#']) {
            return Err(format!(
                "`{location}`: a `redis://` address takes no `?` parameters or `#` fragment \
                 (percent-encode them in a password: `%3F`, `%23`); {FORMS}"
            ));
        }
        let (host_port, path) = location.split_at(location.find('/').unwrap_or(location.len()));
        let login = match user_info {
            None => None,
            Some(user_info) => {
                let Some((user, password)) = user_info.split_once(':') else {
                    return Err(format!(
                        "a user without a password; write `redis://user:password@host` (or \
                         `redis://:password@host` for the default user); {FORMS}"
                    ));
                };
                Some(Login {
                    user: Some(decoded(user, "the user")?).filter(|user| !user.is_empty()),
                    password: decoded(password, "the password")?,
                })
            }
        };
        Ok(Address {
            endpoint: host_and_port(host_port)?,
            login,
            database: database(path.trim_matches('/'))?,
            tls,
        })
    }

    /// `/path/to/socket[?db=N&user=USER&pass=PASSWORD]`.
    fn unix(rest: &str) -> Result<Address, String> {
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        if !path.starts_with('/') {
            return Err(format!(
                "the socket's path must be absolute (`redis+unix:///path/to/socket`); {FORMS}"
            ));
        }
        let (mut database_number, mut user, mut password) = (0, None, None);
        for parameter in query.split('&').filter(|parameter| !parameter.is_empty()) {
            let (name, value) = parameter.split_once('=').unwrap_or((parameter, ""));
            match name {
                "db" => database_number = database(value)?,
                "user" => user = Some(form_decoded(value, "the user")?),
                "pass" => password = Some(form_decoded(value, "the password")?),
                _ => {
                    return Err(format!(
                        "a parameter other than `db`, `user` and `pass`; {FORMS}"
                    ))
                }
            }
        }
        let login = match (user, password) {
            (user, Some(password)) => Some(Login { user, password }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(format!("a user without a password (add `pass=`); {FORMS}"))
            }
        };
        let path = OsString::from_vec(decoded(path, "the socket's path")?);
        Ok(Address {
            endpoint: Endpoint::Unix(path.into()),
            login,
            database: database_number,
            tls: false,
        })
    }
}

/// `host[:port]` or `[ipv6][:port]`.
fn host_and_port(text: &str) -> Result<Endpoint, String> {
    let (host, port) = match text.strip_prefix('[') {
        Some(bracketed) => bracketed
            .split_once(']')
            .ok_or_else(|| format!("`{text}`: an IPv6 address without its `]`; {FORMS}"))?,
        None => text.split_at(text.find(':').unwrap_or(text.len())),
    };
    if host.is_empty() {
        return Err(format!("no host; {FORMS}"));
    }
    let port = match port {
        "" => DEFAULT_PORT,
        port => port
            .strip_prefix(':')
            .and_then(|port| port.parse().ok())
            .filter(|&port| port != 0)
            .ok_or_else(|| {
                format!("`{port}`: expected `:` and a port number (1 to 65535); {FORMS}")
            })?,
    };
    Ok(Endpoint::Tcp {
        host: host.to_owned(),
        port,
    })
}

/// A database number (`""`: 0).
fn database(text: &str) -> Result<u64, String> {
    match text {
        "" => Ok(0),
        number => number
            .parse()
            .map_err(|_| format!("`{number}` is not a database number; {FORMS}")),
    }
}

/// `text` with its `%XX` escapes decoded; `what` names it in the error,
/// which never shows it.
fn decoded(text: &str, what: &str) -> Result<Vec<u8>, String> {
    percent_decoded(text, false).ok_or_else(|| bad_escape(what))
}

/// [`decoded`], for a query value: `+` is a space there.
fn form_decoded(text: &str, what: &str) -> Result<Vec<u8>, String> {
    percent_decoded(text, true).ok_or_else(|| bad_escape(what))
}

fn bad_escape(what: &str) -> String {
    format!("{what} has a `%` that is not followed by two hex digits (write `%25` for `%`)")
}

/// `text` with its `%XX` escapes decoded, and `+` as a space when
/// `plus_is_space`; `None` for a `%` without two hex digits.
fn percent_decoded(text: &str, plus_is_space: bool) -> Option<Vec<u8>> {
    let hex = |digit: Option<u8>| char::from(digit?).to_digit(16);
    let mut bytes = text.bytes();
    let mut decoded = Vec::with_capacity(text.len());
    while let Some(byte) = bytes.next() {
        decoded.push(match byte {
            b'%' => u8::try_from(hex(bytes.next())? << 4 | hex(bytes.next())?).ok()?,
            b'+' if plus_is_space => b' ',
            byte => byte,
        });
    }
    Some(decoded)
}

/// `url` with its password, if any, replaced by `***`: the user
/// information up to the last `@` of a network address, the `pass=`
/// parameter of a socket's.
pub(super) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    if rest.starts_with('/') {
        return match rest.split_once('?') {
            Some((path, query)) => format!("{scheme}://{path}?{}", without_pass(query)),
            None => url.to_owned(),
        };
    }
    match rest.rsplit_once('@') {
        Some((user_info, location)) => {
            let user = user_info.split_once(':').map_or("", |(user, _)| user);
            format!("{scheme}://{user}:***@{location}")
        }
        None => url.to_owned(),
    }
}

/// A query with the value of `pass` replaced by `***`.
fn without_pass(query: &str) -> String {
    query
        .split('&')
        .map(|parameter| {
            if parameter.starts_with("pass=") {
                "pass=***"
            } else {
                parameter
            }
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> Address {
        Address::parse(url).unwrap_or_else(|error| panic!("{url}: {error}"))
    }

    fn tcp(host: &str, port: u16) -> Endpoint {
        Endpoint::Tcp {
            host: host.to_owned(),
            port,
        }
    }

    /// The login as text: `user:password`, `:password` or `-`.
    fn login(address: &Address) -> String {
        address.login.as_ref().map_or("-".to_owned(), |login| {
            let user = login.user.as_deref().unwrap_or_default();
            format!(
                "{}:{}",
                String::from_utf8_lossy(user),
                String::from_utf8_lossy(&login.password)
            )
        })
    }

    #[test]
    fn network_addresses() {
        let plain = parsed("redis://cache");
        assert_eq!(plain.endpoint, tcp("cache", 6379));
        assert_eq!((login(&plain), plain.database), ("-".to_owned(), 0));

        let full = parsed("redis://me:p%40ss@cache:6380/3");
        assert_eq!(full.endpoint, tcp("cache", 6380));
        assert_eq!((login(&full), full.database), ("me:p@ss".to_owned(), 3));

        let password_only = parsed("redis://:s3cret@10.0.0.7/");
        assert_eq!(password_only.endpoint, tcp("10.0.0.7", 6379));
        assert_eq!(login(&password_only), ":s3cret");
        // Up to the last `@`, as the redaction.
        assert_eq!(login(&parsed("redis://me:p@ss@cache")), "me:p@ss");

        assert_eq!(parsed("redis://[::1]:7000").endpoint, tcp("::1", 7000));
        assert_eq!(parsed("valkey://[::1]/2").database, 2);
        assert!(!full.tls && !plain.tls);
    }

    #[test]
    fn tls_addresses() {
        let parsed = |url| Address::parse_in_a_build(url, true).unwrap();
        let tls = parsed("rediss://:s3cret@cache.internal:6380/1");
        assert_eq!(tls.endpoint, tcp("cache.internal", 6380));
        assert_eq!(
            (login(&tls), tls.database, tls.tls),
            (":s3cret".to_owned(), 1, true)
        );
        assert!(parsed("valkeys://cache").tls);
    }

    #[test]
    fn tls_addresses_name_the_feature_they_need_in_a_build_without_it() {
        let error = Address::parse_in_a_build("rediss://:secret@cache", false)
            .err()
            .unwrap();
        assert!(error.contains("`remote-tls` feature"), "{error}");
        assert!(!error.contains("secret@"), "{error}");
    }

    #[test]
    fn socket_addresses() {
        let plain = parsed("redis+unix:///run/redis.sock");
        assert_eq!(plain.endpoint, Endpoint::Unix("/run/redis.sock".into()));
        assert_eq!((login(&plain), plain.database), ("-".to_owned(), 0));

        let full = parsed("unix:///run/my%20redis.sock?db=2&user=me&pass=%26%3F+x");
        assert_eq!(full.endpoint, Endpoint::Unix("/run/my redis.sock".into()));
        assert_eq!((login(&full), full.database), ("me:&? x".to_owned(), 2));
    }

    #[test]
    fn bad_addresses_say_what_is_wrong_without_the_password() {
        for (url, reason) in [
            ("cache:6379", "not a URL"),
            ("http://cache", "unknown scheme `http`"),
            ("redis://", "no host"),
            ("redis://:secret@:6379", "no host"),
            (
                "redis://cache:http",
                "`:http`: expected `:` and a port number",
            ),
            ("redis://cache:0", "a port number"),
            ("redis://cache:99999", "a port number"),
            ("redis://[::1", "without its `]`"),
            ("redis://cache/one", "`one` is not a database number"),
            ("redis://cache/-1", "not a database number"),
            ("redis://cache?protocol=3", "no `?` parameters"),
            ("redis://secret@cache", "a user without a password"),
            ("redis://me:%zzsecret@cache", "the password has a `%`"),
            ("redis+unix://run/redis.sock", "must be absolute"),
            ("redis+unix:///s?db=x", "not a database number"),
            ("redis+unix:///s?protocol=3&pass=secret", "other than `db`"),
            ("redis+unix:///s?user=me", "a user without a password"),
            ("redis+unix:///s?pass=%4", "the password has a `%`"),
        ] {
            let error = Address::parse(url).err().unwrap_or_else(|| panic!("{url}"));
            assert!(error.contains(reason), "{url}: {error}");
            assert!(!error.contains("secret"), "{url}: {error}");
        }
    }

    #[test]
    fn passwords_are_not_shown() {
        for (url, shown) in [
            ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
            ("redis://me:p@ss@cache/1", "redis://me:***@cache/1"),
            ("redis://secret@cache", "redis://:***@cache"),
            ("redis://cache:6379", "redis://cache:6379"),
            (
                "redis+unix:///s?db=1&pass=hunter2&user=me",
                "redis+unix:///s?db=1&pass=***&user=me",
            ),
            ("redis+unix:///s", "redis+unix:///s"),
            ("nonsense", "nonsense"),
        ] {
            assert_eq!(redacted(url), shown);
        }
    }
}
