//! `iree-compile --version` answers kept between processes
//! (`compiler::remember_versions_with`): a fresh process with a warm memory
//! runs no `--version`, and a rebuilt executable is asked again.
//! Each run is a child process of this test (the answers in memory are
//! process-wide), which has this file to itself.

#![cfg(not(iree_mock))]

mod compiler_support;

use std::path::{Path, PathBuf};

use compiler_support::{fake_iree_compile, version_runs};
use iree_safe::compiler::{
    choose_compiler, compiler_identity, remember_versions_with, CompilerPreference, VersionMemory,
};

const BUILD: &str = "3.13.0rc20990101 @ 0123456789abcdef0123456789abcdef01234567";
const REBUILT: &str = "3.13.0rc20990102 @ fedcba9876543210fedcba9876543210fedcba98";

/// In a child: the fake compiler's path, the memo folder and the build the
/// child must see, one per line.
const CHILD: &str = "IREE_SAFE_VERSION_MEMO_CHILD";
const TEST: &str = "a_fresh_process_with_a_warm_memo_runs_no_version";

#[test]
fn a_fresh_process_with_a_warm_memo_runs_no_version() {
    if let Some(job) = std::env::var_os(CHILD) {
        let job = job.into_string().unwrap();
        let [fake, memos, build] = job.lines().collect::<Vec<_>>()[..] else {
            panic!("{job}")
        };
        return identify(Path::new(fake), Path::new(memos), build);
    }
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("version-runs");
    let fake = fake_iree_compile(dir.path(), &counter, BUILD);
    let memos = dir.path().join("cache/compiler-versions");
    let run = |build: &str| {
        let job = format!("{}\n{}\n{build}", fake.display(), memos.display());
        let output = test_support::child::rerun(TEST)
            .env(CHILD, job)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "child failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    };
    run(BUILD);
    assert_eq!(version_runs(&counter), 1, "the first process asks");
    run(BUILD);
    assert_eq!(
        version_runs(&counter),
        1,
        "the second process reads the memo"
    );

    // A rebuilt executable (same path, another modification time) is asked
    // again, and its answer kept in turn.
    assert_eq!(fake_iree_compile(dir.path(), &counter, REBUILT), fake);
    run(REBUILT);
    assert_eq!(version_runs(&counter), 2);
    run(REBUILT);
    assert_eq!(version_runs(&counter), 2);
}

/// A memory of one file per executable in a folder (an artifact cache
/// keeps them under its own file rules; this test needs only what
/// survives its child processes).
struct Folder(PathBuf);

impl Folder {
    /// The file of `executable`, named by a hash that is the same in
    /// every process of this test binary (`DefaultHasher::new` has fixed
    /// keys).
    fn file(&self, executable: &str) -> PathBuf {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        executable.hash(&mut hasher);
        self.0.join(format!("{:016x}", hasher.finish()))
    }
}

impl VersionMemory for Folder {
    fn recall(&self, executable: &str) -> Option<String> {
        std::fs::read_to_string(self.file(executable)).ok()
    }

    fn keep(&self, executable: &str, record: &str) {
        std::fs::create_dir_all(&self.0).unwrap();
        std::fs::write(self.file(executable), record).unwrap();
    }
}

/// What a process does with the compiler: identify it for cache keys, and
/// choose it.
fn identify(fake: &Path, memos: &Path, build: &str) {
    remember_versions_with(Folder(memos.to_path_buf()));
    let preference = CompilerPreference::Executable(fake.to_path_buf());
    assert_eq!(compiler_identity(preference.clone()).unwrap(), build);
    let choice = choose_compiler(preference).unwrap();
    assert_eq!(choice.compiler.version().build(), build);
}
