//! The CPU names LLVM accepts for `--iree-llvmcpu-target-cpu`, per
//! architecture, as the pinned IREE 3.13 compiler's LLVM lists them (the
//! list it prints for an unknown name). A name it does not know is not an
//! error to LLVM: it warns "not a recognized processor", compiles for
//! no CPU at all, and then fails every compile ("64-bit code requested on
//! a subtarget that doesn't support it"), an LLVM fatal error that aborts
//! the process with the in-process compiler. So a target is checked
//! against this list before anything compiles ([`known_cpus`]); the test
//! below compares it with what the installed compiler prints, so a new
//! compiler release that adds CPUs fails it until the list follows.
//! `host` and `generic` are accepted everywhere; other architectures are
//! not checked.

/// The CPUs LLVM knows for `arch` (a target triple's first part, or
/// `std::env::consts::ARCH`): `None` for an architecture not listed here,
/// whose names are not checked. `host` and `generic` are always accepted
/// and are not in the lists.
///
/// ```
/// use iree_safe::compiler::known_cpus;
///
/// assert!(known_cpus("x86_64").unwrap().contains(&"znver4"));
/// assert!(!known_cpus("x86_64").unwrap().contains(&"not-a-cpu"));
/// assert!(known_cpus("aarch64").unwrap().contains(&"neoverse-v2"));
/// assert_eq!(known_cpus("riscv64"), None);
/// ```
pub fn known_cpus(arch: &str) -> Option<&'static [&'static str]> {
    match arch {
        "x86_64" | "amd64" => Some(X86_64),
        "aarch64" | "arm64" => Some(AARCH64),
        _ => None,
    }
}

/// LLVM's x86-64 CPUs.
const X86_64: &[&str] = &[
    "nocona",
    "core2",
    "penryn",
    "bonnell",
    "atom",
    "silvermont",
    "slm",
    "goldmont",
    "goldmont-plus",
    "tremont",
    "nehalem",
    "corei7",
    "westmere",
    "sandybridge",
    "corei7-avx",
    "ivybridge",
    "core-avx-i",
    "haswell",
    "core-avx2",
    "broadwell",
    "skylake",
    "skylake-avx512",
    "skx",
    "cascadelake",
    "cooperlake",
    "cannonlake",
    "icelake-client",
    "rocketlake",
    "icelake-server",
    "tigerlake",
    "sapphirerapids",
    "alderlake",
    "raptorlake",
    "meteorlake",
    "arrowlake",
    "arrowlake-s",
    "lunarlake",
    "gracemont",
    "pantherlake",
    "wildcatlake",
    "novalake",
    "sierraforest",
    "grandridge",
    "graniterapids",
    "graniterapids-d",
    "emeraldrapids",
    "clearwaterforest",
    "diamondrapids",
    "knl",
    "knm",
    "k8",
    "athlon64",
    "athlon-fx",
    "opteron",
    "k8-sse3",
    "athlon64-sse3",
    "opteron-sse3",
    "amdfam10",
    "barcelona",
    "btver1",
    "btver2",
    "bdver1",
    "bdver2",
    "bdver3",
    "bdver4",
    "znver1",
    "znver2",
    "znver3",
    "znver4",
    "znver5",
    "znver6",
    "c86-4g-m4",
    "c86-4g-m6",
    "c86-4g-m7",
    "c86-4g-m8",
    "x86-64",
    "x86-64-v2",
    "x86-64-v3",
    "x86-64-v4",
];

/// LLVM's AArch64 CPUs.
const AARCH64: &[&str] = &[
    "a64fx",
    "ampere1",
    "ampere1a",
    "ampere1b",
    "ampere1c",
    "apple-a10",
    "apple-a11",
    "apple-a12",
    "apple-a13",
    "apple-a14",
    "apple-a15",
    "apple-a16",
    "apple-a17",
    "apple-a18",
    "apple-a19",
    "apple-a7",
    "apple-a8",
    "apple-a9",
    "apple-m1",
    "apple-m2",
    "apple-m3",
    "apple-m4",
    "apple-m5",
    "apple-s10",
    "apple-s4",
    "apple-s5",
    "apple-s6",
    "apple-s7",
    "apple-s8",
    "apple-s9",
    "armagicpu",
    "c1-nano",
    "c1-premium",
    "c1-pro",
    "c1-ultra",
    "c2-pro",
    "c2-ultra",
    "carmel",
    "cobalt-100",
    "cortex-a320",
    "cortex-a34",
    "cortex-a35",
    "cortex-a510",
    "cortex-a520",
    "cortex-a520ae",
    "cortex-a53",
    "cortex-a55",
    "cortex-a57",
    "cortex-a65",
    "cortex-a65ae",
    "cortex-a710",
    "cortex-a715",
    "cortex-a72",
    "cortex-a720",
    "cortex-a720ae",
    "cortex-a725",
    "cortex-a73",
    "cortex-a75",
    "cortex-a76",
    "cortex-a76ae",
    "cortex-a77",
    "cortex-a78",
    "cortex-a78ae",
    "cortex-a78c",
    "cortex-r82",
    "cortex-r82ae",
    "cortex-x1",
    "cortex-x1c",
    "cortex-x2",
    "cortex-x3",
    "cortex-x4",
    "cortex-x925",
    "cyclone",
    "exynos-m3",
    "exynos-m4",
    "exynos-m5",
    "falkor",
    "fujitsu-monaka",
    "gb10",
    "generic",
    "grace",
    "hip12",
    "kryo",
    "neoverse-512tvb",
    "neoverse-e1",
    "neoverse-n1",
    "neoverse-n2",
    "neoverse-n3",
    "neoverse-v1",
    "neoverse-v2",
    "neoverse-v3",
    "neoverse-v3ae",
    "olympus",
    "oryon-1",
    "rigel",
    "saphira",
    "thunderx",
    "thunderx2t99",
    "thunderx3t110",
    "thunderxt81",
    "thunderxt83",
    "thunderxt88",
    "tsv110",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// What the installed `iree-compile` lists for `triple`'s architecture
    /// when asked for a CPU it does not know.
    fn listed(compiler: &std::path::Path, triple: &str) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("add.mlir");
        std::fs::write(
            &input,
            "func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n  \
             %y = arith.addf %x, %x : tensor<4xf32>\n  return %y : tensor<4xf32>\n}\n",
        )
        .unwrap();
        let output = std::process::Command::new(compiler)
            .args([
                "--iree-hal-target-device=local",
                "--iree-hal-local-target-device-backends=llvm-cpu",
                &format!("--iree-llvmcpu-target-triple={triple}"),
                "--iree-llvmcpu-target-cpu=not-a-cpu",
                "--compile-to=executable-targets",
            ])
            .arg(&input)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        let (_, list) = stderr
            .split_once("List of accepted CPUs:")
            .unwrap_or_else(|| panic!("no CPU list for {triple}: {stderr}"));
        let list = list.lines().next().unwrap_or_default();
        list.split(',').map(|cpu| cpu.trim().to_owned()).collect()
    }

    #[test]
    #[cfg_attr(miri, ignore)] // runs the compiler
    fn the_lists_are_the_installed_compilers() {
        let Ok(compiler) = super::super::locate_iree_compile() else {
            println!("skipped: no iree-compile to compare the lists with");
            return;
        };
        for (arch, triple) in [
            ("x86_64", "x86_64-unknown-linux-gnu"),
            ("aarch64", "aarch64-unknown-linux-gnu"),
        ] {
            let known: Vec<String> = known_cpus(arch)
                .unwrap()
                .iter()
                .map(|cpu| (*cpu).to_owned())
                .collect();
            assert_eq!(
                known,
                listed(&compiler, triple),
                "{arch}: update compiler/cpus.rs"
            );
        }
    }
}
