//! The JIT's disk path under attack or misuse: mutated and planted entries
//! never reach IREE's loader, a folder others can write is refused with an
//! error that says what to do. (What the log shows of them:
//! `tests/logging.rs`.)

mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use sheaf_integration::{
    settings::DiskCacheFolder, stats::Origin, ErrorChain, JitError, JitRuntime, Provenance,
};

fn runtime(dir: &Path) -> Result<JitRuntime, JitError> {
    JitRuntime::new(
        support::blocking()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.into()))
            .build()
            .unwrap(),
    )
}

fn sigmoid_call(jit: &JitRuntime) -> Provenance {
    support::checked_sigmoid(jit, &[2, 3], 5)
}

#[test]
fn mutated_disk_entries_are_rebuilt_never_loaded() {
    let dir = tempfile::tempdir().unwrap();
    sigmoid_call(&runtime(dir.path()).unwrap());
    let path = support::the_entry(dir.path());
    let good = fs::read(&path).unwrap();
    // A fresh process would load the good entry from disk.
    let jit = runtime(dir.path()).unwrap();
    sigmoid_call(&jit);
    assert_eq!(jit.disk_cache_stats().hits, 1);
    let mutants = 12;
    for m in 0..mutants {
        let mut bytes = good.clone();
        let at = (m * 7919 + 13) % bytes.len();
        match m % 3 {
            0 => bytes[at] ^= 0x10,
            1 => bytes.truncate(at),
            _ => bytes[at..].iter_mut().for_each(|b| *b = b.wrapping_mul(31)),
        }
        fs::write(&path, &bytes).unwrap();
        let jit = runtime(dir.path()).unwrap();
        assert!(
            matches!(
                sigmoid_call(&jit),
                Provenance::Compiled(Origin::CompiledNow { .. })
            ),
            "mutant {m}"
        );
        let stats = jit.disk_cache_stats();
        assert_eq!(
            (
                stats.hits,
                stats.misses,
                stats.corrupt + stats.unauthenticated
            ),
            (0, 1, 1),
            "mutant {m}: refused before loading, then rebuilt"
        );
        assert_eq!(fs::read(&path).unwrap().len(), good.len(), "rewritten");
    }
}

#[test]
fn a_cache_folder_others_can_write_is_an_error_that_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let error = runtime(dir.path()).unwrap_err();
    let message = ErrorChain(&error).to_string();
    assert!(matches!(error, JitError::DiskCache(_)), "{message}");
    for hint in [
        "chmod 700",
        "SHEAF_JIT_CACHE_DIR",
        "SHEAF_JIT_DISK_CACHE=off",
    ] {
        assert!(message.contains(hint), "{message}");
    }
}
