//! House rule 11 (part of the tidy test): each library crate's rustdoc has
//! a `# Crate features` section (as rustls's `lib.rs` has) whose bullets
//! name every Cargo feature of the crate, and no other, with `(default)`
//! after exactly the default ones. A bullet may name several features that
//! share one meaning: `` - `a` (default), `b`: what they do``.
//!
//! The features come from `cargo metadata`, the section from
//! `src/lib.rs`: adding a feature without its documentation, renaming one
//! on one side only, or changing the defaults without saying so fails.

use std::collections::BTreeMap;
use std::path::Path;

use super::read;

/// A crate's features: name → whether it is a default one.
type Features = BTreeMap<String, bool>;

/// The heading of the section.
const HEADING: &str = "# Crate features";

/// The features that the `# Crate features` section of the crate docs in
/// `lib_rs` lists; `None` when it has no such section.
fn documented(lib_rs: &str) -> Option<Features> {
    let docs: Vec<&str> = lib_rs
        .lines()
        .map_while(|line| line.strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect();
    let start = docs.iter().position(|line| *line == HEADING)?;
    let mut features = Features::new();
    for line in docs[start + 1..]
        .iter()
        .take_while(|line| !line.starts_with("# "))
    {
        let Some(bullet) = line.strip_prefix("- ") else {
            continue;
        };
        let names = bullet.split_once(':').map_or(bullet, |(names, _)| names);
        for name in names.split(',').map(str::trim) {
            let (name, default) = match name.strip_suffix("(default)") {
                Some(name) => (name.trim_end(), true),
                None => (name, false),
            };
            if let Some(name) = name.strip_prefix('`').and_then(|n| n.strip_suffix('`')) {
                features.insert(name.to_owned(), default);
            }
        }
    }
    Some(features)
}

/// The features that `metadata` (`cargo metadata`'s output) gives the
/// package whose manifest is `manifest`.
fn declared(metadata: &serde_json::Value, manifest: &Path) -> Option<Features> {
    let package = metadata["packages"]
        .as_array()?
        .iter()
        .find(|package| package["manifest_path"].as_str().map(Path::new) == Some(manifest))?;
    let features = package["features"].as_object()?;
    let defaults: Vec<&str> = features
        .get("default")
        .and_then(|list| list.as_array())
        .map(|list| list.iter().filter_map(|name| name.as_str()).collect())
        .unwrap_or_default();
    Some(
        features
            .keys()
            .filter(|name| *name != "default")
            .map(|name| (name.clone(), defaults.contains(&name.as_str())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{workspace_metadata, workspace_root};

    #[test]
    fn every_library_crate_documents_its_features() {
        let metadata = workspace_metadata().unwrap();
        for krate in super::super::architecture::LIBRARY_CRATES {
            let folder = workspace_root().join("crates").join(krate);
            let lib_rs = Path::new("crates").join(krate).join("src/lib.rs");
            let declared = declared(&metadata, &folder.join("Cargo.toml"))
                .unwrap_or_else(|| panic!("cargo metadata has no package in {krate}"));
            let documented = documented(&read(&lib_rs))
                .unwrap_or_else(|| panic!("{}: no `//! {HEADING}` section", lib_rs.display()));
            assert_eq!(
                documented,
                declared,
                "{}: the `{HEADING}` section (left) is not Cargo.toml's [features] (right; \
                 true: a default one)",
                lib_rs.display()
            );
        }
    }

    #[test]
    fn the_section_is_read_to_the_next_heading() {
        let lib_rs = "//! A crate.\n\
                      //!\n\
                      //! # Crate features\n\
                      //!\n\
                      //! Some words, then:\n\
                      //! - `a` (default): the first.\n\
                      //!   Continued: not a bullet.\n\
                      //! - `b` (default), `c`: two with one meaning.\n\
                      //!\n\
                      //! # Examples\n\
                      //! - `d`: another section's.\n\
                      \n\
                      //! - `e`: no longer the crate docs.\n";
        let features = documented(lib_rs).unwrap();
        let expected: Features = [("a", true), ("b", true), ("c", false)]
            .into_iter()
            .map(|(name, default)| (name.to_owned(), default))
            .collect();
        assert_eq!(features, expected);
        assert_eq!(
            documented("//! A crate.\n//! - `a`: not in a section.\n"),
            None
        );
    }

    #[test]
    fn cargo_metadata_gives_the_defaults() {
        let metadata = serde_json::json!({ "packages": [{
            "manifest_path": "/w/crates/x/Cargo.toml",
            "features": { "default": ["a"], "a": [], "b": ["dep:serde"] },
        }]});
        let features = declared(&metadata, Path::new("/w/crates/x/Cargo.toml")).unwrap();
        assert_eq!(features.get("a"), Some(&true));
        assert_eq!(features.get("b"), Some(&false));
        assert_eq!(features.len(), 2);
        assert_eq!(
            declared(&metadata, Path::new("/elsewhere/Cargo.toml")),
            None
        );
    }
}
