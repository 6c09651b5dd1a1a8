//! The bundle commands: `bundle inspect` and `bundle verify`, over the
//! runtime's own reader and checks (`inspect_bundle`, `verify_bundle`);
//! every name printed escaped ([`shown`]).

use std::path::Path;

use sheaf_integration::artifacts::{inspect_bundle, verify_bundle};
use sheaf_integration::settings::ByteSize;
use sheaf_integration::ErrorChain;

use crate::disk::{shown, shown_path};
use crate::{report, show, Format, Outcome};

pub(crate) fn inspect(dir: &Path, format: Format) -> Outcome {
    let contents = inspect_bundle(dir)?;
    let report = report::Bundle {
        bundle: shown_path(dir),
        compiler: shown(&contents.compiler),
        runtime: shown(&contents.runtime),
        artifacts: contents
            .artifacts
            .iter()
            .map(|(key, bytes)| report::BundledArtifact {
                key: key.hex(),
                bytes: *bytes,
            })
            .collect(),
        variants: contents
            .variants
            .iter()
            .map(|variant| report::BundledVariant {
                function: shown(format_args!("{:#}", variant.function)),
                signature: shown(&variant.signature),
                entry: shown(&variant.entry),
                key: variant.key.hex(),
                target_hash: report::hex(variant.target_hash),
            })
            .collect(),
    };
    show(format, "bundle inspect", true, report, |report| {
        say!("bundle    {}", report.bundle);
        say!("compiler  {}", report.compiler);
        say!("runtime   {}", report.runtime);
        let bytes: u64 = report.artifacts.iter().map(|artifact| artifact.bytes).sum();
        say!(
            "{} artifacts ({}), {} variants:",
            report.artifacts.len(),
            ByteSize(bytes),
            report.variants.len()
        );
        for variant in &report.variants {
            say!(
                "  {} {}  entry {}, artifact {}, target {}",
                variant.function,
                variant.signature,
                variant.entry,
                variant.key,
                variant.target_hash
            );
        }
        Ok(())
    })
}

pub(crate) fn verify(dir: &Path, format: Format) -> Outcome {
    let verdict = verify_bundle(dir)?;
    let entries: Vec<report::Checked> = verdict
        .entries
        .iter()
        .map(|(key, check)| report::Checked {
            key: Some(key.hex()),
            path: None,
            ok: check.is_authentic(),
            check: check.to_string(),
        })
        .collect();
    let report = report::Verify {
        folder: shown_path(dir),
        folder_ok: verdict.opens.is_ok(),
        folder_error: verdict
            .opens
            .as_ref()
            .err()
            .map(|error| ErrorChain(error).to_string()),
        refused: entries.iter().filter(|entry| !entry.ok).count(),
        entries,
        policies: Vec::new(),
    };
    show(format, "bundle verify", verdict.is_ok(), report, |report| {
        match &report.folder_error {
            None => say!("bundle {}: this program's runtime opens it", report.folder),
            Some(error) => say!(
                "bundle {}: REFUSED by this program's runtime: {error}",
                report.folder
            ),
        }
        for entry in &report.entries {
            let marker = if entry.ok { "ok     " } else { "REFUSED" };
            let key = entry.key.as_deref().unwrap_or_default();
            say!("  {marker}  {key}  {}", entry.check);
        }
        say!(
            "{} entries: {} ok, {} refused",
            report.entries.len(),
            report.entries.len() - report.refused,
            report.refused
        );
        Ok(())
    })
}
