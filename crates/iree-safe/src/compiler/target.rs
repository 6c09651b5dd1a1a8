//! What a compilation's target means on this machine.
//!
//! `--iree-llvmcpu-target-cpu=host` bakes this machine's CPU features into
//! the artifact, so whoever keys compiled artifacts (a cache shared between
//! machines, an exported bundle) must key `host` by the CPU it stands for.
//! [`CompileOptions::target_identity`] gives that text.

use std::sync::OnceLock;

use super::options::{CompileOptions, CompileTarget};

impl CompileOptions {
    /// The target these options compile for, with `host` resolved: the
    /// flags (a CPU target's triple among them, when it names one), then,
    /// when the CPU is `host`, this machine's CPU (see [`host_cpu`]). Two
    /// machines get the same identity only when their artifacts are
    /// interchangeable.
    pub fn target_identity(&self) -> String {
        let mut identity = self.flags().join("\n");
        if matches!(&self.target, CompileTarget::Cpu { cpu, .. } if cpu == "host") {
            identity.push_str("\nhost=");
            identity.push_str(host_cpu());
        }
        identity
    }
}

/// What LLVM's `host` CPU means on this machine: the identification and
/// feature lines of the first processor in `/proc/cpuinfo` (Linux), else the
/// architecture and the CPU features the standard library can detect.
pub fn host_cpu() -> &'static str {
    static HOST: OnceLock<String> = OnceLock::new();
    HOST.get_or_init(|| {
        const KEYS: &[&str] = &[
            "vendor_id",
            "cpu family",
            "model",
            "model name",
            "flags",
            "CPU implementer",
            "CPU architecture",
            "CPU variant",
            "CPU part",
            "Features",
            "isa",
        ];
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let first = cpuinfo.split("\n\n").next().unwrap_or("");
        let lines: Vec<&str> = first
            .lines()
            .filter(|line| {
                line.split_once(':')
                    .is_some_and(|(key, _)| KEYS.contains(&key.trim()))
            })
            .collect();
        if lines.is_empty() {
            detected_features()
        } else {
            lines.join("\n")
        }
    })
}

fn detected_features() -> String {
    #[allow(unused_mut, reason = "only the x86_64 block below appends to it")]
    let mut text = std::env::consts::ARCH.to_owned();
    #[cfg(target_arch = "x86_64")]
    {
        macro_rules! features {
            ($($feature:tt),*) => {$(
                if std::arch::is_x86_feature_detected!($feature) {
                    text.push(' ');
                    text.push_str($feature);
                }
            )*};
        }
        features!(
            "sse3",
            "ssse3",
            "sse4.1",
            "sse4.2",
            "popcnt",
            "avx",
            "avx2",
            "fma",
            "f16c",
            "bmi1",
            "bmi2",
            "lzcnt",
            "avx512f",
            "avx512cd",
            "avx512bw",
            "avx512dq",
            "avx512vl",
            "avx512vnni",
            "avx512bf16",
            "avx512fp16",
            "avx512vbmi",
            "avx512vbmi2",
            "avxvnni",
            "gfni",
            "vaes",
            "vpclmulqdq"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // reads /proc/cpuinfo
    fn host_is_resolved_and_explicit_cpus_are_not() {
        let host = CompileOptions::default();
        assert!(host.target_identity().contains("\nhost="));
        assert!(!host_cpu().is_empty());
        let generic = CompileOptions {
            target: CompileTarget::Cpu {
                cpu: "x86-64-v3".to_owned(),
                triple: None,
            },
            ..CompileOptions::default()
        };
        assert_eq!(generic.target_identity(), generic.flags().join("\n"));
    }

    #[test]
    fn the_triple_is_part_of_the_identity() {
        let cpu = |triple: Option<&str>| CompileOptions {
            target: CompileTarget::Cpu {
                cpu: "generic".to_owned(),
                triple: triple.map(str::to_owned),
            },
            ..CompileOptions::default()
        };
        let aarch64 = cpu(Some("aarch64-unknown-linux-gnu")).target_identity();
        assert!(
            aarch64.contains("--iree-llvmcpu-target-triple=aarch64-unknown-linux-gnu"),
            "{aarch64}"
        );
        assert_ne!(aarch64, cpu(None).target_identity());
        assert_ne!(
            aarch64,
            cpu(Some("x86_64-unknown-linux-gnu")).target_identity()
        );
    }
}
