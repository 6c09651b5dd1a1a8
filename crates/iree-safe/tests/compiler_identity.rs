//! A cache key can name the compiler without loading it: this file's
//! process never loads the compiler library, which is what it checks.

#![cfg(not(iree_mock))]

use iree_safe::compiler::{compiler_identity, CompilerPreference};

#[test]
fn the_installed_compiler_is_identified_by_its_recorded_version_without_loading_it() {
    let identity = compiler_identity(CompilerPreference::Auto).unwrap();
    assert_eq!(
        Some(identity.as_str()),
        iree_sys::build_info::COMPILER_VERSION,
        "the install's compiler is known by its recorded build string"
    );
    assert_eq!(
        compiler_identity(CompilerPreference::Subprocess).unwrap(),
        identity,
        "the native iree-compile of the install is the same build"
    );
    // Nothing was loaded into this process to find out.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(
        !maps.contains("libIREECompiler"),
        "the compiler library was mapped"
    );
}
