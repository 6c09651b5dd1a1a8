//! The C API this crate calls: IREE's own (`iree-sys`) or, under miri and
//! with the `mock` feature, the pure-Rust mock in [`crate::mock`].
//!
//! Every FFI call in the crate goes through this module, so the same RAII
//! code and the same tests run against both.

#[cfg(not(any(miri, feature = "mock")))]
pub(crate) use iree_sys::*;

#[cfg(any(miri, feature = "mock"))]
pub(crate) use crate::mock::api::*;
