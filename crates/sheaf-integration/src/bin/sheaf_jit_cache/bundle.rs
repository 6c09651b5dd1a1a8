//! The bundle commands: `bundle inspect` and `bundle verify`, over the
//! runtime's own reader and checks (`inspect_bundle`, `verify_bundle`),
//! with the keys this environment trusts; every name printed escaped
//! ([`shown`]).

use sheaf_integration::artifacts::{inspect_bundle, verify_bundle};
use sheaf_integration::settings::{ByteSize, TrustSettings};
use sheaf_integration::{ConfigError, ErrorChain, JitConfig};

use crate::disk::{shown, shown_path};
use crate::{report, show, BundleArgs, Format, Outcome};

/// The signatures a runtime in this environment would trust
/// (`SHEAF_JIT_TRUSTED_KEYS`, `SHEAF_JIT_SIGNING_KEY_FILE`), the keys of
/// `--trusted-keys` instead of the variable's when given.
fn trust(args: &BundleArgs) -> Result<TrustSettings, ConfigError> {
    let config = JitConfig::builder()
        .apply_vars(|name| match (name, &args.trusted_keys) {
            ("SHEAF_JIT_TRUSTED_KEYS", Some(keys)) => Some(keys.clone()),
            _ => std::env::var_os(name),
        })?
        .build()?;
    Ok(config.trust)
}

pub(crate) fn inspect(args: BundleArgs, format: Format) -> Outcome {
    let contents = inspect_bundle(&args.dir, &trust(&args)?)?;
    let report = report::Bundle {
        bundle: shown_path(&args.dir),
        signer: contents.signer.map(|key| key.to_string()),
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
        say!(
            "signed by {}",
            report
                .signer
                .as_deref()
                .unwrap_or("nobody (an unsigned bundle)")
        );
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

pub(crate) fn verify(args: BundleArgs, format: Format) -> Outcome {
    let verdict = verify_bundle(&args.dir, &trust(&args)?)?;
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
        folder: shown_path(&args.dir),
        signer: verdict.signer.map(|key| key.to_string()),
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
        let signed = match &report.signer {
            Some(signer) => format!("signed by {signer}"),
            None => "unsigned".to_owned(),
        };
        match &report.folder_error {
            None => say!(
                "bundle {} ({signed}): this program's runtime opens it",
                report.folder
            ),
            Some(error) => say!(
                "bundle {} ({signed}): REFUSED by this program's runtime: {error}",
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
