//! The `sheaf-jit-cache` command end to end (cargo feature `cli`): a real
//! runtime fills a disk cache with the ping-pong's four variants and
//! exports a bundle; each subcommand then runs on them, and what it
//! prints, its exit status and what is left on disk are checked, a
//! tampered entry (refused, with its reason) and the pruning and clearing
//! included. Then, on folders made by hand, what the command must never
//! do: follow a link out of the cache, print a name that forges a line or
//! drives the terminal, write anything in a read-only command, or delete
//! what is not provably the cache's own. Every command also speaks the
//! JSON that `docs/cli-json.md` documents.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, DirBuilderExt, MetadataExt};
use std::path::Path;
use std::process::Output;
use std::time::{Duration, SystemTime};

use jit_store::{ArtifactKey, ArtifactStore, KeyParts, StoreConfig};
use ndarray::{ArrayD, IxDyn};
use sheaf_integration::lowering::stable_hash;
use sheaf_integration::{
    reference,
    settings::{CompileMode, DiskCacheFolder, SigningKeySource},
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
    assert!(refusal(&files[0]).contains("unauthenticated: its tag (or signature) does not verify"));
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
    // Only what is provably the cache's own goes: the whole entry; the
    // forged one and the 40-byte stub stay, and are said to.
    assert!(
        pruned.contains("deleted 1 entries") && pruned.contains("2 left ("),
        "{pruned}"
    );
    assert!(pruned.contains("left 2 files that are not provably the cache's own"));
    assert_eq!(entry_files(&dir), [files[0].clone(), files[1].clone()]);

    let (code, cleared) = run_in(&dir, &["clear"]);
    assert_eq!(code, 0);
    assert!(
        cleared.starts_with("deleted 0 entries (0 B) and 2 policy files"),
        "{cleared}"
    );
    assert!(cleared.contains("left 2 files"), "{cleared}");
    assert_eq!(entry_files(&dir), [files[0].clone(), files[1].clone()]);
    for file in &files[..2] {
        fs::remove_file(file).unwrap();
    }
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
        "keygen",
    ] {
        assert!(text.contains(&format!("  {command} ")), "{command}: {text}");
    }
    for command in [
        "stats", "list", "verify", "prune", "clear", "bundle", "keygen",
    ] {
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
    refused(
        &["bundle", "open", "x"],
        "bundle inspect|verify [--trusted-keys KEYS] DIR",
    );
    refused(&["verify", "--trusted-keys", "k"], "--trusted-keys");
    refused(&["keygen"], "keygen [--public] FILE");
    refused(&["stats", "--public"], "--public");
    refused(&["list", "--zero"], "--zero");
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

/// Runs the command with `--json` and `args` in the disk cache `dir`;
/// its exit code and the one JSON object it printed.
fn json_in(dir: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let mut all = vec!["--json", "--dir", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let output = run(&all);
    let stdout = String::from_utf8(output.stdout).unwrap();
    println!("$ sheaf-jit-cache {}\n{stdout}", all.join(" "));
    assert_eq!(stdout.lines().count(), 1, "one line: {stdout}");
    let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(value["schema"], 1, "{value}");
    (output.status.code().unwrap(), value)
}

#[test]
fn every_command_speaks_the_documented_json() {
    let root = tempfile::tempdir().unwrap();
    let (dir, bundle) = (root.path().join("cache"), root.path().join("bundle"));
    fill(&dir, &bundle);
    // Every command and field of the schema, as docs/cli-json.md lists them.
    let page = include_str!("../../../docs/cli-json.md");

    let (code, stats) = json_in(&dir, &["stats"]);
    assert_eq!(
        (code, &stats["command"], &stats["ok"]),
        (0, &"stats".into(), &true.into())
    );
    assert_eq!(stats["entries"], 4);
    assert_eq!(stats["policies"], 2);
    assert_eq!(
        stats["totals"]["runs"], 1,
        "fill's runtime added its counts"
    );
    assert_eq!(stats["totals"]["calls"]["calls"], 8);
    assert!(stats["compiler"].is_string());

    let (_, list) = json_in(&dir, &["list"]);
    let entries = list["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 4);
    assert_eq!(entries[0]["key"].as_str().unwrap().len(), 64);
    let policies = list["policies"].as_array().unwrap();
    let functions: Vec<_> = policies
        .iter()
        .map(|p| p["function"].as_str().unwrap())
        .collect();
    assert!(
        functions.contains(&"sigmoid") && functions.contains(&"softmax"),
        "{list}"
    );
    assert!(
        policies.iter().all(|p| p["recorded_compiler"] == true),
        "{list}"
    );

    let (code, bundled) = json_in(&dir, &["bundle", "inspect", bundle.to_str().unwrap()]);
    assert_eq!(
        (code, bundled["variants"].as_array().unwrap().len()),
        (0, 4)
    );
    let (code, checked) = json_in(&dir, &["bundle", "verify", bundle.to_str().unwrap()]);
    assert_eq!(
        (code, &checked["ok"], &checked["refused"]),
        (0, &true.into(), &0.into())
    );

    flip_last_byte(&entry_files(&dir)[0]);
    let (code, verify) = json_in(&dir, &["verify"]);
    assert_eq!(
        (code, &verify["ok"], &verify["refused"]),
        (1, &false.into(), &1.into())
    );
    let refused: Vec<_> = verify["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|entry| entry["ok"] == false)
        .collect();
    assert!(
        refused[0]["check"]
            .as_str()
            .unwrap()
            .contains("unauthenticated"),
        "{verify}"
    );

    let (_, pruned) = json_in(&dir, &["prune", "--max-bytes", "1"]);
    assert_eq!(pruned["deleted_entries"], 3, "the authentic ones: {pruned}");
    assert_eq!(
        (&pruned["not_own"], &pruned["entries_left"]),
        (&1.into(), &1.into())
    );
    let (_, cleared) = json_in(&dir, &["clear"]);
    assert_eq!(cleared["deleted_policies"], 2);
    let (_, zeroed) = json_in(&dir, &["stats", "--zero"]);
    assert_eq!(
        (&zeroed["command"], &zeroed["zeroed"]["runs"]),
        (&"zero".into(), &1.into())
    );

    let key = root.path().join("key");
    let (_, made) = json_in(&dir, &["keygen", key.to_str().unwrap()]);
    assert!(made["public_key"].as_str().unwrap().starts_with("ed25519:"));
    // A failure is a JSON object too, with the error.
    let (code, failed) = json_in(&dir, &["keygen", key.to_str().unwrap()]);
    assert_eq!((code, &failed["ok"]), (1, &false.into()));
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("never overwritten"),
        "{failed}"
    );
    let (code, missing) = json_in(&root.path().join("none"), &["list"]);
    assert_eq!((code, &missing["exists"]), (0, &false.into()));

    for value in [
        &stats, &list, &bundled, &checked, &verify, &pruned, &cleared, &zeroed, &made,
    ] {
        let command = value["command"].as_str().unwrap();
        assert!(
            page.contains(&format!("`{command}`")),
            "{command} is documented"
        );
        for field in value.as_object().unwrap().keys() {
            assert!(
                page.contains(&format!("`{field}`")),
                "{command}: `{field}` is documented"
            );
        }
    }
}

/// Set in a child process: the disk cache it calls sigmoid with.
const CALLER_DIR: &str = "SHEAF_JIT_CLI_TEST_CALLER_DIR";

/// Runtimes (one per process) and the calls each makes.
const CALLERS: usize = 3;
const CALLS: usize = 5;

#[test]
fn stats_sums_every_process_and_zero_resets() {
    const TEST: &str = "stats_sums_every_process_and_zero_resets";
    if let Some(dir) = std::env::var_os(CALLER_DIR) {
        let config = JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .build()
            .unwrap();
        let jit = JitRuntime::new(config).unwrap();
        let x = Value::host(ArrayD::from_shape_vec(IxDyn(&[1, 3]), vec![0.5f32; 3]).unwrap());
        for _ in 0..CALLS {
            jit.call(
                &reference::sigmoid(),
                std::slice::from_ref(&x),
                &[],
                |args, _, _| reference::interpret_sigmoid(args),
            )
            .unwrap();
        }
        return; // the runtime adds its counts as the process exits
    }
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            test_support::child::rerun(TEST)
                .env(CALLER_DIR, &dir)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut caller in callers {
        assert!(caller.wait().unwrap().success());
    }
    let (code, stats) = run_in(&dir, &["stats"]);
    assert_eq!(code, 0);
    assert!(
        stats.contains(&format!("runs         {CALLERS} runtimes")),
        "{stats}"
    );
    let calls = CALLERS * CALLS;
    assert!(
        stats.contains(&format!("calls        {calls}: ")),
        "{stats}"
    );
    // Each process missed in memory once, then found the artifact on disk
    // or compiled it.
    let disk = stats.lines().find(|l| l.starts_with("disk  ")).unwrap();
    let hits: usize = disk.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        stats.contains(&format!("{CALLERS} misses; {} compiles", CALLERS - hits)),
        "{stats}"
    );
    let (code, zeroed) = run_in(&dir, &["stats", "--zero"]);
    assert_eq!(code, 0);
    assert_eq!(
        zeroed,
        format!("statistics zeroed (they held {CALLERS} runs, {calls} calls)\n")
    );
    let (_, stats) = run_in(&dir, &["stats"]);
    assert!(stats.contains("runs         0 runtimes"), "{stats}");
    assert!(stats.contains("calls        0: "), "{stats}");
}

#[test]
fn keygen_makes_a_key_once_and_prints_its_public_half() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("signing-key");
    let path = file.to_str().unwrap();
    let made = run(&["keygen", path]);
    assert!(made.status.success(), "{made:?}");
    let printed = String::from_utf8(made.stdout).unwrap();
    let public: jit_store::PublicKey = printed.trim_end().parse().unwrap();
    let metadata = fs::metadata(&file).unwrap();
    assert_eq!((metadata.len(), metadata.mode() & 0o777), (32, 0o600));
    // The runtime reads the same key from it.
    assert_eq!(
        jit_store::SigningKey::from_file(&file)
            .unwrap()
            .public_key(),
        public
    );
    let again = run(&["keygen", "--public", path]);
    assert_eq!(String::from_utf8(again.stdout).unwrap(), printed);
    // Never over an existing key.
    let before = fs::read(&file).unwrap();
    let refused = run(&["keygen", path]);
    let stderr = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("never overwritten"), "{stderr}");
    assert_eq!(fs::read(&file).unwrap(), before);
    // A key others may write is refused, saying what to run.
    fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o620)).unwrap();
    let open = run(&["keygen", "--public", path]);
    let stderr = String::from_utf8(open.stderr).unwrap();
    assert_eq!(open.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("chmod go-w"), "{stderr}");
}

#[test]
fn bundle_commands_check_a_signed_bundle_with_the_trusted_keys_and_name_its_signer() {
    let root = tempfile::tempdir().unwrap();
    let (cache, bundle, key_file) = (
        root.path().join("cache"),
        root.path().join("bundle"),
        root.path().join("signing-key"),
    );
    let made = run(&["keygen", key_file.to_str().unwrap()]);
    let public = String::from_utf8(made.stdout)
        .unwrap()
        .trim_end()
        .to_owned();
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(cache.clone()))
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .trust(|trust| trust.signing_key = Some(SigningKeySource::File(key_file.clone())))
        .build()
        .unwrap();
    let jit = JitRuntime::new(config).unwrap();
    let x = Value::host(ArrayD::from_shape_vec(IxDyn(&[1, 5]), vec![0.5f32; 5]).unwrap());
    jit.call(&reference::sigmoid(), &[x], &[], |args, _, _| {
        reference::interpret_sigmoid(args)
    })
    .unwrap();
    let summary = jit.export_artifacts(&bundle).unwrap();
    assert_eq!(
        summary.signer.map(|key| key.to_string()),
        Some(public.clone())
    );
    let bundle = bundle.to_str().unwrap();

    // The public key inline, or a file of keys: the same verdict.
    let keys_file = root.path().join("trusted-keys");
    fs::write(&keys_file, format!("# CI\n{public}\n")).unwrap();
    for keys in [public.as_str(), keys_file.to_str().unwrap()] {
        let (code, verify) = run_in(
            &cache,
            &["bundle", "verify", "--trusted-keys", keys, bundle],
        );
        assert_eq!(code, 0, "{verify}");
        assert!(
            verify.contains(&format!(
                "(signed by {public}): this program's runtime opens it"
            )),
            "{verify}"
        );
        assert!(verify.contains("1 entries: 1 ok, 0 refused"), "{verify}");
        assert!(verify.contains(&format!("signed by {public})")), "{verify}");
    }
    let (code, inspect) = run_in(
        &cache,
        &["bundle", "inspect", "--trusted-keys", &public, bundle],
    );
    assert_eq!(code, 0, "{inspect}");
    assert!(
        inspect.contains(&format!("signed by {public}")),
        "{inspect}"
    );
    let (code, json) = json_in(
        &cache,
        &["bundle", "verify", "--trusted-keys", &public, bundle],
    );
    assert_eq!((code, json["signer"].as_str()), (0, Some(public.as_str())));

    // Another key, or none: refused, naming the signer.
    let stranger = format!("ed25519:{}", "ab".repeat(32));
    for args in [
        &[
            "bundle",
            "verify",
            "--trusted-keys",
            stranger.as_str(),
            bundle,
        ][..],
        &["bundle", "verify", bundle][..],
    ] {
        let refused = run(&[&["--dir", cache.to_str().unwrap()][..], args].concat());
        let stderr = String::from_utf8(refused.stderr).unwrap();
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(&public), "{stderr}");
    }
    let bad = run(&["bundle", "verify", "--trusted-keys", "ed25519:12", bundle]);
    let stderr = String::from_utf8(bad.stderr).unwrap();
    assert!(stderr.contains("SHEAF_JIT_TRUSTED_KEYS"), "{stderr}");
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

/// Runs the command in `dir` with `args`, stdout read as bytes (a name
/// may not be UTF-8); its exit code, stdout and stderr.
fn run_raw(dir: &Path, args: &[&str]) -> (i32, Vec<u8>, String) {
    let mut all = vec!["--dir".as_ref(), dir.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    let output = test_support::child::command(env!("CARGO_BIN_EXE_sheaf-jit-cache"))
        .args(&all)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    println!(
        "$ sheaf-jit-cache {args:?}\n{}{stderr}",
        String::from_utf8_lossy(&output.stdout)
    );
    (output.status.code().unwrap(), output.stdout, stderr)
}

/// The key of the test entry `program`.
fn test_key(program: &str) -> ArtifactKey {
    ArtifactKey::new(&KeyParts {
        program,
        compiler: "c",
        runtime: "r",
        target: "t",
    })
}

/// A disk cache at `dir`, made and written as the runtime does, with an
/// authentic entry of `bytes` bytes for each program.
fn cache_with(dir: &Path, programs: &[(&str, usize)]) {
    let store = ArtifactStore::open(StoreConfig::at(dir)).unwrap();
    for &(program, bytes) in programs {
        assert!(store.insert(&test_key(program), &vec![7; bytes]));
    }
}

/// The text of a whole policy file of `function` (no records).
fn policy_text(function: &str) -> String {
    let name: String = function.bytes().map(|b| format!("{b:02x}")).collect();
    let body = format!(
        "sheaf-jit policy 2\nfunction\t{name}\t0000000000000001\ncompiler\t0000000000000002\n\
         target\t0000000000000003\n"
    );
    format!("{body}end\t{:016x}\n", stable_hash(body.as_bytes()))
}

/// A name the runtime could give a policy file.
fn policy_name(seed: &str) -> String {
    format!("{}.policy", test_key(seed).hex())
}

/// Makes the folder `path`, mode 0700 (as the store makes its own).
fn private_folder(path: &Path) {
    fs::DirBuilder::new().mode(0o700).create(path).unwrap();
}

/// Everything under `dir` (itself included): each path, its type, mode,
/// size, modification time and bytes (a link's target), in order.
fn snapshot(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, path: &Path, out: &mut Vec<String>) {
        let meta = fs::symlink_metadata(path).unwrap();
        let what = if meta.file_type().is_symlink() {
            format!("link to {:?}", fs::read_link(path).unwrap())
        } else if meta.is_dir() {
            "folder".to_owned()
        } else {
            format!("file {:?}", fs::read(path).unwrap())
        };
        out.push(format!(
            "{:?} {:o} {} {:?} {what}",
            path.strip_prefix(root).unwrap(),
            meta.mode(),
            meta.len(),
            meta.modified().unwrap()
        ));
        if meta.is_dir() {
            let mut items: Vec<_> = fs::read_dir(path)
                .unwrap()
                .map(|item| item.unwrap().path())
                .collect();
            items.sort();
            for item in items {
                walk(root, &item, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

#[test]
fn clear_and_prune_follow_no_link_out_of_the_cache() {
    let root = tempfile::tempdir().unwrap();
    let (dir, outside) = (root.path().join("cache"), root.path().join("outside"));
    cache_with(&dir, &[("a", 100), ("b", 200)]);
    private_folder(&outside);
    // Files of the user's elsewhere, named as the cache names its own.
    let victim = outside.join(policy_name("victim"));
    fs::write(&victim, policy_text("victim")).unwrap();
    let artifact = outside.join(format!("{}.sjit", test_key("x").hex()));
    fs::write(&artifact, b"not the cache's").unwrap();
    let before = snapshot(&outside);

    // `policy/` a link to the outside folder: refused, nothing deleted.
    symlink(&outside, dir.join("policy")).unwrap();
    for args in [&["clear"][..], &["prune", "--max-bytes", "0"]] {
        let (code, _, stderr) = run_raw(&dir, args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("policy is not safe to use: it is a symbolic link"),
            "{args:?}: {stderr}"
        );
        assert_eq!(
            snapshot(&outside),
            before,
            "{args:?}: nothing outside changes"
        );
        assert_eq!(entry_files(&dir).len(), 2, "{args:?}");
    }

    // Links inside `vmfb/` and `policy/` to outside files: neither
    // deleted nor followed; the cache's own entries go.
    fs::remove_file(dir.join("policy")).unwrap();
    private_folder(&dir.join("policy"));
    let policy_link = dir.join("policy").join(policy_name("link"));
    symlink(&victim, &policy_link).unwrap();
    let entry_link = dir
        .join("vmfb")
        .join(format!("{}.sjit", test_key("y").hex()));
    symlink(&artifact, &entry_link).unwrap();
    let (code, out, stderr) = run_raw(&dir, &["prune", "--max-bytes", "0"]);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(out.starts_with("deleted 2 entries"), "{out}");
    let (code, out, stderr) = run_raw(&dir, &["clear"]);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.starts_with("deleted 0 entries (0 B) and 0 policy files"),
        "{out}"
    );
    assert_eq!(snapshot(&outside), before, "nothing outside changes");
    for link in [&policy_link, &entry_link] {
        assert!(fs::symlink_metadata(link).unwrap().file_type().is_symlink());
    }
}

#[test]
fn names_are_printed_escaped() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    cache_with(&dir, &[("a", 9)]);
    let policy = dir.join("policy");
    private_folder(&policy);
    // A file name that forges a line of `verify`, one that clears the
    // screen, one that is not UTF-8, and a policy whose function's name
    // does the same.
    let forged = format!(
        "evil\n  ok       {}  authentic (9-byte artifact, tag verified)\n.policy",
        test_key("z").hex()
    );
    fs::write(policy.join(&forged), b"garbage").unwrap();
    fs::write(policy.join("\x1b[2J\x1b[31mred.policy"), b"garbage").unwrap();
    fs::write(
        policy.join(std::ffi::OsStr::from_bytes(b"\xff\xfe.policy")),
        b"garbage",
    )
    .unwrap();
    let function = "f\x1b]0;title\x07\n  ok       forged";
    fs::write(policy.join(policy_name("f")), policy_text(function)).unwrap();

    for command in ["verify", "list", "stats"] {
        let (_, out, stderr) = run_raw(&dir, &[command]);
        let out = String::from_utf8(out).expect("escaped output is UTF-8");
        assert!(
            !out.contains('\x1b') && !out.contains('\x07'),
            "{command}: {out:?}"
        );
        let oks = out.lines().filter(|line| line.starts_with("  ok")).count();
        let expected = if command == "verify" { 2 } else { 0 };
        assert_eq!(
            oks, expected,
            "{command}: only the real entry and policy: {out}"
        );
        assert!(!stderr.contains('\x1b'), "{command}: {stderr:?}");
        if command != "stats" {
            assert!(
                out.contains(r#"f\x1b]0;title\x07\n  ok       forged""#),
                "{command}: {out}"
            );
        }
        if command == "verify" {
            assert!(out.contains(r#"evil\n  ok       "#), "{out}");
            assert!(out.contains(r#"\x1b[2J\x1b[31mred.policy""#), "{out}");
            assert!(out.contains(r#"\xff\xfe.policy""#), "{out}");
        }
    }
}

#[test]
fn read_only_commands_write_nothing() {
    let root = tempfile::tempdir().unwrap();
    // A folder that is not a cache, with a file of its own.
    let foreign = root.path().join("foreign");
    private_folder(&foreign);
    fs::write(foreign.join("notes.txt"), b"mine").unwrap();
    // A cache with an entry, a policy file and a writer's temporary file
    // left two hours ago (a runtime would delete it).
    let cache = root.path().join("cache");
    cache_with(&cache, &[("a", 9)]);
    private_folder(&cache.join("policy"));
    fs::write(
        cache.join("policy").join(policy_name("f")),
        policy_text("f"),
    )
    .unwrap();
    let temporary = cache.join("vmfb").join(".tmp-crashed");
    fs::write(&temporary, b"half").unwrap();
    set_unused_for(&temporary, 7200);
    // A cache whose secret is gone.
    let no_secret = root.path().join("no-secret");
    cache_with(&no_secret, &[("a", 9)]);
    fs::remove_file(no_secret.join("secret")).unwrap();

    for dir in [&foreign, &cache, &no_secret] {
        let before = snapshot(dir);
        for command in ["stats", "list", "verify"] {
            let (code, out, stderr) = run_raw(dir, &[command]);
            assert!(code == 0 || command == "verify", "{command}: {stderr}");
            assert_eq!(snapshot(dir), before, "{command} in {dir:?} changed it");
            let out = String::from_utf8_lossy(&out);
            if dir != &cache && command != "list" {
                assert!(
                    out.contains("no secret: no entry can be authenticated"),
                    "{out}"
                );
            }
            if dir == &no_secret && command == "verify" {
                assert_eq!(code, 1);
                assert!(
                    out.contains("cannot be authenticated: no secret in this folder"),
                    "{out}"
                );
            }
        }
    }
}

#[test]
fn clear_and_prune_leave_what_is_not_the_caches_own() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("cache");
    cache_with(&dir, &[("a", 100), ("b", 200), ("c", 300)]);
    let vmfb = dir.join("vmfb");
    // Not the cache's: a file named as an entry that is none (`verify`:
    // corrupt), an entry copied under another key (unauthenticated),
    // another name; in `policy/`, a file that is not a policy file (two
    // names), a policy file under a name the runtime never gives.
    let corrupt = vmfb.join(format!("{}.sjit", test_key("d").hex()));
    fs::write(&corrupt, b"a file of someone's").unwrap();
    let copied = vmfb.join(format!("{}.sjit", test_key("e").hex()));
    fs::copy(vmfb.join(format!("{}.sjit", test_key("a").hex())), &copied).unwrap();
    fs::write(vmfb.join("readme.txt"), b"notes").unwrap();
    let policy = dir.join("policy");
    private_folder(&policy);
    let foreign_policies = [
        (policy.join("notes.policy"), "notes".to_owned()),
        (policy.join(policy_name("g")), "garbage".to_owned()),
        (policy.join("other-name.policy"), policy_text("h")),
    ];
    for (path, text) in &foreign_policies {
        fs::write(path, text).unwrap();
    }
    let own_policy = policy.join(policy_name("f"));
    fs::write(&own_policy, policy_text("f")).unwrap();
    let foreign = |dir: &Path| {
        let mut left: Vec<_> = [&corrupt, &copied, &vmfb.join("readme.txt")]
            .into_iter()
            .chain(foreign_policies.iter().map(|(path, _)| path))
            .map(|path| (path.clone(), fs::read(path).unwrap()))
            .collect();
        left.push((dir.to_path_buf(), Vec::new()));
        left
    };
    let before = foreign(&dir);

    let (code, out, stderr) = run_raw(&dir, &["prune", "--max-bytes", "0"]);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(out.starts_with("deleted 3 entries"), "{out}");
    assert!(
        out.contains("left 2 files that are not provably the cache's own"),
        "{out}"
    );
    assert_eq!(foreign(&dir), before);
    let (code, out, stderr) = run_raw(&dir, &["clear"]);
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        out.starts_with("deleted 0 entries (0 B) and 1 policy files"),
        "{out}"
    );
    assert!(out.contains("left 5 files"), "{out}");
    assert_eq!(foreign(&dir), before, "what is not the cache's stays");
    assert!(!own_policy.exists(), "the runtime's own policy file goes");
}
