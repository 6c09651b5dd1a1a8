//! Whether this machine's CPU can run a module's CPU code: the features
//! its `llvm-cpu` executables were compiled for, against the host's.
//!
//! Code compiled for a CPU this one is not (`--iree-llvmcpu-target-cpu=
//! diamondrapids` on a Sapphire Rapids or Zen 4 machine, a fleet's portable
//! target set too high) loads fine and dies of SIGILL at its first
//! instruction this CPU lacks. So [`Runtime::load`](crate::Runtime::load),
//! which every module passes (fresh compiles, the disk and remote caches,
//! bundles, imports), refuses a module that names a feature the host lacks
//! ([`Error::UnsupportedCpu`](crate::Error::UnsupportedCpu)).
//!
//! What a module needs: IREE 3.13 records each executable's target in the
//! module (the text of `#hal.executable.target<"llvm-cpu", ..., {cpu = "…",
//! cpu_features = "+adx,+aes,…", …}>`, kept for the message of a device
//! that cannot run it), with the features LLVM derived from the CPU name
//! (`diamondrapids` implies `+amx-fp16`). For the CPU `host`, the list is
//! the name's features followed by the ones LLVM read from CPUID, where a
//! later `-pku` takes back an earlier `+pku`, as in LLVM: a feature is
//! needed when its last mention enables it. No LLVM is needed at run time:
//! the compiler wrote the answer into the artifact.
//!
//! What the host has: the `flags` line of `/proc/cpuinfo` (Linux, x86-64),
//! in the kernel's names, which [`CHECKED`] maps to LLVM's. Only those
//! features are checked: the instruction-set extensions compiled numeric
//! code uses (SIMD, AMX, bit manipulation, crypto). The rest are either in
//! every x86-64 CPU (`x87`, `cx8`, `sse2`), not code generation features,
//! or ones the kernel does not report (under a hypervisor it may hide some
//! that LLVM's CPUID reading sees, such as `pku`), so a `host` module
//! would be refused for them. `rdrand` and `rdseed` are not checked either:
//! LLVM emits those instructions only for their own intrinsics (random
//! numbers), which compiled tensor code never calls, and Linux clears
//! `rdseed` from the flags of AMD Zen 5 CPUs (its 32-bit form is broken:
//! "RDSEED32 is broken. Disabling the corresponding CPUID bit." at boot)
//! while CPUID, which the `host` target reads, still has it: checked, every
//! `host` module on such a machine would be refused. On other systems and
//! architectures nothing is checked.
//!
//! `IREE_SAFE_ASSUME_CPU_LACKS` (LLVM feature names, `,`-separated, such
//! as `avx512f,avx512bw`) makes this machine count as lacking those
//! features too: a machine that stands for a fleet's weakest refuses what
//! the weakest could not run, and a test can play the machine of a fleet
//! that lacks what another has. It can only refuse more, never make code
//! for a feature this CPU lacks load.

use std::sync::OnceLock;

/// LLVM's name of each checked x86 feature, and the kernel's
/// (`arch/x86/include/asm/cpufeatures.h`, as `/proc/cpuinfo` prints them).
pub(crate) const CHECKED: &[(&str, &str)] = &[
    ("sse3", "pni"),
    ("ssse3", "ssse3"),
    ("sse4.1", "sse4_1"),
    ("sse4.2", "sse4_2"),
    ("sse4a", "sse4a"),
    ("popcnt", "popcnt"),
    ("avx", "avx"),
    ("avx2", "avx2"),
    ("fma", "fma"),
    ("fma4", "fma4"),
    ("xop", "xop"),
    ("tbm", "tbm"),
    ("f16c", "f16c"),
    ("bmi", "bmi1"),
    ("bmi2", "bmi2"),
    ("lzcnt", "abm"),
    ("movbe", "movbe"),
    ("adx", "adx"),
    ("aes", "aes"),
    ("pclmul", "pclmulqdq"),
    ("sha", "sha_ni"),
    ("sha512", "sha512"),
    ("sm3", "sm3"),
    ("sm4", "sm4"),
    ("gfni", "gfni"),
    ("vaes", "vaes"),
    ("vpclmulqdq", "vpclmulqdq"),
    ("avx512f", "avx512f"),
    ("avx512cd", "avx512cd"),
    ("avx512dq", "avx512dq"),
    ("avx512bw", "avx512bw"),
    ("avx512vl", "avx512vl"),
    ("avx512ifma", "avx512ifma"),
    ("avx512vbmi", "avx512vbmi"),
    ("avx512vbmi2", "avx512_vbmi2"),
    ("avx512vnni", "avx512_vnni"),
    ("avx512bitalg", "avx512_bitalg"),
    ("avx512vpopcntdq", "avx512_vpopcntdq"),
    ("avx512bf16", "avx512_bf16"),
    ("avx512fp16", "avx512_fp16"),
    ("avx512vp2intersect", "avx512_vp2intersect"),
    ("avxvnni", "avx_vnni"),
    ("avxifma", "avx_ifma"),
    ("avxvnniint8", "avx_vnni_int8"),
    ("avxvnniint16", "avx_vnni_int16"),
    ("avxneconvert", "avx_ne_convert"),
    ("cmpccxadd", "cmpccxadd"),
    ("amx-tile", "amx_tile"),
    ("amx-int8", "amx_int8"),
    ("amx-bf16", "amx_bf16"),
    ("amx-fp16", "amx_fp16"),
    ("amx-complex", "amx_complex"),
];

/// The kernel's CPU flags of this machine, `None` where they cannot be
/// read (not Linux, not x86-64, or under miri, which isolates the file
/// system): then nothing is checked.
fn host_flags() -> Option<&'static [String]> {
    static FLAGS: OnceLock<Option<Vec<String>>> = OnceLock::new();
    FLAGS
        .get_or_init(|| {
            if cfg!(miri) || !cfg!(all(target_os = "linux", target_arch = "x86_64")) {
                return None;
            }
            let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
            let mut flags = flags_of(&cpuinfo)?;
            let lacks = std::env::var("IREE_SAFE_ASSUME_CPU_LACKS").unwrap_or_default();
            for feature in lacks.split(',').map(str::trim) {
                if let Some((_, kernel)) = CHECKED.iter().find(|(llvm, _)| *llvm == feature) {
                    flags.retain(|flag| flag != kernel);
                }
            }
            Some(flags)
        })
        .as_deref()
}

/// The `flags` of the first processor of a `/proc/cpuinfo` text.
fn flags_of(cpuinfo: &str) -> Option<Vec<String>> {
    let line = cpuinfo.lines().find(|line| {
        line.split_once(':')
            .is_some_and(|(key, _)| key.trim() == "flags")
    })?;
    let (_, flags) = line.split_once(':')?;
    Some(flags.split_whitespace().map(str::to_owned).collect())
}

/// A CPU a module's code needs and the checked features of it this
/// machine lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported {
    pub(crate) cpu: String,
    pub(crate) missing: Vec<String>,
}

/// The first `llvm-cpu` target of `vmfb` that needs a checked feature this
/// machine lacks, if any.
pub(crate) fn unsupported(vmfb: &[u8]) -> Option<Unsupported> {
    let flags = host_flags()?;
    unsupported_with(vmfb, flags)
}

/// [`unsupported`] against the kernel flags `flags`.
fn unsupported_with(vmfb: &[u8], flags: &[String]) -> Option<Unsupported> {
    targets(vmfb).into_iter().find_map(|(cpu, features)| {
        let missing: Vec<String> = enabled(&features)
            .filter(|feature| {
                CHECKED
                    .iter()
                    .find(|(llvm, _)| llvm == feature)
                    .is_some_and(|(_, kernel)| !flags.iter().any(|flag| flag == kernel))
            })
            .map(str::to_owned)
            .collect();
        (!missing.is_empty()).then_some(Unsupported { cpu, missing })
    })
}

/// The features a target's list leaves enabled, each once, in the order of
/// their first mention: as in LLVM, the last `+name` or `-name` of a
/// feature decides.
fn enabled(features: &[String]) -> impl Iterator<Item = &str> {
    let mut seen = Vec::new();
    for feature in features {
        let (on, name) = match feature.split_at_checked(1) {
            Some(("+", name)) => (true, name),
            Some(("-", name)) => (false, name),
            _ => continue,
        };
        match seen.iter_mut().find(|(known, _)| *known == name) {
            Some((_, last)) => *last = on,
            None => seen.push((name, on)),
        }
    }
    seen.into_iter().filter_map(|(name, on)| on.then_some(name))
}

/// Where an `llvm-cpu` executable target's text starts.
const TARGET: &[u8] = b"#hal.executable.target<\"llvm-cpu\"";

/// The most bytes of one target's text read: its attributes, data layout
/// and feature list fit in a few KiB.
const TARGET_TEXT: usize = 16 << 10;

/// The CPU and features of each `llvm-cpu` target the module's text names.
fn targets(vmfb: &[u8]) -> Vec<(String, Vec<String>)> {
    let mut found = Vec::new();
    let mut rest = vmfb;
    while let Some(at) = find(rest, TARGET) {
        rest = &rest[at + TARGET.len()..];
        let text = &rest[..rest.len().min(TARGET_TEXT)];
        // The attributes' dictionary ends at its `}`.
        let text = text.split(|&byte| byte == b'}').next().unwrap_or(text);
        let text = String::from_utf8_lossy(text);
        let quoted = |name: &str| {
            let (_, after) = text.split_once(&format!("{name} = \""))?;
            Some(after.split('"').next()?.to_owned())
        };
        if let Some(features) = quoted("cpu_features") {
            let cpu = quoted("cpu").unwrap_or_default();
            let features = features.split(',').map(str::to_owned).collect();
            found.push((cpu, features));
        }
    }
    found
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(cpu: &str, features: &str) -> Vec<u8> {
        let mut bytes = b"\x00\x01vmfb".to_vec();
        bytes.extend(
            format!(
                "HAL device `__device_0` not found or unavailable: #hal.device.target<\"local\", \
                 [#hal.executable.target<\"llvm-cpu\", \"embedded-elf-x86_64\", {{cpu = \
                 \"{cpu}\", cpu_features = \"{features}\", data_layout = \"e-m:e\", \
                 native_vector_size = 64 : i64}}>]>"
            )
            .bytes(),
        );
        bytes.extend(b"\x00more");
        bytes
    }

    fn flags(text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn a_feature_the_host_lacks_is_named_and_others_pass() {
        let zen4 = flags("fpu sse sse2 pni ssse3 sse4_1 sse4_2 avx avx2 fma avx512f avx512_bf16");
        let needs = module(
            "diamondrapids",
            "+avx,+avx512bf16,+amx-fp16,+amx-tile,+x87,-sse4a",
        );
        assert_eq!(
            unsupported_with(&needs, &zen4),
            Some(Unsupported {
                cpu: "diamondrapids".into(),
                missing: vec!["amx-fp16".into(), "amx-tile".into()],
            })
        );
        // Unchecked (`x87`) and disabled (`-`) features need nothing.
        let fits = module("znver4", "+avx,+avx2,+avx512bf16,+x87,+64bit,-amx-tile");
        assert_eq!(unsupported_with(&fits, &zen4), None);
        // A module without CPU targets (GPU code, VMVX) needs nothing.
        assert_eq!(unsupported_with(b"no targets here", &zen4), None);
    }

    #[test]
    fn the_last_mention_of_a_feature_decides_and_each_is_named_once() {
        // `host` on a Zen 4 whose hypervisor hides AVX-512 from CPUID: the
        // CPU name's features, then CPUID's, which take AVX-512 back.
        let hidden = flags("fpu sse sse2 pni avx avx2 fma");
        let host = module(
            "znver4",
            "+avx2,+avx512f,+avx512bw,+fma,+avx2,-avx512f,-avx512bw,+fma",
        );
        assert_eq!(unsupported_with(&host, &hidden), None);
        // Enabled again after being disabled, and named twice: needed, and
        // named once.
        let again = module("znver4", "+avx512f,-avx512f,+avx512f,+avx512bw,+avx512bw");
        assert_eq!(
            unsupported_with(&again, &hidden),
            Some(Unsupported {
                cpu: "znver4".into(),
                missing: vec!["avx512f".into(), "avx512bw".into()],
            })
        );
    }

    #[test]
    fn random_number_instructions_are_not_checked() {
        // A Zen 5 under Linux, which clears `rdseed` from its flags (its
        // 32-bit form is broken) while CPUID, and so a `host` module,
        // keeps it.
        let zen5 = flags("fpu sse sse2 pni avx avx2 fma avx512f rdrand");
        let host = module("znver5", "+avx2,+avx512f,+rdrnd,+rdseed,+rdseed");
        assert_eq!(unsupported_with(&host, &zen5), None);
    }

    #[test]
    fn the_kernel_flags_are_read_from_the_first_processor() {
        let cpuinfo =
            "processor\t: 0\nflags\t\t: fpu avx2 avx512f\nbugs\t\t: x\n\nprocessor\t: 1\n";
        assert_eq!(
            flags_of(cpuinfo),
            Some(vec!["fpu".into(), "avx2".into(), "avx512f".into()])
        );
        assert_eq!(flags_of("Features\t: neon"), None);
    }
}
