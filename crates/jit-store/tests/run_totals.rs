//! Processes that add their counts to one cache folder at once lose none:
//! `WORKERS` child processes, each adding `ADDITIONS` one-call totals as
//! fast as it can, leave a sum of `WORKERS × ADDITIONS` calls.

#![cfg(not(miri))] // processes, files

use std::path::Path;

use jit_store::{ArtifactStore, RunTotals, StoreConfig};

/// Set in a child process: the cache folder it adds to.
const FOLDER: &str = "JIT_STORE_RUN_TOTALS_FOLDER";

const WORKERS: u64 = 6;
const ADDITIONS: u64 = 40;

const TEST: &str = "concurrent_processes_lose_no_count";

/// One call and, once per process, one run.
fn one_call(first: bool) -> RunTotals {
    let mut totals = RunTotals::default();
    totals.runs = u64::from(first);
    totals.calls.calls = 1;
    totals.calls.compile_ms = 2;
    totals.disk.absent = 1;
    totals
}

fn child(folder: &Path) {
    let store = ArtifactStore::open(StoreConfig::at(folder)).unwrap();
    for addition in 0..ADDITIONS {
        store.add_run_totals(&one_call(addition == 0)).unwrap();
    }
}

#[test]
fn concurrent_processes_lose_no_count() {
    if let Some(folder) = std::env::var_os(FOLDER) {
        return child(Path::new(&folder));
    }
    let root = tempfile::tempdir().unwrap();
    let folder = root.path().join("cache");
    let store = ArtifactStore::open(StoreConfig::at(&folder)).unwrap();
    let children: Vec<_> = (0..WORKERS)
        .map(|_| {
            test_support::child::rerun(TEST)
                .env(FOLDER, &folder)
                .spawn()
                .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let totals = store.run_totals().unwrap();
    let n = WORKERS * ADDITIONS;
    assert_eq!(
        (
            totals.runs,
            totals.calls.calls,
            totals.calls.compile_ms,
            totals.disk.absent
        ),
        (WORKERS, n, 2 * n, n),
        "{totals:?}"
    );
    store.zero_run_totals().unwrap();
    assert_eq!(store.run_totals(), Ok(RunTotals::default()));
    let read_only = ArtifactStore::open_read_only(&folder).unwrap();
    assert!(read_only.zero_run_totals().is_err());
    read_only.add_run_totals(&one_call(true)).unwrap();
    assert_eq!(
        store.run_totals(),
        Ok(RunTotals::default()),
        "a read-only store adds nothing"
    );
}
