//! The stand-in for `tls.rs` in a build without the `remote-tls` feature:
//! a [`TlsConfig`] that is never made, since `address.rs` refuses
//! `rediss://` addresses there, naming the feature.

use std::io;
use std::path::Path;

use super::{DeadlineSocket, Socket};

/// What a TLS connection would trust: none in this build.
#[derive(Debug, Clone)]
pub(super) enum TlsConfig {}

impl TlsConfig {
    /// Never called: no address asks for TLS in this build.
    pub(super) fn system_roots() -> Result<TlsConfig, String> {
        Err(LEFT_OUT.to_owned())
    }

    /// Never called: the CA file's setting needs the feature.
    pub(super) fn ca_file(_: &Path) -> Result<TlsConfig, String> {
        Err(LEFT_OUT.to_owned())
    }

    pub(super) fn handshake(&self, _: &str, _: DeadlineSocket) -> io::Result<Socket> {
        match *self {}
    }
}

const LEFT_OUT: &str = "TLS needs jit-cache's `remote-tls` feature, which this build leaves out";
