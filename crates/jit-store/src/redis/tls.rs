//! TLS for `rediss://` addresses (the `remote-tls` feature): rustls on
//! ring, the server's certificate checked against the system's roots or a
//! configured CA file, the server's name sent (SNI) and checked from the
//! address's host.
//!
//! The TLS stream runs over a [`DeadlineSocket`]: every read and write of
//! the TCP connection underneath, the handshake's included, gets the time
//! left to the deadline of the connect or of the request, so a server that
//! drips its records fails at the deadline as on a plain connection. What
//! rustls holds of a reply is a record (16 KiB and its overhead) and the
//! plaintext of one, whatever the server declares; the RESP reader above
//! bounds the rest as it does on a plain connection.
//!
//! No client certificate is sent (authenticate with the address's
//! password, `AUTH`, which TLS now keeps private).

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use super::{DeadlineSocket, Socket};

/// What a connection trusts: the roots and the protocol settings, made once
/// per store.
#[derive(Clone)]
pub(super) struct TlsConfig(Arc<ClientConfig>);

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsConfig")
    }
}

/// A TLS connection over a TCP socket whose reads and writes end by the
/// deadline ([`Socket::Tls`]).
pub(super) type TlsStream = StreamOwned<ClientConnection, DeadlineSocket>;

impl TlsConfig {
    /// Trusting the system's root certificates (the distribution's store,
    /// or `SSL_CERT_FILE` / `SSL_CERT_DIR` where set).
    ///
    /// The reason, when no root certificate can be loaded.
    pub(super) fn system_roots() -> Result<TlsConfig, String> {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        let (added, _) = roots.add_parsable_certificates(found.certs);
        if added == 0 {
            let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Err(format!(
                "no root certificate found in the system's store ({}); install the \
                 distribution's `ca-certificates`, set `SSL_CERT_FILE`, or give the CA file \
                 that signed the server's certificate",
                if errors.is_empty() {
                    "it is empty".to_owned()
                } else {
                    errors.join("; ")
                }
            ));
        }
        Self::trusting(roots)
    }

    /// Trusting the certificates of the PEM file `path` only.
    ///
    /// The reason, when the file cannot be read or holds no certificate.
    pub(super) fn ca_file(path: &Path) -> Result<TlsConfig, String> {
        let shown = path.display();
        let certificates = CertificateDer::pem_file_iter(path)
            .and_then(Iterator::collect::<Result<Vec<_>, _>>)
            .map_err(|error| format!("cannot read the CA file {shown}: {error}"))?;
        let mut roots = RootCertStore::empty();
        let (added, refused) = roots.add_parsable_certificates(certificates);
        if added == 0 {
            return Err(format!(
                "the CA file {shown} holds no usable certificate ({refused} refused); it must \
                 be PEM (`-----BEGIN CERTIFICATE-----`)"
            ));
        }
        Self::trusting(roots)
    }

    fn trusting(roots: RootCertStore) -> Result<TlsConfig, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("cannot set up TLS: {error}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsConfig(Arc::new(config)))
    }

    /// `socket` (connected to `host`) after a TLS handshake that verified
    /// the server's certificate for `host`, by the socket's deadline, as a
    /// [`Socket::Tls`].
    ///
    /// # Errors
    ///
    /// The socket's error or timeout, or (`InvalidData`) why the handshake
    /// failed: a certificate that does not verify, a server that does not
    /// speak TLS.
    pub(super) fn handshake(&self, host: &str, mut socket: DeadlineSocket) -> io::Result<Socket> {
        let name = ServerName::try_from(host.to_owned()).map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{host}` is not a host name a certificate can be checked for: {error}"),
            )
        })?;
        let mut connection = ClientConnection::new(Arc::clone(&self.0), name)
            .map_err(|error| io::Error::other(format!("cannot start TLS: {error}")))?;
        while connection.is_handshaking() {
            match connection.complete_io(&mut socket) {
                Ok((0, 0)) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(error) if error.kind() == io::ErrorKind::InvalidData => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "the TLS handshake with `{host}` failed: {error}; the server's \
                             certificate must be issued for `{host}` and signed by the \
                             configured CA file (or a root of the system's store)"
                        ),
                    ));
                }
                Err(error) => return Err(error),
            }
        }
        Ok(Socket::Tls(Box::new(StreamOwned::new(connection, socket))))
    }
}
