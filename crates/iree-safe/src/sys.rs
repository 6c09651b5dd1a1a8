//! The C API this crate calls: IREE's own (`iree-sys`) or, under miri, the
//! pure-Rust mock in [`crate::mock`] (the `iree_mock` cfg, see `build.rs`).
//!
//! Every FFI call in the crate goes through this module, so the same RAII
//! code and the same tests run against both. The mock's `api` module names
//! each item it provides explicitly: a call to an IREE function the mock
//! does not implement fails to compile under miri, and the tidy test of
//! `xtask` checks the same from the sources.

#[cfg(not(iree_mock))]
pub(crate) use iree_sys::*;

#[cfg(iree_mock)]
pub(crate) use crate::mock::api::*;
