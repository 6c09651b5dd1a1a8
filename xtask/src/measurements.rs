//! `cargo xtask measurements [--only ID]... [--render] [--list]`: writes
//! `docs/measurements.md`.
//!
//! Each section (`measurements/sections.rs`) names a command; this runs
//! it, records its standard output with the date, commit, CPU and load of
//! the run (`measurements/run_line.rs`), and renders the file from the
//! sections' text and the records (`measurements/document.rs`). With
//! `--only`, the other sections keep the records the file holds; the tidy
//! test checks that the file is what the generator renders.

mod document;
mod run_line;
mod sections;

use std::path::Path;
use std::process::Stdio;

use anyhow::{bail, Context, Result};
use lexopt::prelude::*;

use crate::process::{self, workspace_root};
use crate::{build_iree, cli};
#[cfg(test)]
pub(crate) use document::check;
pub(crate) use document::{render, Record, Records, DOCUMENT};
pub(crate) use sections::{Section, SECTIONS};

/// What the command line asks for.
pub(crate) enum Request {
    /// Rerun these sections (every one without `--only`) and rewrite.
    Run(Vec<&'static Section>),
    /// Rewrite the file from its records, running nothing.
    Render,
    /// Print the ids.
    List,
}

/// The arguments of `cargo xtask measurements`: `Ok(None)` for `--help`.
pub(crate) fn parse(parser: &mut lexopt::Parser) -> Result<Option<Request>> {
    let (mut only, mut render, mut list) = (Vec::new(), false, false);
    while let Some(arg) = parser.next()? {
        match arg {
            arg if cli::is_help(&arg) => return Ok(None),
            Long("only") => {
                let id = parser
                    .value()
                    .context("--only needs a section id (`cargo xtask measurements --list`)")?;
                only.push(section(&cli::text(id)?)?);
            }
            Long("render") => render = true,
            Long("list") => list = true,
            arg => return Err(cli::unexpected("measurements", arg)),
        }
    }
    Ok(Some(match (only.is_empty(), render, list) {
        (true, false, false) => Request::Run(SECTIONS.iter().collect()),
        (false, false, false) => Request::Run(only),
        (true, true, false) => Request::Render,
        (true, false, true) => Request::List,
        _ => bail!("measurements: --only, --render and --list go alone (`cargo xtask measurements --help`)"),
    }))
}

/// The section `id` names.
fn section(id: &str) -> Result<&'static Section> {
    SECTIONS.iter().find(|s| s.id == id).with_context(|| {
        let ids: Vec<&str> = SECTIONS.iter().map(|s| s.id).collect();
        format!(
            "measurements: no section `{id}`; the ids: {}",
            ids.join(", ")
        )
    })
}

pub(crate) fn run(request: Request) -> Result<()> {
    match request {
        Request::Run(sections) => rerun(&sections),
        Request::Render => save(&render(&recorded(&[])?)?),
        Request::List => {
            for section in SECTIONS {
                println!("{}", section.id);
            }
            Ok(())
        }
    }
}

/// Runs `sections`' commands (a command that several share, once), each
/// record written as soon as the file can be rendered whole.
fn rerun(sections: &[&Section]) -> Result<()> {
    let ids: Vec<&str> = sections.iter().map(|section| section.id).collect();
    let mut records = recorded(&ids)?;
    let manifest = build_iree::ensure()?;
    let mut runs: Vec<(&[&str], Record)> = Vec::new();
    for section in sections {
        let known = runs.iter().find(|(command, _)| *command == section.command);
        let record = match known {
            Some((_, record)) => record.clone(),
            None => {
                let what = format!(
                    "section `{}`: `{}`",
                    section.id,
                    document::command_line(section)
                );
                let record = process::step(&what, || run_section(section, &manifest.prefix))?;
                runs.push((section.command, record.clone()));
                record
            }
        };
        records.insert(section.id.to_owned(), record);
        // A failure further on then loses no finished run.
        if let Ok(text) = render(&records) {
            save(&text)?;
        }
    }
    save(&render(&records)?)
}

/// The records the file holds now (none when there is no file); a broken
/// record of a section in `rerun` is left out, for its rerun to replace.
fn recorded(rerun: &[&str]) -> Result<Records> {
    let path = workspace_root().join(DOCUMENT);
    match std::fs::read_to_string(&path) {
        Ok(text) => document::records(&text, rerun),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Records::new()),
        Err(error) => Err(error).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn save(text: &str) -> Result<()> {
    let path = workspace_root().join(DOCUMENT);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `section`'s command with cargo pinned to the IREE install at
/// `prefix`: its standard output is the record, its standard error (cargo's
/// build output among it) goes to the terminal.
fn run_section(section: &Section, prefix: &Path) -> Result<Record> {
    let command_line = document::command_line(section);
    let args = section
        .command
        .strip_prefix(&["cargo"][..])
        .with_context(|| {
            format!(
                "section `{}`: `{command_line}` is not a cargo command",
                section.id
            )
        })?;
    let run_line = run_line::now()?;
    let output = process::cargo_with_iree(prefix)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot start `{command_line}`"))?;
    if !output.status.success() {
        bail!(
            "`{command_line}` failed with {} (its errors are above): fix it, then rerun \
             `cargo xtask measurements --only {}`",
            output.status,
            section.id
        );
    }
    let stdout = String::from_utf8(output.stdout)
        .with_context(|| format!("`{command_line}` printed non-UTF-8"))?;
    Ok(Record {
        run_line,
        output: stdout.trim_end_matches('\n').to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Option<Request>> {
        parse(&mut lexopt::Parser::from_args(args.iter().copied()))
    }

    #[test]
    fn arguments_select_sections() {
        let Some(Request::Run(all)) = parse_args(&[]).unwrap() else {
            panic!("no arguments run every section");
        };
        assert_eq!(all.len(), SECTIONS.len());
        let Some(Request::Run(two)) =
            parse_args(&["--only", "startup", "--only", "upload"]).unwrap()
        else {
            panic!("--only runs those sections");
        };
        assert_eq!(
            two.iter().map(|s| s.id).collect::<Vec<_>>(),
            ["startup", "upload"]
        );
        assert!(matches!(
            parse_args(&["--render"]).unwrap(),
            Some(Request::Render)
        ));
        assert!(matches!(
            parse_args(&["--list"]).unwrap(),
            Some(Request::List)
        ));
        assert!(parse_args(&["--help"]).unwrap().is_none());
        for bad in [
            &["--only", "nope"][..],
            &["--only"],
            &["--list", "--render"],
            &["x"],
        ] {
            assert!(parse_args(bad).is_err(), "{bad:?}");
        }
    }
}
