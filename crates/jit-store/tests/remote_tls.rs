//! `rediss://` against a real `redis-server` on its TLS port, with
//! certificates made here (rcgen; no key is committed): a round trip
//! through TLS works, with the server's name checked (SNI); a certificate
//! that does not verify (self-signed, signed by another CA, issued for
//! another host, or by a CA the system does not trust), or a server that
//! does not speak TLS, fails the connect with the reason and becomes a
//! miss of the tier, never a hang; a server that drips the bytes of its
//! reply's TLS record fails the request at its deadline; a CA file that cannot serve
//! is refused when the store is made.

#![cfg(not(miri))] // sockets, a server process

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use jit_cache::ErrorChain;
use jit_store::{
    ArtifactKey, ArtifactStore, Fetched, KeyParts, RedisStore, RemoteError, RemoteOptions,
    RemoteStore, RemoteTier, RemoteTimeouts, RemoteValue, Secret,
};
use test_support::redis::{RedisServer, TlsFiles};

/// Timeouts no healthy exchange on loopback comes near (a TLS handshake on
/// a busy machine included).
fn generous() -> RemoteTimeouts {
    let mut timeouts = RemoteTimeouts::default();
    timeouts.connect = Duration::from_secs(5);
    timeouts.request = Duration::from_secs(5);
    timeouts
}

/// A folder of PEM files: CAs, and server certificates with their keys.
struct Certificates {
    dir: tempfile::TempDir,
}

/// A CA of the test's: its certificate is `<name>.pem` in the folder.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Certificates {
    fn new() -> Self {
        Certificates {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A CA, written to `<name>.pem`.
    fn ca(&self, name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Its own name: a certificate it did not sign names another issuer.
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        fs::write(self.path(&format!("{name}.pem")), issuer.pem()).unwrap();
        Ca { issuer }
    }

    /// A certificate for `names` signed by `ca`, and its key, in DER.
    fn signed_der(
        ca: &Ca,
        names: &[&str],
    ) -> (
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    ) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let params = CertificateParams::new(names).unwrap();
        let certificate = params.signed_by(&key, &ca.issuer).unwrap();
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
        (certificate.der().clone(), key.into())
    }

    /// A server certificate for `names`, signed by `ca` (else self-signed),
    /// written to `<name>.pem` and its key to `<name>.key`; the files of a
    /// server that presents it (`ca_name.pem` as its own CA file).
    fn server(&self, name: &str, names: &[&str], ca: Option<(&Ca, &str)>) -> ServerFiles {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|&name| name.to_owned()).collect();
        let params = CertificateParams::new(names).unwrap();
        let certificate = match ca {
            Some((ca, _)) => params.signed_by(&key, &ca.issuer).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        let (cert, key_file) = (
            self.path(&format!("{name}.pem")),
            self.path(&format!("{name}.key")),
        );
        fs::write(&cert, certificate.pem()).unwrap();
        fs::write(&key_file, key.serialize_pem()).unwrap();
        let ca = match ca {
            Some((_, ca_name)) => self.path(&format!("{ca_name}.pem")),
            None => cert.clone(),
        };
        ServerFiles {
            cert,
            key: key_file,
            ca,
        }
    }
}

struct ServerFiles {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
}

fn tls_server(files: &ServerFiles) -> RedisServer {
    RedisServer::start_tls(&TlsFiles {
        cert: &files.cert,
        key: &files.key,
        ca: &files.ca,
    })
}

fn key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "compiler",
        runtime: "runtime",
        target: "target",
    })
}

/// A store with no folder over `backend`.
fn store_over(backend: RedisStore) -> ArtifactStore {
    let secret = Secret::from_bytes([5; 32]);
    let tier = RemoteTier::new(Box::new(backend), secret, RemoteOptions::default()).unwrap();
    ArtifactStore::disabled().with_remote(tier)
}

/// Fetches `program`, building it if need be: where it came from.
fn fetch(store: &ArtifactStore, program: &str) -> Fetched {
    let (bytes, fetched) = store
        .fetch_or_build(
            Some(&key(program)),
            |artifact| Ok::<_, String>(artifact.bytes().to_vec()),
            || Ok::<_, String>(format!("code of {program}").into_bytes()),
        )
        .unwrap();
    assert_eq!(bytes, format!("code of {program}").into_bytes());
    fetched
}

/// What `work` returned, if it returned within 20 s (the timeouts it
/// is given are 5 s at most); `None` if it hung.
fn within_20s<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (done, returned) = mpsc::channel();
    thread::spawn(move || done.send(work()));
    returned.recv_timeout(Duration::from_secs(20)).ok()
}

/// The error of a `get` from `backend`, which must fail in the TLS
/// handshake (or, `step`, where given), with its causes.
fn refused(backend: RedisStore, step: &'static str) -> String {
    let error = within_20s(move || backend.get("k", 1024))
        .expect("the request ended, within its timeouts")
        .expect_err("the server was trusted");
    match &error {
        RemoteError::Unavailable { step: failed, .. } if *failed == step => {}
        other => panic!("expected a failed {step}, got {other:?}"),
    }
    ErrorChain(&error).to_string()
}

#[test]
fn a_round_trip_through_tls_works() {
    let certificates = Certificates::new();
    let ca = certificates.ca("ca");
    let files = certificates.server("server", &["localhost", "127.0.0.1"], Some((&ca, "ca")));
    let server = tls_server(&files);
    let ca_file = certificates.path("ca.pem");
    // By name (SNI, the name checked) and by IP address.
    for host in ["localhost", "127.0.0.1"] {
        let url = format!("rediss://{host}:{}", server.port());
        let backend = RedisStore::with_ca_file(&url, generous(), &ca_file).unwrap();
        backend.put(&format!("k-{host}"), b"over TLS").unwrap();
        assert_eq!(
            backend.get(&format!("k-{host}"), 1024).unwrap(),
            RemoteValue::Found(b"over TLS".to_vec())
        );
        // Again, on the connection kept.
        assert_eq!(backend.get("none", 1024).unwrap(), RemoteValue::Missing);
    }
    // Through a tier: published by one process, served to the next.
    let url = format!("rediss://localhost:{}/2", server.port());
    let open = || store_over(RedisStore::with_ca_file(&url, generous(), &ca_file).unwrap());
    assert_eq!(fetch(&open(), "f"), Fetched::Built);
    let store = open();
    assert_eq!(fetch(&store, "f"), Fetched::Remote);
    let stats = store.remote_stats().unwrap();
    assert_eq!((stats.hits, stats.errors), (1, 0), "{stats}");
}

#[test]
fn certificates_that_do_not_verify_are_refused_with_the_reason() {
    let certificates = Certificates::new();
    let ca = certificates.ca("ca");
    certificates.ca("other-ca");
    let self_signed = certificates.server("self-signed", &["localhost"], None);
    let signed = certificates.server("signed", &["localhost"], Some((&ca, "ca")));
    let elsewhere = certificates.server("elsewhere", &["cache.example"], Some((&ca, "ca")));
    let [self_signed, signed, elsewhere] = [&self_signed, &signed, &elsewhere].map(tls_server);
    let url = |server: &RedisServer| format!("rediss://localhost:{}", server.port());
    let with_ca = |server: &RedisServer, ca: &str| {
        RedisStore::with_ca_file(&url(server), generous(), &certificates.path(ca)).unwrap()
    };
    for (case, backend, reason) in [
        (
            "self-signed",
            with_ca(&self_signed, "ca.pem"),
            "UnknownIssuer",
        ),
        (
            "another CA",
            with_ca(&signed, "other-ca.pem"),
            "UnknownIssuer",
        ),
        (
            "another host",
            with_ca(&elsewhere, "ca.pem"),
            "not valid for name",
        ),
        (
            "a CA the system does not trust",
            RedisStore::new(&url(&signed), generous()).unwrap(),
            "UnknownIssuer",
        ),
    ] {
        let error = refused(backend, "TLS handshake");
        assert!(
            error.contains(reason) && error.contains("the TLS handshake with `localhost` failed"),
            "{case}: {error}"
        );
    }

    // To the tier: a miss (an error, counted), and the call builds.
    let store = store_over(with_ca(&elsewhere, "other-ca.pem"));
    assert_eq!(fetch(&store, "f"), Fetched::Built);
    let stats = store.remote_stats().unwrap();
    assert_eq!(
        (stats.hits, stats.errors, stats.rejected),
        (0, 1, 0),
        "{stats}"
    );
}

#[test]
fn a_server_without_tls_or_a_handshake_that_never_ends_fails_the_connect() {
    let certificates = Certificates::new();
    certificates.ca("ca");
    let ca_file = certificates.path("ca.pem");
    let mut short = RemoteTimeouts::default();
    short.connect = Duration::from_millis(300);
    short.request = Duration::from_millis(300);
    // A plain server: not TLS (it may wait for the end of what it reads as
    // a command, or answer an error that is no TLS record).
    let plain = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}", plain.port());
    let error = refused(
        RedisStore::with_ca_file(&url, short, &ca_file).unwrap(),
        "TLS handshake",
    );
    assert!(error.contains("TLS handshake"), "{error}");

    // A listener that never accepts: the handshake ends at the connect
    // timeout.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "rediss://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let error = refused(
        RedisStore::with_ca_file(&url, short, &ca_file).unwrap(),
        "TLS handshake",
    );
    assert!(
        error.contains("took longer than its 300ms timeout"),
        "{error}"
    );
    drop(listener);
}

#[test]
fn a_ca_file_that_cannot_serve_is_refused_when_the_store_is_made() {
    let certificates = Certificates::new();
    certificates.ca("ca");
    let garbage = certificates.path("garbage.pem");
    fs::write(&garbage, "not a certificate").unwrap();
    let missing = certificates.path("missing.pem");
    let tls_error =
        |url: &str, ca_file: &Path| match RedisStore::with_ca_file(url, generous(), ca_file) {
            Err(error @ RemoteError::Tls { .. }) => error.to_string(),
            other => panic!(
                "{url} {}: expected a TLS error, got {other:?}",
                ca_file.display()
            ),
        };
    let error = tls_error("rediss://:hunter2@cache", &missing);
    assert!(
        error.contains("cannot read the CA file") && !error.contains("hunter2"),
        "{error}"
    );
    let error = tls_error("rediss://cache", &garbage);
    assert!(error.contains("holds no usable certificate"), "{error}");
    let error = tls_error("redis://cache", &certificates.path("ca.pem"));
    assert!(error.contains("is for a `rediss://` address"), "{error}");
}

#[test]
fn a_server_that_drips_its_tls_record_fails_the_request_at_its_deadline() {
    let certificates = Certificates::new();
    let ca = certificates.ca("ca");
    let (certificate, key) = Certificates::signed_der(&ca, &["localhost"]);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certificate], key)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // One connection: the handshake, the command, then the reply in one
    // TLS record (31 bytes), its bytes sent 30 ms apart (about 930 ms in
    // all): every read of the socket is short, the record as a whole is
    // not. It stops by itself.
    let server = thread::spawn(move || {
        let (socket, _) = listener.accept().unwrap();
        let connection = rustls::ServerConnection::new(Arc::new(config)).unwrap();
        let mut stream = rustls::StreamOwned::new(connection, socket);
        let mut command = [0; 256];
        let read = stream.read(&mut command).unwrap();
        assert!(command[..read].starts_with(b"*2\r\n$6\r\nSTRLEN"));
        let rustls::StreamOwned {
            conn: mut connection,
            sock: mut socket,
        } = stream;
        connection.writer().write_all(b":12345\r\n").unwrap();
        let mut record = Vec::new();
        while connection.wants_write() {
            connection.write_tls(&mut record).unwrap();
        }
        for byte in record {
            thread::sleep(Duration::from_millis(30));
            if socket.write_all(&[byte]).is_err() {
                break; // the client gave up
            }
        }
    });
    // Each read is far shorter than the request timeout; the request as a
    // whole is longer.
    let mut timeouts = RemoteTimeouts::default();
    timeouts.connect = Duration::from_secs(5);
    timeouts.request = Duration::from_millis(300);
    let url = format!("rediss://localhost:{port}");
    let backend = RedisStore::with_ca_file(&url, timeouts, &certificates.path("ca.pem")).unwrap();
    let error = within_20s(move || backend.get("k", 1024))
        .expect("the request ended")
        .expect_err("a record dripped for 930 ms was accepted within a 300 ms request timeout");
    let shown = ErrorChain(&error).to_string();
    assert!(
        matches!(&error, RemoteError::Unavailable { step: "STRLEN", .. })
            && shown.contains("the request took longer than its 300ms timeout"),
        "{shown}"
    );
    server.join().unwrap();
}
