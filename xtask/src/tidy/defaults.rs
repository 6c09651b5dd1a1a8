//! House rule 12 (part of the tidy test): the documents state the code's
//! defaults, and state the CI time once.
//!
//! - **The configuration's defaults**: the README's table of `SHEAF_JIT_*`
//!   variables is the code's (`ENV_VARIABLES`, compared whole by
//!   [`the_readme_lists_the_variables_of_the_code`](super)), and
//!   sheaf-integration's `config/env/tests.rs` checks that each stated
//!   default (the disk cache's folders included) configures what no
//!   variable does.
//! - **The compile mode and the compiler in prose**: a phrase of a README,
//!   a document under `docs/` or a doc comment that says which compile
//!   mode, or which compiler, is the default (`Background (the default)`,
//!   `the default compiler runs iree-compile`, `in-process preferred`)
//!   must name the code's: the compile mode's default as `ENV_VARIABLES`
//!   states it, and the compiler `CompilerPreference::Auto` tries first
//!   (`crates/iree-safe/src/compiler/mod.rs`).
//! - **The CI time** is a figure of one place, the front page's "What the
//!   first run costs"; every other mention of `.ci/run` refers to it
//!   without a number of minutes, so two figures cannot disagree.

use std::path::{Path, PathBuf};

use super::{read, rust_files, string_field, ENV_TABLE};

/// Where `CompilerPreference::Auto` is resolved.
const CHOOSE: &str = "crates/iree-safe/src/compiler/mod.rs";

/// The front page, the one home of the CI time.
const FRONT_PAGE: &str = "README.md";

/// The Markdown a reader acts on: the front page, each crate's README,
/// the documents under `docs/`. (The CHANGELOG records what was true.)
fn documents() -> Vec<PathBuf> {
    let root = crate::process::workspace_root();
    let mut documents = vec![PathBuf::from(FRONT_PAGE)];
    for folder in ["docs", "crates"] {
        let Ok(entries) = std::fs::read_dir(root.join(folder)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = Path::new(folder).join(entry.file_name());
            if folder == "docs" && path.extension().is_some_and(|e| e == "md") {
                documents.push(path);
            } else if root.join(&path).join("README.md").is_file() {
                documents.push(path.join("README.md"));
            }
        }
    }
    documents.sort();
    documents
}

/// The text of `source`'s doc comments (`//!`, `///`), one line each.
fn doc_comments(source: &str) -> String {
    source
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            line.strip_prefix("//!")
                .or_else(|| line.strip_prefix("///"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sentences of `text`, each on one line (white space folded).
fn sentences(text: &str) -> Vec<String> {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    folded
        .split(". ")
        .map(|sentence| sentence.to_lowercase())
        .collect()
}

/// The two compile modes, as prose names them.
const MODES: [&str; 2] = ["blocking", "background"];

/// The compilers, as prose names them: (kind, words that name it).
const COMPILERS: [(&str, &[&str]); 2] = [
    ("in-process", &["in-process", "in process"]),
    (
        "subprocess",
        &["subprocess", "child process", "`iree-compile`"],
    ),
];

/// The phrases of `sentence` that say what is the default: the words
/// before "(the default)", ", the default" or "is the default", or after
/// "the default is", "the default compiler" or "the default, " (a
/// feature's "(default)", or "on by default", says nothing of a mode or a
/// compiler).
fn default_phrases(sentence: &str) -> Vec<&str> {
    const BEFORE: [&str; 3] = ["(the default)", ", the default", "is the default"];
    const AFTER: [&str; 3] = ["the default is", "the default compiler", "the default, "];
    const REACH: usize = 50;
    let mut phrases = Vec::new();
    for claim in BEFORE {
        for (at, _) in sentence.match_indices(claim) {
            let start = floor(sentence, at.saturating_sub(REACH));
            phrases.push(&sentence[start..at + claim.len()]);
        }
    }
    for claim in AFTER {
        for (at, _) in sentence.match_indices(claim) {
            let end = floor(sentence, (at + claim.len() + REACH).min(sentence.len()));
            phrases.push(&sentence[at..end]);
        }
    }
    phrases
}

/// `index`, moved back to a character boundary of `text`.
fn floor(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The compile mode's default as `ENV_VARIABLES` states it.
fn code_compile_mode() -> String {
    let table = read(Path::new(ENV_TABLE));
    let entry = table
        .split("EnvVariable {")
        .find(|entry| string_field(entry, "name").as_deref() == Some("SHEAF_JIT_COMPILE_MODE"))
        .expect("ENV_VARIABLES has SHEAF_JIT_COMPILE_MODE");
    string_field(entry, "default")
        .expect("SHEAF_JIT_COMPILE_MODE has a default")
        .trim_matches('`')
        .to_owned()
}

/// The compiler `CompilerPreference::Auto` tries first.
fn code_compiler() -> &'static str {
    let choose = read(Path::new(CHOOSE));
    if choose.contains("CompilerPreference::Auto => match subprocess(") {
        "subprocess"
    } else if choose.contains("CompilerPreference::Auto => match in_process::") {
        "in-process"
    } else {
        panic!("{CHOOSE}: cannot tell which compiler CompilerPreference::Auto tries first")
    }
}

/// The phrases of `text` that state a default other than `mode` and
/// `compiler`: a mode or a compiler named next to the claim of a default,
/// without the code's.
fn wrong_defaults(text: &str, mode: &str, compiler: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    for sentence in sentences(text) {
        for phrase in default_phrases(&sentence) {
            // The cargo feature names the in-process compiler without
            // saying it is the default one.
            let phrase = &phrase.replace("in-process-compiler", "");
            let named_modes: Vec<&str> = MODES
                .iter()
                .copied()
                .filter(|m| {
                    phrase.contains(&format!("{m} mode"))
                        || phrase.contains(&format!("compilemode::{m}"))
                })
                .collect();
            if !named_modes.is_empty() && !named_modes.contains(&mode) {
                wrong.push(phrase.to_owned());
            }
            let about_compiler = phrase.contains("compil");
            let named: Vec<&str> = COMPILERS
                .iter()
                .filter(|(_, words)| words.iter().any(|w| phrase.contains(w)))
                .map(|(kind, _)| *kind)
                .collect();
            if about_compiler && named.len() == 1 && named[0] != compiler {
                wrong.push(phrase.to_owned());
            }
        }
        if sentence.contains("in-process preferred") && compiler != "in-process" {
            wrong.push(sentence.clone());
        }
    }
    wrong
}

#[test]
fn the_documents_state_the_codes_compile_mode_and_compiler() {
    let (mode, compiler) = (code_compile_mode(), code_compiler());
    let mut wrong = Vec::new();
    let mut texts: Vec<(PathBuf, String)> = documents()
        .into_iter()
        .map(|path| {
            let text = read(&path);
            (path, text)
        })
        .collect();
    texts.extend(
        rust_files()
            .into_iter()
            .filter(|path| path.starts_with("crates"))
            .map(|path| {
                let text = doc_comments(&read(&path));
                (path, text)
            }),
    );
    for (path, text) in &texts {
        for phrase in wrong_defaults(text, &mode, compiler) {
            wrong.push(format!("{}: …{phrase}…", path.display()));
        }
    }
    assert!(
        wrong.is_empty(),
        "these phrases state a default the code does not have (the compile mode's is \
         `{mode}`, the compiler's `{compiler}`); say what the code does:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_ci_time_is_stated_once() {
    let minutes = |line: &str| {
        line.split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|pair| {
                pair[0]
                    .trim_start_matches(['*', '('])
                    .parse::<f64>()
                    .is_ok()
                    && pair[1].starts_with("min")
            })
    };
    let mut stated = Vec::new();
    for path in documents() {
        let text = read(&path);
        // A table's rows one by one, other paragraphs whole.
        let rows = text.lines().filter(|line| line.starts_with('|'));
        let prose = text
            .split("\n\n")
            .filter(|paragraph| !paragraph.trim_start().starts_with('|'));
        for paragraph in rows.chain(prose) {
            let folded = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
            // A table row whole, prose a sentence at a time.
            let parts: Vec<&str> = if folded.starts_with('|') {
                vec![&folded]
            } else {
                folded.split(". ").collect()
            };
            for part in parts {
                if part.contains(".ci/run") && minutes(part) {
                    let shown = &part[..floor(part, part.len().min(90))];
                    stated.push(format!("{}: {shown}", path.display()));
                }
            }
        }
    }
    let at_home =
        |line: &String| line.starts_with(&format!("{FRONT_PAGE}: | `cargo xtask test` |"));
    assert!(
        stated.iter().filter(|line| at_home(line)).count() == 1 && stated.iter().all(at_home),
        "the CI time (minutes of `.ci/run`) must be stated once, in {FRONT_PAGE}'s \"What the \
         first run costs\" table; elsewhere refer to it without a figure. Stated in:\n  {}",
        stated.join("\n  ")
    );
}

#[test]
fn the_default_checks_see_what_they_look_for() {
    let wrong = |text: &str| wrong_defaults(text, "background", "subprocess");
    assert_eq!(
        wrong("In background mode (the default) the first call returns.").len(),
        0
    );
    assert_eq!(
        wrong("In blocking mode (the default) each miss waits.").len(),
        1
    );
    assert_eq!(wrong("`CompileMode::Blocking` is the default.").len(), 1);
    assert_eq!(
        wrong("The default compiler runs `iree-compile` in a child process.").len(),
        0
    );
    assert_eq!(
        wrong("The default compiler is the in-process library.").len(),
        1
    );
    assert_eq!(
        wrong("Compiles run in-process preferred, else a subprocess.").len(),
        1
    );
    assert_eq!(
        wrong("Behind the feature `in-process-compiler`, on by default, the library loads.").len(),
        0
    );
}
