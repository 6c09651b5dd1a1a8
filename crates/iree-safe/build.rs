//! Build script of `iree-safe`: selects the C API the crate calls.
//!
//! Under miri the crate cannot call C, so it runs against its pure-Rust mock
//! of IREE's C API (`src/mock/`). The choice is a cfg, `iree_mock`, set here
//! from `CARGO_CFG_MIRI` — not a cargo feature, which another crate in the
//! dependency graph could switch on for everyone (features are additive).
//! Nothing else selects the mock, so a native build always calls IREE.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(iree_mock)");
    println!("cargo::rerun-if-env-changed=CARGO_CFG_MIRI");
    // A name-only cfg such as `miri` arrives set but empty.
    if std::env::var_os("CARGO_CFG_MIRI").is_some() {
        println!("cargo::rustc-cfg=iree_mock");
    }
}
