//! The fleet's worker, run twice against a shared folder (no server): the
//! first compiles its six signatures, taking a lease for each, and gets
//! every result right; the second, with a fresh disk cache, compiles none
//! of them: all six come from the shared folder.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::Value;

/// Runs the worker against the folder `shared`, with the secret `secret`
/// and a fresh disk cache; its JSON line.
fn run_worker(shared: &Path, secret: &Path) -> Value {
    let cache = tempfile::tempdir().unwrap();
    let output = test_support::child::command(env!("CARGO_BIN_EXE_fleet_worker"))
        .env(
            "SHEAF_JIT_REMOTE_CACHE",
            format!("file://{}", shared.display()),
        )
        .env("SHEAF_JIT_REMOTE_SECRET_FILE", secret)
        .env("SHEAF_JIT_CACHE_DIR", cache.path())
        .env("SHEAF_JIT_COMPILE_MODE", "blocking")
        .env("SHEAF_JIT_DYNAMIC_DIMS", "off")
        .output()
        .expect("the fleet_worker binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    serde_json::from_str(stdout.trim()).unwrap_or_else(|_| panic!("not one JSON line: {stdout}"))
}

#[test]
fn the_first_worker_compiles_and_the_next_fetches_everything() {
    let dir = tempfile::tempdir().unwrap();
    let shared = dir.path().join("shared");
    fs::create_dir(&shared).unwrap();
    let secret = dir.path().join("secret");
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&secret)
        .unwrap();
    file.write_all(&[0x42; 32]).unwrap();

    let first = run_worker(&shared, &secret);
    assert_eq!(
        (&first["compiles"], &first["leases_taken"], &first["wrong"]),
        (&Value::from(6), &Value::from(6), &Value::from(0)),
        "{first}"
    );
    let second = run_worker(&shared, &secret);
    assert_eq!(
        (
            &second["compiles"],
            &second["remote_hits"],
            &second["wrong"]
        ),
        (&Value::from(0), &Value::from(6), &Value::from(0)),
        "{second}"
    );
}
