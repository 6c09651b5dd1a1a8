//! Policy files in the store's folder: a cache restarted on the folder
//! starts from what the last one learned, and a policy file that is
//! damaged, stale, too large or not safe to read is ignored with one
//! warning, deleted, and written again once the function learns. Every test
//! captures logs through the process-global subscriber of `capture_logs`,
//! so they sit in their own binary.
#![cfg(not(miri))] // file system

mod support;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use jit_cache::{stable_hash, CacheConfig, FunctionId, JitCache, LearnedPolicy, PolicyScope};
use jit_store::{ArtifactStore, StoreConfig, MAX_POLICY_FILES};
use support::{InStore, COMPILER, TARGET};
use test_support::mock_cache::{capture_logs, expected, mlp, run, MockCompiler, MockExe, Ran};

fn mlp_layer() -> FunctionId {
    FunctionId::new("mlp_layer", 0x5eaf).with_dynamic_dims()
}

/// A cache remembering in the store at `dir`.
fn cache_on(dir: &Path) -> JitCache<MockExe> {
    let store = ArtifactStore::open(StoreConfig::at(dir)).unwrap();
    JitCache::remembering(CacheConfig::default(), Arc::new(InStore(Arc::new(store)))).unwrap()
}

/// Runs batch sizes `sizes` of `mlp_layer` on `cache`, checking every
/// result; the compiles it took.
fn ragged(cache: &JitCache<MockExe>, sizes: &[i64]) -> usize {
    let compiler = MockCompiler::new();
    for &b in sizes {
        let (ran, _) = run(cache, &mlp_layer(), &mlp(b), &compiler);
        let value = match ran {
            Ran::Compiled(value) | Ran::Interpreted(value) => value,
        };
        let dynamic = value == expected(&mlp(-1));
        assert!(dynamic || value == expected(&mlp(b)), "batch {b}: {ran:?}");
    }
    compiler.compiles()
}

/// The policy files in the store at `dir`.
fn policy_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(listing) = fs::read_dir(dir.join("policy")) else {
        return Vec::new();
    };
    listing.map(|item| item.unwrap().path()).collect()
}

/// The one policy file in the store at `dir`.
fn the_policy_file(dir: &Path) -> PathBuf {
    let files = policy_files(dir);
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

/// `text` with its end line made to match again, as a writer would have.
fn resealed(text: &str) -> String {
    let at = text.trim_end_matches('\n').rfind('\n').unwrap() + 1;
    let body = &text[..at];
    format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes()))
}

/// A store where a first cache learned batch sizes 3, 5, 7 and 9; its
/// policy file.
fn learned_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ((), logs) = capture_logs(|| {
        assert_eq!(ragged(&cache_on(dir.path()), &[3, 5, 7, 9]), 2);
    });
    assert!(!logs.contains("WARN"), "{logs}");
    let file = the_policy_file(dir.path());
    (dir, file)
}

#[test]
fn a_cache_restarted_on_the_folder_starts_from_what_it_learned() {
    let (dir, file) = learned_store();
    let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(
        (mode(&dir.path().join("policy")), mode(&file)),
        (0o700, 0o600)
    );
    let text = fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("sheaf-jit policy 2\n"), "{text}");
    assert!(text.contains("\ndynamic\t0.0\t"), "{text}");

    let ((), logs) = capture_logs(|| {
        let cache = cache_on(dir.path());
        assert_eq!(ragged(&cache, &[40, 41, 3, 42]), 1, "the dynamic variant");
    });
    assert!(!logs.contains("WARN"), "{logs}");
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        text,
        "nothing new learned"
    );
}

#[test]
fn a_damaged_or_stale_policy_file_is_ignored_with_one_warning_and_replaced() {
    let (_learned, file) = learned_store();
    let good = fs::read_to_string(&file).unwrap();
    let other_definition = good.replacen("\t0000000000005eaf\n", "\t0000000000005eb0\n", 1);
    let other_dims = good.replacen("\ndynamic\t0.0\t", "\ndynamic\t0.5\t", 1);
    let cases: [(&str, Vec<u8>, &str); 8] = [
        ("garbage", b"\x7fELF garbage".to_vec(), "not a policy file"),
        ("not UTF-8", vec![0xff; 40], "not UTF-8"),
        (
            "truncated",
            good.as_bytes()[..good.len() / 2].to_vec(),
            "truncated",
        ),
        (
            "another version",
            good.replacen("policy 2", "policy 3", 1).into_bytes(),
            "this version reads",
        ),
        (
            "too large",
            vec![b'x'; LearnedPolicy::MAX_TEXT_BYTES + 1],
            "over the 65536",
        ),
        (
            "another definition",
            resealed(&other_definition).into_bytes(),
            "another definition of `mlp_layer`",
        ),
        (
            "dims the class does not have",
            resealed(&other_dims).into_bytes(),
            "does not have",
        ),
        ("empty", Vec::new(), "not a policy file"),
    ];
    for (what, bytes, why) in cases {
        let (dir, file) = learned_store();
        fs::write(&file, &bytes).unwrap();
        let ((), logs) = capture_logs(|| {
            let cache = cache_on(dir.path());
            // As in a new cache: one static size, then the dynamic variant.
            assert_eq!(ragged(&cache, &[40, 41, 42, 40]), 2, "{what}");
        });
        let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
        assert_eq!(warnings.len(), 1, "{what}: {logs}");
        assert!(
            warnings[0].contains("ignoring the learned policy of `mlp_layer`")
                && warnings[0].contains(why),
            "{what}: {}",
            warnings[0]
        );
        // Written again, whole, by what this cache learned.
        let text = fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("sheaf-jit policy 2\n"), "{what}: {text}");
        assert!(text.contains("\ndynamic\t0.0\t"), "{what}: {text}");
    }
}

#[test]
fn a_policy_file_that_is_not_safe_to_read_is_not_read() {
    let (dir, file) = learned_store();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
    let ((), logs) = capture_logs(|| {
        assert_eq!(ragged(&cache_on(dir.path()), &[40, 41, 42]), 2);
    });
    assert!(
        logs.contains("WARN") && logs.contains("not safe to read") && logs.contains("chmod go-w"),
        "{logs}"
    );

    let (dir, file) = learned_store();
    let elsewhere = dir.path().join("planted");
    fs::rename(&file, &elsewhere).unwrap();
    symlink(&elsewhere, &file).unwrap();
    let ((), logs) = capture_logs(|| {
        assert_eq!(ragged(&cache_on(dir.path()), &[40, 41, 42]), 2);
    });
    assert!(logs.contains("symbolic link"), "{logs}");
    assert!(fs::symlink_metadata(&file).unwrap().is_file(), "replaced");
}

/// Runs a cache on the store at `dir` whose `policy/` folder is not safe
/// to use: it starts from nothing (one static size, then the dynamic
/// variant), with one warning naming the folder and `why`, and neither
/// reads nor writes `file`, the policy file where the folder leads.
fn starts_from_nothing_without_touching(dir: &Path, file: &Path, why: &str) {
    let before = fs::read(file).unwrap();
    let ((), logs) = capture_logs(|| {
        assert_eq!(ragged(&cache_on(dir), &[40, 41, 42, 40]), 2, "{why}");
    });
    let warnings: Vec<&str> = logs.lines().filter(|l| l.contains("WARN")).collect();
    assert_eq!(warnings.len(), 1, "{why}: {logs}");
    let folder = dir.join("policy");
    assert!(
        warnings[0].contains("not using the learned policies")
            && warnings[0].contains(&folder.display().to_string())
            && warnings[0].contains(why),
        "{why}: {}",
        warnings[0]
    );
    assert_eq!(fs::read(file).unwrap(), before, "{why}: not rewritten");
}

#[test]
fn a_policy_folder_others_can_write_is_neither_read_nor_written() {
    let (dir, file) = learned_store();
    let folder = dir.path().join("policy");
    fs::set_permissions(&folder, fs::Permissions::from_mode(0o777)).unwrap();
    starts_from_nothing_without_touching(dir.path(), &file, "chmod 700");
    assert_eq!(policy_files(dir.path()), [file], "nothing added");
}

#[test]
fn a_policy_folder_that_is_a_link_is_not_followed() {
    let (dir, file) = learned_store();
    // The folder moved elsewhere, open to all, and a link in its place.
    let folder = dir.path().join("policy");
    let elsewhere = dir.path().join("planted");
    fs::rename(&folder, &elsewhere).unwrap();
    fs::set_permissions(&elsewhere, fs::Permissions::from_mode(0o777)).unwrap();
    symlink(&elsewhere, &folder).unwrap();
    let planted = elsewhere.join(file.file_name().unwrap());
    starts_from_nothing_without_touching(dir.path(), &planted, "symbolic link");
    assert!(fs::symlink_metadata(&folder).unwrap().is_symlink());
    assert_eq!(
        fs::read_dir(&elsewhere).unwrap().count(),
        1,
        "nothing added"
    );
}

#[test]
fn a_policy_folder_of_another_user_is_neither_read_nor_written() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: only root can give a folder to another user");
        return;
    }
    let (dir, file) = learned_store();
    let folder = dir.path().join("policy");
    std::os::unix::fs::chown(&folder, Some(4242), Some(4242)).unwrap();
    starts_from_nothing_without_touching(dir.path(), &file, "belongs to user 4242");
}

#[test]
fn older_policies_never_replace_newer_ones_and_files_are_bounded() {
    let (_learned, file) = learned_store();
    let f = mlp_layer();
    let same = PolicyScope::new(&f, COMPILER, TARGET);
    let learned = LearnedPolicy::from_text(&fs::read_to_string(file).unwrap(), &same).unwrap();
    let ((), logs) = capture_logs(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtifactStore::open(StoreConfig::at(dir.path())).unwrap();
        // A policy read back has sequence 0: once it is written, another of
        // the same sequence is not newer.
        assert!(store.keep_policy(&same, &learned));
        assert!(!store.keep_policy(&same, &learned), "not newer");
        assert_eq!(store.recall_policy(&same), Some(learned.clone()));
        // Another definition, compiler or target is another file.
        for other in [
            PolicyScope {
                definition_hash: 1,
                ..same
            },
            PolicyScope {
                compiler: "another compiler",
                ..same
            },
            PolicyScope {
                target: "another target",
                ..same
            },
        ] {
            assert_eq!(store.recall_policy(&other), None, "{other:?}");
        }
        // Beyond the bound, the least recently used files go.
        let names: Vec<String> = (0..=MAX_POLICY_FILES).map(|i| format!("f{i}")).collect();
        for name in &names {
            let scope = PolicyScope {
                function: name,
                ..same
            };
            let text = learned.to_text(&same).replacen(
                &format!("function\t{}", hex(f.name())),
                &format!("function\t{}", hex(name)),
                1,
            );
            let renamed = LearnedPolicy::from_text(&resealed(&text), &scope).unwrap();
            assert!(store.keep_policy(&scope, &renamed));
        }
        let files = policy_files(dir.path()).len();
        assert!(
            (MAX_POLICY_FILES / 10 * 9..=MAX_POLICY_FILES).contains(&files),
            "{files} policy files"
        );
    });
    assert!(!logs.contains("WARN"), "{logs}");
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}
