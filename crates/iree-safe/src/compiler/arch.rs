//! Which architecture the compiler runs on, against this process's: what
//! CPU code for this process must be compiled for.
//!
//! Without `--iree-llvmcpu-target-triple`, the `llvm-cpu` backend emits code
//! for the architecture the compiler runs on, and
//! `--iree-llvmcpu-target-cpu=host` names that machine's CPU. Both describe
//! this process only when the compiler runs on its architecture. The
//! in-process compiler always does (a library of another architecture does
//! not load: [`InProcessCompiler::load_from`](super::InProcessCompiler::load_from)
//! says so before trying). An `iree-compile` need not: an aarch64 process
//! run by qemu-user on an x86_64 machine starts the x86_64 `iree-compile`
//! of the install, which qemu hands to the host kernel, so it runs natively
//! and compiles for x86_64 unless told otherwise.
//!
//! So [`CompileTarget::process_cpu`] reads the architecture of the compiler
//! that a [`CompilerPreference`] would use from its ELF header (a few bytes
//! of a file; no process is started, no library loaded) and, when it is not
//! this process's, names this process's target triple with the `generic`
//! CPU of that architecture instead of `host`.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::locate::{compiler_library_is_explicit, locate_iree_compile};
use super::options::CompileTarget;
use super::CompilerPreference;

/// The CPU named when the compiler runs on another architecture: LLVM's
/// baseline of the target architecture (for aarch64, ARMv8-A with NEON),
/// which runs on every CPU of it.
pub const GENERIC_CPU: &str = "generic";

/// The LLVM target triple of the code this process runs
/// (`x86_64-unknown-linux-gnu`, `aarch64-unknown-linux-gnu`, ...): what CPU
/// code loaded into it must be compiled for.
pub fn process_triple() -> String {
    let arch = std::env::consts::ARCH;
    match std::env::consts::OS {
        "linux" if cfg!(target_env = "musl") => format!("{arch}-unknown-linux-musl"),
        "linux" => format!("{arch}-unknown-linux-gnu"),
        "macos" => format!("{arch}-apple-darwin"),
        os => format!("{arch}-unknown-{os}"),
    }
}

impl CompileTarget {
    /// The CPU this process runs on, as the compiler that `preference`
    /// picks can name it:
    ///
    /// - [`CompileTarget::host_cpu`] (`host`, the compiler's own triple)
    ///   when that compiler runs on this process's architecture, or when
    ///   which compiler it would be cannot be told (none is installed, or
    ///   its file is not an executable this can read);
    /// - otherwise this process's triple ([`process_triple`]) with the
    ///   [`GENERIC_CPU`]: an `iree-compile` of another architecture (an
    ///   aarch64 process under qemu-user running the x86_64 compiler) would
    ///   compile `host` for the machine it runs on.
    ///
    /// The in-process compiler is always this process's architecture. For
    /// [`CompilerPreference::Auto`] (and [`CompilerPreference::Disabled`],
    /// whose artifacts this install's compiler made) it is the in-process
    /// compiler when its library is this architecture's, else the
    /// `iree-compile` it falls back to. Reads at most two files' first
    /// bytes; starts nothing.
    pub fn process_cpu(preference: &CompilerPreference) -> CompileTarget {
        match foreign_compiler(preference) {
            None => CompileTarget::host_cpu(),
            Some((compiler, arch)) => {
                let triple = process_triple();
                tracing::info!(
                    compiler = %compiler.display(),
                    %arch,
                    %triple,
                    "the IREE compiler {} runs {arch} code, not {}: compiling for {triple}, CPU \
                     {GENERIC_CPU}",
                    compiler.display(),
                    std::env::consts::ARCH
                );
                CompileTarget::Cpu {
                    cpu: GENERIC_CPU.to_owned(),
                    triple: Some(triple),
                }
            }
        }
    }
}

/// The executable the compiler of `preference` runs as, and its
/// architecture, when that is known and not this process's.
fn foreign_compiler(preference: &CompilerPreference) -> Option<(PathBuf, String)> {
    let executable = match preference {
        CompilerPreference::InProcess | CompilerPreference::Library(_) => return None,
        CompilerPreference::Auto | CompilerPreference::Disabled => {
            // As `choose_compiler`: a library named by the variable (which
            // loads only if it is this process's), else `iree-compile`.
            if compiler_library_is_explicit() {
                return None;
            }
            locate_iree_compile().ok()?
        }
        CompilerPreference::Subprocess => locate_iree_compile().ok()?,
        CompilerPreference::Executable(path) => path.clone(),
    };
    let arch = executable_arch(&executable)?;
    arch.is_foreign().then(|| (executable, arch.to_string()))
}

/// The architecture of the ELF file at `path`, when it is known and not
/// this process's (`None` when it is this one's, or cannot be told).
#[cfg(any(test, feature = "in-process-compiler"))]
pub(crate) fn foreign_arch(path: &Path) -> Option<ElfArch> {
    let arch = ElfArch::of(&read_head(path)?)?;
    arch.is_foreign().then_some(arch)
}

/// The architecture `path` runs as: its own, for an ELF executable; its
/// interpreter's, for a `#!` script (pip's `iree-compile` launcher is one,
/// run by the venv's Python).
fn executable_arch(path: &Path) -> Option<ElfArch> {
    let head = read_head(path)?;
    if let Some(line) = head.strip_prefix(b"#!") {
        let line = line.split(|&byte| byte == b'\n').next()?;
        let line = std::str::from_utf8(line).ok()?;
        let interpreter = line.split_whitespace().next()?;
        return ElfArch::of(&read_head(Path::new(interpreter))?);
    }
    ElfArch::of(&head)
}

/// The first bytes of a file: an ELF header, or a `#!` line.
fn read_head(path: &Path) -> Option<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    std::fs::File::open(path)
        .ok()?
        .take(256)
        .read_to_end(&mut head)
        .ok()?;
    Some(head)
}

/// An ELF file's architecture: `e_machine` and whether it is 64-bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ElfArch {
    machine: u16,
    is_64: bool,
}

/// `e_machine` values (System V ABI, `elf.h`) of the architectures Rust's
/// `target_arch` names, with those names.
const MACHINES: &[(u16, &str)] = &[
    (3, "x86"),
    (62, "x86_64"),
    (40, "arm"),
    (183, "aarch64"),
    (243, "riscv"),
    (21, "powerpc64"),
    (22, "s390x"),
    (258, "loongarch64"),
];

impl ElfArch {
    /// This process's architecture, when it is one of [`MACHINES`].
    pub(crate) const PROCESS: Option<ElfArch> = {
        let machine = if cfg!(target_arch = "x86") {
            3
        } else if cfg!(target_arch = "x86_64") {
            62
        } else if cfg!(target_arch = "arm") {
            40
        } else if cfg!(target_arch = "aarch64") {
            183
        } else if cfg!(any(target_arch = "riscv32", target_arch = "riscv64")) {
            243
        } else if cfg!(target_arch = "powerpc64") {
            21
        } else if cfg!(target_arch = "s390x") {
            22
        } else if cfg!(target_arch = "loongarch64") {
            258
        } else {
            0
        };
        if machine == 0 {
            None
        } else {
            Some(ElfArch {
                machine,
                is_64: cfg!(target_pointer_width = "64"),
            })
        }
    };

    /// True when this is known not to be this process's architecture
    /// (false when they agree, or this process's is not in [`MACHINES`]).
    fn is_foreign(self) -> bool {
        ElfArch::PROCESS.is_some_and(|process| process != self)
    }

    /// The architecture of the ELF file whose first bytes are `head`
    /// (`None` when they are not an ELF header).
    pub(crate) fn of(head: &[u8]) -> Option<ElfArch> {
        // e_ident: magic, class (1: 32-bit, 2: 64-bit), data (1: little
        // endian, 2: big endian); e_machine follows e_ident and e_type.
        let (ident, rest) = head.split_first_chunk::<16>()?;
        if ident[..4] != *b"\x7fELF" {
            return None;
        }
        let machine = *rest.get(2..4)?.first_chunk::<2>()?;
        let machine = match ident[5] {
            1 => u16::from_le_bytes(machine),
            2 => u16::from_be_bytes(machine),
            _ => return None,
        };
        let is_64 = match ident[4] {
            1 => false,
            2 => true,
            _ => return None,
        };
        Some(ElfArch { machine, is_64 })
    }
}

impl std::fmt::Display for ElfArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match MACHINES
            .iter()
            .find(|(machine, _)| *machine == self.machine)
        {
            Some((243, _)) => write!(f, "riscv{}", if self.is_64 { 64 } else { 32 }),
            Some((_, name)) => f.write_str(name),
            None => write!(f, "ELF machine {}", self.machine),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 20 bytes of an ELF header: class, byte order, machine.
    fn header(is_64: bool, big_endian: bool, machine: u16) -> Vec<u8> {
        let mut head = b"\x7fELF".to_vec();
        head.push(if is_64 { 2 } else { 1 });
        head.push(if big_endian { 2 } else { 1 });
        head.extend([1; 10]); // version, OS ABI, padding
        head.extend([2, 0]); // e_type: an executable
        head.extend(if big_endian {
            machine.to_be_bytes()
        } else {
            machine.to_le_bytes()
        });
        head
    }

    #[test]
    fn elf_headers_name_their_architecture() {
        let aarch64 = ElfArch::of(&header(true, false, 183)).unwrap();
        assert_eq!(aarch64.to_string(), "aarch64");
        assert_eq!(
            ElfArch::of(&header(true, false, 62)).unwrap().to_string(),
            "x86_64"
        );
        assert_eq!(
            ElfArch::of(&header(true, true, 22)).unwrap().to_string(),
            "s390x"
        );
        assert_eq!(
            ElfArch::of(&header(false, false, 243)).unwrap().to_string(),
            "riscv32"
        );
        assert_eq!(
            ElfArch::of(&header(true, false, 9999)).unwrap().to_string(),
            "ELF machine 9999"
        );
        assert_eq!(ElfArch::of(b"#!/usr/bin/python3\n"), None);
        assert_eq!(ElfArch::of(&header(true, false, 183)[..17]), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // reads files
    fn this_process_is_native_and_another_machine_is_foreign() {
        let process = ElfArch::PROCESS.expect("the tests run on a listed architecture");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(executable_arch(&exe), Some(process));
        assert_eq!(foreign_arch(&exe), None);

        let dir = tempfile::tempdir().unwrap();
        let other = if process.machine == 183 { 62 } else { 183 };
        let foreign = dir.path().join("foreign");
        std::fs::write(&foreign, header(true, false, other)).unwrap();
        assert!(foreign_arch(&foreign).is_some());
        assert_eq!(
            foreign_compiler(&CompilerPreference::Executable(foreign.clone())),
            Some((
                foreign.clone(),
                ElfArch::of(&header(true, false, other))
                    .unwrap()
                    .to_string()
            ))
        );
        assert_eq!(
            foreign_compiler(&CompilerPreference::Executable(exe.clone())),
            None
        );

        // A script runs as its interpreter.
        let script = dir.path().join("launcher");
        std::fs::write(&script, format!("#!{} -E\nimport sys\n", foreign.display())).unwrap();
        assert_eq!(executable_arch(&script), foreign_arch(&foreign));
        let native_script = dir.path().join("native");
        std::fs::write(&native_script, format!("#!{}\n", exe.display())).unwrap();
        assert_eq!(executable_arch(&native_script), Some(process));

        // What cannot be read or told is not foreign.
        assert_eq!(foreign_arch(&dir.path().join("missing")), None);
        assert_eq!(executable_arch(&dir.path().join("missing")), None);
    }

    #[test]
    #[cfg_attr(miri, ignore)] // reads files
    fn a_foreign_compiler_gets_this_process_triple_and_a_generic_cpu() {
        let dir = tempfile::tempdir().unwrap();
        let process = ElfArch::PROCESS.unwrap();
        let other = if process.machine == 183 { 62 } else { 183 };
        let foreign = dir.path().join("iree-compile");
        std::fs::write(&foreign, header(true, false, other)).unwrap();
        assert_eq!(
            CompileTarget::process_cpu(&CompilerPreference::Executable(foreign)),
            CompileTarget::Cpu {
                cpu: GENERIC_CPU.to_owned(),
                triple: Some(process_triple()),
            }
        );
        let native = std::env::current_exe().unwrap();
        assert_eq!(
            CompileTarget::process_cpu(&CompilerPreference::Executable(native)),
            CompileTarget::host_cpu()
        );
        // The in-process compiler always runs on this architecture.
        assert_eq!(
            CompileTarget::process_cpu(&CompilerPreference::InProcess),
            CompileTarget::host_cpu()
        );
    }

    #[test]
    fn the_process_triple_names_this_architecture() {
        let triple = process_triple();
        assert!(
            triple.starts_with(&format!("{}-", std::env::consts::ARCH)),
            "{triple}"
        );
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(triple.ends_with("-unknown-linux-gnu"), "{triple}");
        }
    }
}
