//! House rule 13 (part of the tidy test): `docs/measurements.md` is written
//! by `cargo xtask measurements`, never by hand.
//!
//! The file's records (each section's run line and output) are read back
//! and the file rendered again from them and the sections' definitions
//! (`xtask/src/measurements/sections.rs`); any other text, a section
//! without its run line, or one the definitions lack, fails. A figure
//! therefore reaches the file only as a command's recorded output, dated
//! and tied to a commit.

use std::path::Path;

use super::read;
use crate::measurements::{check, render, Record, Records, DOCUMENT, SECTIONS};

#[test]
fn the_measurements_are_what_the_generator_writes() {
    if let Err(why) = check(&read(Path::new(DOCUMENT))) {
        panic!("{why:#}");
    }
}

/// A file as the generator writes it, every section with the same record.
fn generated() -> String {
    let record = Record {
        run_line: "Run on 2026-12-06 (UTC) at commit bf58e7c, AMD EPYC, 2 cores, load 0.50 \
                   0.40 0.30 (from /proc/loadavg at start)."
            .to_owned(),
        output: "calls | p50\n1000 | 2.9 µs".to_owned(),
    };
    let records: Records = SECTIONS
        .iter()
        .map(|section| (section.id.to_owned(), record.clone()))
        .collect();
    render(&records).unwrap()
}

/// The error `check` gives for `text`, which must fail it.
fn failure(text: &str) -> String {
    match check(text) {
        Ok(()) => panic!("the check passed a hand-edited file:\n{text}"),
        Err(why) => format!("{why:#}"),
    }
}

#[test]
fn a_hand_edit_fails_the_check() {
    let text = generated();
    check(&text).unwrap();
    let heading = format!("## {}\n\n", SECTIONS[0].title);
    // A figure added to a section's prose.
    let figure = text.replacen(&heading, &format!("{heading}It takes 3.1 µs.\n\n"), 1);
    assert!(failure(&figure).contains("It takes 3.1 µs."));
    // A run line removed.
    let no_run_line = text.replacen("Run on 2026-12-06", "Measured on 2026-12-06", 1);
    assert!(failure(&no_run_line).contains("no run line"));
    // A run line without its commit.
    let no_commit = text.replacen(" at commit bf58e7c", "", 1);
    assert!(failure(&no_commit).contains("no run line"));
    // A section dropped: its record is gone with it.
    let first = text.find("\n<!-- section: ").unwrap();
    let second = first + 1 + text[first + 1..].find("\n<!-- section: ").unwrap();
    let dropped = format!("{}{}", &text[..first], &text[second..]);
    assert!(failure(&dropped).contains("has no record"));
    // The header edited.
    let header = text.replacen("# Measurements", "# Benchmarks", 1);
    assert!(failure(&header).contains("line 1 is"));
    // The file as it was before it was generated: prose and tables.
    let by_hand = "# Measurements\n\n## Cached-call overhead\n\n| a | b |\n| 1 | 2 |\n";
    assert!(failure(by_hand).contains("has no record"));
}
