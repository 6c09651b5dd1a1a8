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

/// The device an artifact is compiled for, and its architecture.
///
/// Each variant stands for the flags IREE needs for that device (see
/// [`CompileOptions::flags`]); the HAL driver that runs the artifact must
/// match (`local-sync`/`local-task` for [`CompileTarget::Cpu`], `cuda` for
/// [`CompileTarget::Cuda`], ...). Compiling for a GPU needs no GPU: only
/// loading the artifact does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompileTarget {
    /// The CPU, through the `llvm-cpu` backend of the `local` device.
    Cpu {
        /// `--iree-llvmcpu-target-cpu`: `host` bakes the CPU features of
        /// the machine the compiler runs on into the artifact (keys of
        /// shared caches must then name the CPU: see
        /// [`CompileOptions::target_identity`]), or an LLVM CPU name of the
        /// target architecture, such as `x86-64-v3` or `generic`, for a
        /// portable artifact.
        cpu: String,
        /// `--iree-llvmcpu-target-triple`, such as
        /// `aarch64-unknown-linux-gnu`; `None` passes none, so the compiler
        /// emits code for the architecture it runs on. Name one when that
        /// may not be the architecture of the process that loads the
        /// artifact (see [`CompileTarget::process_cpu`]).
        triple: Option<String>,
    },
    /// NVIDIA GPUs: `--iree-cuda-target`, e.g. `sm_80`.
    Cuda {
        /// The compute capability, `sm_<major><minor>`.
        arch: String,
    },
    /// Vulkan (SPIR-V): `--iree-vulkan-target`, e.g. `rdna3`, `ampere`, or
    /// IREE's portable baseline `vp_android_baseline_2022`.
    Vulkan {
        /// The Vulkan target.
        target: String,
        /// `--iree-vulkan-target-features` (joined with commas; none: the
        /// target's own): the SPIR-V version and capabilities of the device
        /// that runs the code, e.g. `spirv:v1.6`, `cap:Shader`, `cap:Float16`.
        features: Vec<String>,
    },
    /// Apple GPUs through Metal (SPIR-V cross-compiled to Metal Shading
    /// Language; compiled to a `.metallib` only where Apple's `xcrun` is
    /// installed, else the MSL source is embedded).
    Metal,
    /// AMD GPUs through HIP: `--iree-hip-target`, e.g. `gfx942`.
    Hip {
        /// The GPU architecture.
        arch: String,
    },
}

impl CompileTarget {
    /// The CPU of the machine the compiler runs on (`llvm-cpu`, `host`, the
    /// compiler's own triple): this process's CPU when the compiler runs on
    /// its architecture, which [`CompileTarget::process_cpu`] checks.
    pub fn host_cpu() -> Self {
        CompileTarget::Cpu {
            cpu: "host".to_owned(),
            triple: None,
        }
    }

    /// The target's flags, in order.
    fn flags(&self) -> Vec<String> {
        match self {
            CompileTarget::Cpu { cpu, triple } => {
                let mut flags = vec![
                    "--iree-hal-target-device=local".to_owned(),
                    "--iree-hal-local-target-device-backends=llvm-cpu".to_owned(),
                ];
                flags.extend(
                    triple
                        .iter()
                        .map(|triple| format!("--iree-llvmcpu-target-triple={triple}")),
                );
                flags.push(format!("--iree-llvmcpu-target-cpu={cpu}"));
                flags
            }
            CompileTarget::Cuda { arch } => vec![
                "--iree-hal-target-device=cuda".to_owned(),
                format!("--iree-cuda-target={arch}"),
            ],
            CompileTarget::Vulkan { target, features } => {
                let mut flags = vec![
                    "--iree-hal-target-device=vulkan".to_owned(),
                    format!("--iree-vulkan-target={target}"),
                ];
                if !features.is_empty() {
                    flags.push(format!(
                        "--iree-vulkan-target-features={}",
                        features.join(",")
                    ));
                }
                flags
            }
            CompileTarget::Metal => vec!["--iree-hal-target-device=metal".to_owned()],
            CompileTarget::Hip { arch } => vec![
                "--iree-hal-target-device=hip".to_owned(),
                format!("--iree-hip-target={arch}"),
            ],
        }
    }
}

impl std::fmt::Display for CompileTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileTarget::Cpu { cpu, triple: None } => write!(f, "cpu:{cpu}"),
            CompileTarget::Cpu {
                cpu,
                triple: Some(triple),
            } => write!(f, "cpu:{cpu} ({triple})"),
            CompileTarget::Cuda { arch } => write!(f, "cuda:{arch}"),
            CompileTarget::Vulkan { target, features } if features.is_empty() => {
                write!(f, "vulkan:{target}")
            }
            CompileTarget::Vulkan { target, features } => {
                write!(f, "vulkan:{target}[{}]", features.join(","))
            }
            CompileTarget::Metal => f.write_str("metal"),
            CompileTarget::Hip { arch } => write!(f, "hip:{arch}"),
        }
    }
}

/// Options of one compilation: the target and any extra compiler flags.
///
/// Both compiler implementations pass exactly [`flags`](CompileOptions::flags)
/// to IREE, and artifact caches key on them, so two options values that
/// produce the same flags are the same compilation.
///
/// # Precedence of flags
///
/// Each option reaches the compiler once, with one value, whatever order
/// the compiler itself would give repeated flags:
///
/// - the flags of [`target`](Self::target) and [`input_type`](Self::input_type)
///   come first and cannot be overridden: an extra flag that sets one of
///   their options to another value (`--iree-llvmcpu-target-cpu=znver4`
///   against the target's `host`) is an error naming both
///   ([`CompileError::InvalidFlags`] at compile time); the same value again
///   is dropped;
/// - among [`extra_flags`](Self::extra_flags), **a later flag wins**: an
///   option given more than once keeps its last value, at the place of its
///   last occurrence. An option is named by what comes between the leading
///   dashes and the first `=` (`-x`, `--x` and `--x=true` set one option),
///   so a list option given twice keeps its last value only.
///
/// A library that adds flags of its own (a CPU or float-semantics flag,
/// say) puts them before its caller's, so the caller's choice wins.
///
/// ```
/// use iree_safe::compiler::CompileOptions;
///
/// let mut options = CompileOptions::stablehlo();
/// options.extra_flags = vec![
///     "--iree-llvmcpu-reassociate-fp-reductions=true".into(),
///     "--iree-opt-const-eval=false".into(),
///     "--iree-llvmcpu-reassociate-fp-reductions=false".into(),
/// ];
/// assert_eq!(
///     options.flags()[4..],
///     ["--iree-opt-const-eval=false", "--iree-llvmcpu-reassociate-fp-reductions=false"]
/// );
/// ```
///
/// ```
/// use iree_safe::compiler::{CompileOptions, CompileTarget, InputType};
///
/// let mut options = CompileOptions::default();
/// options.input_type = InputType::StableHlo;
/// assert_eq!(
///     options.flags(),
///     [
///         "--iree-hal-target-device=local",
///         "--iree-hal-local-target-device-backends=llvm-cpu",
///         "--iree-llvmcpu-target-cpu=host",
///         "--iree-input-type=stablehlo",
///     ]
/// );
/// let mut cuda = CompileOptions::stablehlo();
/// cuda.target = CompileTarget::Cuda { arch: "sm_80".into() };
/// assert_eq!(cuda.flags()[..2], ["--iree-hal-target-device=cuda", "--iree-cuda-target=sm_80"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct CompileOptions {
    /// Input dialect; default [`InputType::Auto`].
    pub input_type: InputType,
    /// What to compile for; default the host CPU.
    pub target: CompileTarget,
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
            target: CompileTarget::host_cpu(),
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

    /// The flags of the target and the input type (unless
    /// [`InputType::Auto`]), in order.
    fn typed_flags(&self) -> Vec<String> {
        let mut flags = self.target.flags();
        match self.input_type {
            InputType::Auto => {}
            InputType::StableHlo => flags.push("--iree-input-type=stablehlo".to_owned()),
        }
        flags
    }

    /// The exact command-line flags of this compilation, in order: the
    /// target's, the input type (unless [`InputType::Auto`]), then
    /// [`extra_flags`](CompileOptions::extra_flags) with each option once,
    /// its last value (see "Precedence of flags" above). An extra flag
    /// that repeats a typed one exactly is dropped; one that contradicts
    /// it is kept here and refused when compiling.
    pub fn flags(&self) -> Vec<String> {
        let typed = self.typed_flags();
        let extra = self.extra_flags.iter().enumerate().filter(|&(i, flag)| {
            let name = option_name(flag);
            let overridden = self.extra_flags[i + 1..]
                .iter()
                .any(|later| option_name(later) == name);
            !overridden && !typed.contains(flag)
        });
        let extra: Vec<String> = extra.map(|(_, flag)| flag.clone()).collect();
        let mut flags = typed;
        flags.extend(extra);
        flags
    }

    /// [`flags`](CompileOptions::flags), after checking that every flag is a
    /// `-`-prefixed argument without NUL bytes (a bare word would become an
    /// input file name for `iree-compile` and is refused by the embedding
    /// API), and that no extra flag contradicts the target or input type:
    /// what both compilers check before they run, for a caller that wants
    /// to refuse bad options sooner.
    ///
    /// # Errors
    ///
    /// [`CompileError::InvalidFlags`], saying which flag and why.
    pub fn checked_flags(&self) -> Result<Vec<String>, CompileError> {
        let flags = self.flags();
        let invalid = |message: String| CompileError::InvalidFlags {
            flags: flags.clone(),
            message,
        };
        for flag in &flags {
            if !flag.starts_with('-') || flag.contains('\0') {
                return Err(invalid(format!(
                    "`{}` is not a flag: each flag must start with `-` (e.g. \
                     `--iree-opt-level=O2`) and contain no NUL byte",
                    flag.escape_debug()
                )));
            }
        }
        self.check_extra_flags()?;
        let typed = self.typed_flags();
        for flag in &self.extra_flags {
            let set = typed
                .iter()
                .find(|typed| option_name(typed) == option_name(flag) && *typed != flag);
            if let Some(typed_flag) = set {
                let field = if option_name(typed_flag) == "iree-input-type" {
                    "CompileOptions::input_type"
                } else {
                    "CompileOptions::target"
                };
                return Err(invalid(format!(
                    "the extra flag `{flag}` contradicts `{typed_flag}`, which {field} sets: \
                     set {field} instead (the target's flags cannot be overridden)"
                )));
            }
        }
        Ok(flags)
    }
}

impl CompileOptions {
    /// Checks that no extra flag keeps the compiler from writing the VM
    /// bytecode module a runtime loads: `--help` and `--version` (the
    /// compiler prints and exits, successfully, with no module),
    /// `--compile-to` another phase than `end` and `--compile-mode`
    /// another than `std` (IR instead of a module), `--output-format`
    /// another than `vm-bytecode`, `-o` (the compilers take the output
    /// themselves) and `--split-input-file`. Such a flag made every
    /// compile fail (or return something that is not a module).
    /// [`checked_flags`](Self::checked_flags) checks this too.
    ///
    /// # Errors
    ///
    /// [`CompileError::InvalidFlags`] naming the flag and why.
    pub fn check_extra_flags(&self) -> Result<(), CompileError> {
        for flag in &self.extra_flags {
            let (name, value) = match flag.trim_start_matches('-').split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (option_name(flag), None),
            };
            let why = match (name, value) {
                ("help" | "help-hidden" | "help-list" | "help-list-hidden" | "h", _)
                | ("version", _) => "makes the compiler print and exit without compiling",
                ("compile-to", value) if value != Some("end") => {
                    "stops the compile before the VM bytecode module that is loaded"
                }
                ("compile-mode", value) if value != Some("std") => {
                    "makes the compiler write something else than the module that is loaded"
                }
                ("output-format", value) if value != Some("vm-bytecode") => {
                    "makes the compiler write another format than the VM bytecode that is loaded"
                }
                ("o" | "output-file", _) => "names an output file, which the compilers choose",
                ("split-input-file", _) => "makes each part of the input a module of its own",
                _ => continue,
            };
            return Err(CompileError::InvalidFlags {
                flags: self.flags(),
                message: format!("the extra flag `{flag}` {why}: remove it"),
            });
        }
        Ok(())
    }
}

/// The option a flag sets: what comes between its leading dashes and its
/// first `=` (`--iree-opt-level=O2` → `iree-opt-level`).
fn option_name(flag: &str) -> &str {
    let flag = flag.trim_start_matches('-');
    flag.split_once('=').map_or(flag, |(name, _)| name)
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
    fn flags_that_leave_no_module_are_refused() {
        // Each made every compile fail (or succeed with no module).
        for flag in [
            "--help",
            "-h",
            "--version",
            "--compile-to=input",
            "--compile-mode=vm",
            "--output-format=vm-asm",
            "-o",
            "--split-input-file",
        ] {
            let options = CompileOptions {
                extra_flags: vec![flag.to_owned()],
                ..CompileOptions::default()
            };
            let error = options.checked_flags().unwrap_err().to_string();
            assert!(
                error.contains(flag) && error.contains("remove it"),
                "{error}"
            );
        }
        for flag in [
            "--compile-to=end",
            "--output-format=vm-bytecode",
            "--iree-opt-level=O2",
            "--mlir-print-ir-after-all",
        ] {
            let options = CompileOptions {
                extra_flags: vec![flag.to_owned()],
                ..CompileOptions::default()
            };
            assert!(options.checked_flags().is_ok(), "{flag}");
        }
    }

    #[test]
    fn extra_flags_come_last() {
        let options = CompileOptions {
            target: CompileTarget::Cpu {
                cpu: "znver4".to_owned(),
                triple: None,
            },
            extra_flags: vec!["--iree-opt-level=O1".to_owned()],
            ..CompileOptions::stablehlo()
        };
        let flags = options.flags();
        assert_eq!(flags[2], "--iree-llvmcpu-target-cpu=znver4");
        assert_eq!(flags[3], "--iree-input-type=stablehlo");
        assert_eq!(flags[4], "--iree-opt-level=O1");
    }

    #[test]
    fn a_later_extra_flag_wins_and_each_option_is_passed_once() {
        let options = CompileOptions {
            extra_flags: [
                "--iree-llvmcpu-reassociate-fp-reductions=true",
                "--iree-opt-data-tiling",
                "--iree-opt-level=O2",
                "-iree-opt-data-tiling=false",
                "--iree-llvmcpu-reassociate-fp-reductions=false",
                "--iree-input-type=stablehlo",
                "--iree-llvmcpu-target-cpu=host",
            ]
            .map(String::from)
            .to_vec(),
            ..CompileOptions::stablehlo()
        };
        let flags = options.checked_flags().unwrap();
        assert_eq!(
            flags[4..],
            [
                "--iree-opt-level=O2",
                "-iree-opt-data-tiling=false",
                "--iree-llvmcpu-reassociate-fp-reductions=false",
            ],
            "the last value of each, at its last place; the typed flags repeated exactly \
             are dropped"
        );
        assert_eq!(flags[..4], CompileOptions::stablehlo().flags()[..]);
    }

    #[test]
    fn an_extra_flag_that_contradicts_the_target_is_an_error_naming_both() {
        for (flag, typed, field) in [
            (
                "--iree-llvmcpu-target-cpu=znver4",
                "--iree-llvmcpu-target-cpu=host",
                "CompileOptions::target",
            ),
            (
                "-iree-hal-target-device=cuda",
                "--iree-hal-target-device=local",
                "CompileOptions::target",
            ),
            (
                "--iree-input-type=tosa",
                "--iree-input-type=stablehlo",
                "CompileOptions::input_type",
            ),
        ] {
            let options = CompileOptions {
                extra_flags: vec![flag.to_owned()],
                ..CompileOptions::stablehlo()
            };
            let error = options.checked_flags().unwrap_err();
            let message = error.to_string();
            assert!(
                matches!(error, CompileError::InvalidFlags { .. }),
                "{message}"
            );
            for part in [flag, typed, field] {
                assert!(message.contains(part), "{part}: {message}");
            }
        }
    }

    #[test]
    fn vulkan_features_are_passed_only_when_named() {
        let target = |features: &[&str]| CompileOptions {
            target: CompileTarget::Vulkan {
                target: "vp_android_baseline_2022".to_owned(),
                features: features.iter().map(|f| (*f).to_owned()).collect(),
            },
            ..CompileOptions::default()
        };
        let baseline = target(&[]);
        assert_eq!(
            baseline.flags(),
            [
                "--iree-hal-target-device=vulkan",
                "--iree-vulkan-target=vp_android_baseline_2022",
            ]
        );
        assert_eq!(
            baseline.target.to_string(),
            "vulkan:vp_android_baseline_2022"
        );
        let device = target(&["spirv:v1.6", "cap:Shader", "cap:Float64"]);
        assert_eq!(
            device.flags()[2],
            "--iree-vulkan-target-features=spirv:v1.6,cap:Shader,cap:Float64"
        );
        assert_eq!(
            device.target.to_string(),
            "vulkan:vp_android_baseline_2022[spirv:v1.6,cap:Shader,cap:Float64]"
        );
        assert_ne!(baseline.target_identity(), device.target_identity());
    }

    #[test]
    fn a_triple_comes_before_the_cpu() {
        let target = CompileTarget::Cpu {
            cpu: "generic".to_owned(),
            triple: Some("aarch64-unknown-linux-gnu".to_owned()),
        };
        let options = CompileOptions {
            target: target.clone(),
            ..CompileOptions::default()
        };
        assert_eq!(
            options.flags(),
            [
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                "--iree-llvmcpu-target-triple=aarch64-unknown-linux-gnu",
                "--iree-llvmcpu-target-cpu=generic",
            ]
        );
        assert_eq!(
            target.to_string(),
            "cpu:generic (aarch64-unknown-linux-gnu)"
        );
        assert_eq!(CompileTarget::host_cpu().to_string(), "cpu:host");
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
