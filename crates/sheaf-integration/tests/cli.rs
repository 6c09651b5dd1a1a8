//! The `sheaf-jit-cache` command end to end (cargo feature `cli`): a real
//! runtime fills a disk cache with the ping-pong's four variants and
//! exports a bundle; each subcommand then runs on them, and what it
//! prints, its exit status and what is left on disk are checked, a
//! tampered entry (refused, with its reason) and the pruning and clearing
//! included.

use std::fs;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder},
    JitConfig, JitRuntime, Value,
};

/// Runs the command with `args`; its output.
fn run(args: &[&str]) -> Output {
    test_support::child::command(env!("CARGO_BIN_EXE_sheaf-jit-cache"))
        .args(args)
        .output()
        .unwrap()
}

/// Runs the command in the disk cache `dir`; its exit code and stdout.
fn run_in(dir: &Path, args: &[&str]) -> (i32, String) {
    let mut all = vec!["--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let output = run(&all);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("$ sheaf-jit-cache {}\n{stdout}{stderr}", all.join(" "));
    (output.status.code().unwrap(), stdout)
}

/// The ping-pong's four variants (`sigmoid` at two shapes, `softmax` at
/// two temperatures), compiled into the disk cache `dir`; a bundle of
/// them exported to `bundle`.
fn fill(dir: &Path, bundle: &Path) {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.to_path_buf()))
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let data = vec![-2.0f32, -0.5, 0.0, 0.75, 3.0];
    for i in 0..4 {
        let shape: &[usize] = if i % 2 == 0 { &[1, 5] } else { &[1, 5, 1] };
        let x = Value::host(ArrayD::from_shape_vec(IxDyn(shape), data.clone()).unwrap());
        jit.call(&reference::sigmoid(), &[x], &[], |args, _, _| {
            reference::interpret_sigmoid(args)
        })
        .unwrap();
        let t = if i % 2 == 0 { 0.5 } else { 1.0 };
        let rows = Value::host(ArrayD::from_shape_vec(IxDyn(&[1, 5]), data.clone()).unwrap());
        jit.call(
            &reference::softmax(),
            &[rows],
            &[reference::temperature(t)],
            |args, _, _| reference::interpret_softmax(args, t),
        )
        .unwrap();
    }
    assert_eq!(jit.entries().len(), 4);
    jit.export_artifacts(bundle).unwrap();
}

/// The entry files of the disk cache `dir`.
fn entry_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = fs::read_dir(dir.join("vmfb"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "sjit"))
        .collect();
    files.sort();
    files
}

/// Flips the last byte of `path` (its artifact's): the size stays, the tag
/// no longer verifies.
fn flip_last_byte(path: &Path) {
    let mut bytes = fs::read(path).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    fs::write(path, bytes).unwrap();
}

/// Sets the last use of the entry `path` to `seconds` ago.
fn set_unused_for(path: &Path, seconds: u64) {
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(seconds))
        .unwrap();
}

#[test]
fn every_subcommand_on_a_cache_the_runtime_filled() {
    let root = tempfile::tempdir().unwrap();
    let (dir, bundle) = (root.path().join("cache"), root.path().join("bundle"));
    fill(&dir, &bundle);

    let (code, stats) = run_in(&dir, &["stats"]);
    assert_eq!(code, 0);
    assert!(stats.contains("entries      4 ("), "{stats}");
    assert!(stats.contains("policies     2 functions'"), "{stats}");
    assert!(
        !stats.contains("none recorded"),
        "the compiler is recorded: {stats}"
    );

    let (code, list) = run_in(&dir, &["list"]);
    assert_eq!(code, 0);
    let keys = list.lines().filter(|line| line.contains("  used ")).count();
    assert_eq!(keys, 4, "{list}");
    for line in [
        "cached   (f32[1,5])",
        "cached   (f32[1,5,1])",
        "cached   (f32[1,5]) {temperature=0.5}",
        "cached   (f32[1,5]) {temperature=1.0}",
    ] {
        assert!(list.contains(line), "{line}: {list}");
    }
    assert!(
        list.contains("sigmoid #") && list.contains("with the recorded compiler"),
        "{list}"
    );

    let (code, verify) = run_in(&dir, &["verify"]);
    assert_eq!(code, 0, "{verify}");
    assert!(verify.contains("4 entries: 4 ok, 0 refused"), "{verify}");

    // One entry forged (a flipped byte), one cut short: both refused, with
    // the reason; nothing deleted.
    let files = entry_files(&dir);
    flip_last_byte(&files[0]);
    let bytes = fs::read(&files[1]).unwrap();
    fs::write(&files[1], &bytes[..40]).unwrap();
    let (code, verify) = run_in(&dir, &["verify"]);
    assert_eq!(code, 1, "{verify}");
    assert!(verify.contains("4 entries: 2 ok, 2 refused"), "{verify}");
    let refusal = |file: &Path| {
        let name = file.display().to_string();
        verify
            .lines()
            .find(|line| line.contains("REFUSED") && line.contains(&name))
            .unwrap_or_else(|| panic!("{name} refused: {verify}"))
            .to_owned()
    };
    assert!(refusal(&files[0]).contains("unauthenticated: its tag does not verify"));
    assert!(refusal(&files[1]).contains("corrupt: 40 bytes: shorter than a header"));
    assert_eq!(entry_files(&dir).len(), 4, "verify deletes nothing");

    // Prune: the entry unused for two days goes with --older-than 1d; then
    // the least recently used go until the rest fit in 1 KiB. (Each file's
    // last use is set: files written within a clock tick tie.)
    set_unused_for(&files[2], 2 * 86_400);
    set_unused_for(&files[0], 3600);
    set_unused_for(&files[3], 1800);
    let (code, pruned) = run_in(&dir, &["prune", "--older-than", "1d"]);
    assert_eq!(code, 0);
    assert!(pruned.starts_with("deleted 1 entries"), "{pruned}");
    assert!(!files[2].exists() && files[3].exists());
    let (code, pruned) = run_in(&dir, &["prune", "--max-bytes", "1K"]);
    assert_eq!(code, 0);
    // The two whole entries go, the least recently used first; the 40-byte
    // stub, used last, fits.
    assert!(
        pruned.contains("deleted 2 entries") && pruned.contains("1 left (40 B)"),
        "{pruned}"
    );
    assert_eq!(entry_files(&dir), [files[1].clone()]);

    let (code, cleared) = run_in(&dir, &["clear"]);
    assert_eq!(code, 0);
    assert!(
        cleared.starts_with("deleted 1 entries (40 B) and 2 policy files"),
        "{cleared}"
    );
    assert!(entry_files(&dir).is_empty());
    assert!(dir.join("secret").exists(), "the secret stays");
    let (_, stats) = run_in(&dir, &["stats"]);
    assert!(stats.contains("entries      0 ("), "{stats}");

    // The bundle: its manifest, then its checks, before and after damage.
    let (code, inspect) = run_in(&dir, &["bundle", "inspect", bundle.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(inspect.contains("4 artifacts ("), "{inspect}");
    assert_eq!(inspect.matches("  sigmoid#").count(), 2, "{inspect}");
    assert_eq!(inspect.matches("  softmax#").count(), 2, "{inspect}");
    let (code, verify) = run_in(&dir, &["bundle", "verify", bundle.to_str().unwrap()]);
    assert_eq!(code, 0, "{verify}");
    assert!(
        verify.contains("this program's runtime opens it"),
        "{verify}"
    );
    assert!(verify.contains("4 entries: 4 ok, 0 refused"), "{verify}");
    let bundled = entry_files(&bundle);
    flip_last_byte(&bundled[3]);
    let (code, verify) = run_in(&dir, &["bundle", "verify", bundle.to_str().unwrap()]);
    assert_eq!(code, 1, "{verify}");
    assert!(verify.contains("4 entries: 3 ok, 1 refused"), "{verify}");
    assert!(
        verify.contains("REFUSED") && verify.contains("unauthenticated"),
        "{verify}"
    );
}

#[test]
fn help_and_usage_errors() {
    let help = run(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    for command in [
        "stats",
        "list",
        "verify",
        "prune",
        "clear",
        "bundle inspect",
        "bundle verify",
    ] {
        assert!(text.contains(&format!("  {command} ")), "{command}: {text}");
    }
    for command in ["stats", "list", "verify", "prune", "clear", "bundle"] {
        let help = run(&[command, "--help"]);
        assert!(help.status.success(), "{command}");
        let text = String::from_utf8(help.stdout).unwrap();
        assert!(
            text.starts_with("usage: sheaf-jit-cache "),
            "{command}: {text}"
        );
    }
    let refused = |args: &[&str], says: &str| {
        let output = run(args);
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(&[], "a command is needed");
    refused(&["frobnicate"], "unknown command `frobnicate`");
    refused(
        &["prune"],
        "prune needs --older-than DURATION or --max-bytes N",
    );
    refused(
        &["prune", "--older-than", "3 days"],
        "expected a whole number and a unit",
    );
    refused(&["prune", "--max-bytes", "lots"], "--max-bytes `lots`");
    refused(&["stats", "extra"], "extra");
    refused(&["list", "--max-bytes", "1"], "--max-bytes");
    refused(&["bundle", "open", "x"], "bundle inspect|verify DIR");
    // A missing folder is said, not made.
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("none");
    let (code, said) = run_in(&missing, &["list"]);
    assert_eq!(
        (code, said.starts_with("no disk cache at")),
        (0, true),
        "{said}"
    );
    assert!(!missing.exists());
}

#[test]
fn a_reader_that_leaves_ends_the_command_quietly() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    // stdout a pipe whose reader is gone (as `sheaf-jit-cache list | head`
    // once `head` is done): writing fails with EPIPE.
    let (reader, writer) = rustix::pipe::pipe().unwrap();
    drop(reader);
    for command in ["list", "--help"] {
        let output = test_support::child::command(env!("CARGO_BIN_EXE_sheaf-jit-cache"))
            .args(["--dir", dir.to_str().unwrap(), command])
            .stdout(std::process::Stdio::from(writer.try_clone().unwrap()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{command}: {stderr}");
        assert!(!stderr.contains("panicked"), "{command}: {stderr}");
    }
}
