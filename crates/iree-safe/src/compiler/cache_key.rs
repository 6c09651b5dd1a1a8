//! The disk cache's key: SHA-256 over everything that determines an
//! artifact's bytes.

use std::fmt;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use super::version::CompilerVersion;

/// Bumped whenever what goes into the key changes meaning.
const DOMAIN: &str = "sheaf-jit/vmfb-cache/key-v1";

/// SHA-256 of (MLIR text, compiler build, runtime build, the exact flags,
/// and, for `--iree-llvmcpu-target-cpu=host`, this machine's CPU).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct CacheKey([u8; 32]);

impl CacheKey {
    /// `target_cpu` is the [`CompileOptions::target_cpu`] the `flags` were
    /// made from: `host` artifacts only run on CPUs with the same features,
    /// so a cache directory shared between machines must not mix them up.
    ///
    /// [`CompileOptions::target_cpu`]: super::CompileOptions::target_cpu
    pub(crate) fn new(
        mlir: &str,
        flags: &[String],
        target_cpu: &str,
        compiler: &CompilerVersion,
    ) -> Self {
        let host = if target_cpu == "host" { host_cpu() } else { "" };
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_le_bytes());
            hasher.update(bytes);
        };
        field(DOMAIN.as_bytes());
        field(compiler.build().as_bytes());
        field(iree_sys::build_info::RUNTIME_BUILD.as_bytes());
        field(host.as_bytes());
        field(&(flags.len() as u64).to_le_bytes());
        for flag in flags {
            field(flag.as_bytes());
        }
        field(mlir.as_bytes());
        CacheKey(hasher.finalize().into())
    }

    pub(crate) fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lower-case hex: the entry's file name.
    pub(crate) fn hex(&self) -> String {
        hex(&self.0)
    }
}

impl fmt::Debug for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CacheKey({})", self.hex())
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    use fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut text, byte| {
            let _ = write!(text, "{byte:02x}");
            text
        })
}

/// What LLVM's `host` CPU means on this machine: the identification and
/// feature lines of the first processor in `/proc/cpuinfo` (Linux), else the
/// architecture and the CPU features the standard library can detect.
fn host_cpu() -> &'static str {
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
    #[allow(unused_mut)]
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

    fn key(mlir: &str, flags: &[&str], cpu: &str, build: &str) -> CacheKey {
        let flags: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        CacheKey::new(mlir, &flags, cpu, &CompilerVersion::new(build, None))
    }

    #[test]
    fn every_input_changes_the_key() {
        let base = key("module {}", &["--a", "--b"], "znver4", "3.13 @ abc");
        assert_eq!(
            base,
            key("module {}", &["--a", "--b"], "znver4", "3.13 @ abc")
        );
        assert_ne!(
            base,
            key("module { }", &["--a", "--b"], "znver4", "3.13 @ abc")
        );
        assert_ne!(
            base,
            key("module {}", &["--b", "--a"], "znver4", "3.13 @ abc")
        );
        assert_ne!(
            base,
            key("module {}", &["--a", "--b"], "znver4", "3.13 @ abd")
        );
        // Length prefixes keep field boundaries apart.
        assert_ne!(base, key("module {}", &["--a--b"], "znver4", "3.13 @ abc"));
        assert_eq!(base.hex().len(), 64);
    }

    #[test]
    fn hex_is_lower_case_and_zero_padded() {
        assert_eq!(hex(&[0x00, 0x0f, 0xab]), "000fab");
    }
}
