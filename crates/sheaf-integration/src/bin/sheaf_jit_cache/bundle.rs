//! The bundle commands: `bundle inspect` and `bundle verify`, over the
//! runtime's own reader and checks (`inspect_bundle`, `verify_bundle`);
//! every name printed escaped ([`shown`]).

use std::path::Path;

use jit_store::Escaped;

use sheaf_integration::artifacts::{inspect_bundle, verify_bundle};
use sheaf_integration::settings::ByteSize;
use sheaf_integration::ErrorChain;

use crate::disk::shown;
use crate::Outcome;

pub(crate) fn inspect(dir: &Path) -> Outcome {
    let contents = inspect_bundle(dir)?;
    say!("bundle    {}", Escaped::new(dir));
    say!("compiler  {}", Escaped::new(&contents.compiler));
    say!("runtime   {}", Escaped::new(&contents.runtime));
    let bytes: u64 = contents.artifacts.iter().map(|(_, bytes)| bytes).sum();
    say!(
        "{} artifacts ({}), {} variants:",
        contents.artifacts.len(),
        ByteSize(bytes),
        contents.variants.len()
    );
    for variant in &contents.variants {
        say!(
            "  {} {}  entry {}, artifact {}, target {:016x}",
            shown(format_args!("{:#}", variant.function)),
            shown(&variant.signature),
            Escaped::new(&variant.entry),
            variant.key.hex(),
            variant.target_hash
        );
    }
    Ok(true)
}

pub(crate) fn verify(dir: &Path) -> Outcome {
    let verdict = verify_bundle(dir)?;
    match &verdict.opens {
        Ok(()) => say!(
            "bundle {}: this program's runtime opens it",
            Escaped::new(dir)
        ),
        Err(error) => say!(
            "bundle {}: REFUSED by this program's runtime: {}",
            Escaped::new(dir),
            ErrorChain(error)
        ),
    }
    let mut refused = 0;
    for (key, check) in &verdict.entries {
        if check.is_authentic() {
            say!("  ok       {}  {check}", key.hex());
        } else {
            refused += 1;
            say!("  REFUSED  {}  {check}", key.hex());
        }
    }
    say!(
        "{} entries: {} ok, {refused} refused",
        verdict.entries.len(),
        verdict.entries.len() - refused
    );
    Ok(verdict.is_ok())
}
