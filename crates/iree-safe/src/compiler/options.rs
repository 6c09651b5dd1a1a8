//! What to compile for: [`CompileOptions`] and the command-line flags they
//! stand for.

use super::error::CompileError;

/// The dialect the MLIR input is written in (`--iree-input-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum InputType {
    /// Let the compiler detect the input dialect (no flag is passed, so the
    /// compiler's default `auto` applies). Right for linalg/arith/tensor
    /// input and usually for StableHLO too.
    #[default]
    Auto,
    /// StableHLO input: `--iree-input-type=stablehlo`.
    StableHlo,
}

/// Options of one compilation: the target and any extra compiler flags.
///
/// Both compiler implementations pass exactly [`flags`](CompileOptions::flags)
/// to IREE, and the disk cache hashes that same list, so two options values
/// that produce the same flags are the same compilation.
///
/// ```
/// use iree_safe::compiler::{CompileOptions, InputType};
///
/// let options = CompileOptions { input_type: InputType::StableHlo, ..CompileOptions::default() };
/// assert_eq!(
///     options.flags(),
///     [
///         "--iree-hal-target-device=local",
///         "--iree-hal-local-target-device-backends=llvm-cpu",
///         "--iree-llvmcpu-target-cpu=host",
///         "--iree-input-type=stablehlo",
///     ]
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// Input dialect; default [`InputType::Auto`].
    pub input_type: InputType,
    /// HAL target device (`--iree-hal-target-device`); default `local`.
    pub target_device: String,
    /// Backend of the `local` device
    /// (`--iree-hal-local-target-device-backends`); default `llvm-cpu`.
    pub target_backend: String,
    /// CPU to generate code for (`--iree-llvmcpu-target-cpu`); default
    /// `host`, which bakes this machine's CPU features into the artifact
    /// (the disk cache therefore keys `host` by this machine's CPU).
    pub target_cpu: String,
    /// Further flags, passed after the ones above, each a complete
    /// `--name=value` argument. They must be *session* flags of the embedding
    /// API (the `--iree-*` compilation options); process-global LLVM/MLIR
    /// flags such as `--mlir-timing` are rejected by the in-process compiler.
    pub extra_flags: Vec<String>,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            input_type: InputType::Auto,
            target_device: "local".to_owned(),
            target_backend: "llvm-cpu".to_owned(),
            target_cpu: "host".to_owned(),
            extra_flags: Vec::new(),
        }
    }
}

impl CompileOptions {
    /// The default options for StableHLO input.
    pub fn stablehlo() -> Self {
        CompileOptions {
            input_type: InputType::StableHlo,
            ..CompileOptions::default()
        }
    }

    /// The exact command-line flags of this compilation, in order: target
    /// device, local backend, target CPU, input type (unless
    /// [`InputType::Auto`]), then [`extra_flags`](CompileOptions::extra_flags).
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec![
            format!("--iree-hal-target-device={}", self.target_device),
            format!(
                "--iree-hal-local-target-device-backends={}",
                self.target_backend
            ),
            format!("--iree-llvmcpu-target-cpu={}", self.target_cpu),
        ];
        match self.input_type {
            InputType::Auto => {}
            InputType::StableHlo => flags.push("--iree-input-type=stablehlo".to_owned()),
        }
        flags.extend(self.extra_flags.iter().cloned());
        flags
    }

    /// [`flags`](CompileOptions::flags), after checking that every flag is a
    /// `-`-prefixed argument without NUL bytes: a bare word would become an
    /// input file name for `iree-compile` and is refused by the embedding API.
    pub(crate) fn checked_flags(&self) -> Result<Vec<String>, CompileError> {
        let flags = self.flags();
        for flag in &flags {
            if !flag.starts_with('-') || flag.contains('\0') {
                return Err(CompileError::InvalidFlags {
                    flags: flags.clone(),
                    message: format!(
                        "`{}` is not a flag: each flag must start with `-` (e.g. \
                         `--iree-opt-level=O2`) and contain no NUL byte",
                        flag.escape_debug()
                    ),
                });
            }
        }
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_flags_target_the_local_cpu() {
        assert_eq!(
            CompileOptions::default().flags(),
            [
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-cpu=host",
            ]
        );
    }

    #[test]
    fn extra_flags_come_last() {
        let options = CompileOptions {
            target_cpu: "znver4".to_owned(),
            extra_flags: vec!["--iree-opt-level=O1".to_owned()],
            ..CompileOptions::stablehlo()
        };
        let flags = options.flags();
        assert_eq!(flags[2], "--iree-llvmcpu-target-cpu=znver4");
        assert_eq!(flags[3], "--iree-input-type=stablehlo");
        assert_eq!(flags[4], "--iree-opt-level=O1");
    }

    #[test]
    fn bare_words_and_nul_bytes_are_refused() {
        for bad in ["input.mlir", "--x=\0"] {
            let options = CompileOptions {
                extra_flags: vec![bad.to_owned()],
                ..CompileOptions::default()
            };
            let error = options.checked_flags().unwrap_err();
            assert!(
                matches!(error, CompileError::InvalidFlags { .. }),
                "{error}"
            );
            assert!(error.to_string().contains("is not a flag"), "{error}");
        }
    }
}
