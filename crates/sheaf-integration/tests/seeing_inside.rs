//! Seeing inside a runtime: what it holds after the shape ping-pong
//! (`JitRuntime::entries`: the four variants with where each came from),
//! what `clear` drops (the variants, their modules unloaded) and keeps
//! (the disk cache: the next calls load from it), and the statistics and
//! profile as JSON (cargo feature `serde`).

use std::path::Path;

use ndarray::{ArrayD, IxDyn};
use sheaf_integration::{
    artifacts::ArtifactSource,
    reference,
    settings::{CompileMode, DiskCacheFolder},
    stats::{CachedVariant, Phase},
    JitConfig, JitRuntime, Value,
};

/// A runtime on the disk cache in `dir`, whose misses wait for their
/// compile.
fn runtime(dir: &Path) -> JitRuntime {
    let config = JitConfig::builder()
        .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.to_path_buf()))
        .compile(|compile| compile.mode = CompileMode::Blocking)
        .build()
        .unwrap();
    JitRuntime::new(config).unwrap()
}

/// The demo's ping-pong for `iterations`: `sigmoid` alternating between
/// f32[1,5] and f32[1,5,1], `softmax` between the temperatures 0.5 and 1.
fn ping_pong(jit: &JitRuntime, iterations: usize) {
    let (sigmoid, softmax) = (reference::sigmoid(), reference::softmax());
    let data = vec![-2.0f32, -0.5, 0.0, 0.75, 3.0];
    for i in 0..iterations {
        let shape: &[usize] = if i % 2 == 0 { &[1, 5] } else { &[1, 5, 1] };
        let x = Value::host(ArrayD::from_shape_vec(IxDyn(shape), data.clone()).unwrap());
        let result = jit
            .call(&sigmoid, &[x], &[], |args, _, _| {
                reference::interpret_sigmoid(args)
            })
            .unwrap();
        assert!(result.provenance.is_compiled(), "{:?}", result.provenance);
        let t = if i % 2 == 0 { 0.5 } else { 1.0 };
        let rows = Value::host(ArrayD::from_shape_vec(IxDyn(&[1, 5]), data.clone()).unwrap());
        let result = jit
            .call(
                &softmax,
                &[rows],
                &[reference::temperature(t)],
                |args, _, _| reference::interpret_softmax(args, t),
            )
            .unwrap();
        assert!(result.provenance.is_compiled(), "{:?}", result.provenance);
    }
}

/// Each variant as `function signature source hits`.
fn rows(entries: &[CachedVariant]) -> Vec<String> {
    let mut rows: Vec<String> = entries
        .iter()
        .map(|v| format!("{} {} {} {}", v.function, v.signature, v.source, v.hits))
        .collect();
    rows.sort();
    rows
}

#[test]
fn entries_after_the_ping_pong_list_the_four_variants_and_clear_drops_them() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime(dir.path());
    ping_pong(&jit, 10);
    let entries = jit.entries();
    for variant in &entries {
        println!("{variant}");
    }
    // Each signature compiled once, then served 4 calls; all compiled here.
    assert_eq!(
        rows(&entries),
        [
            "sigmoid (f32[1,5,1]) compiler 4",
            "sigmoid (f32[1,5]) compiler 4",
            "softmax (f32[1,5]) {temperature=0.5} compiler 4",
            "softmax (f32[1,5]) {temperature=1.0} compiler 4",
        ]
    );
    assert!(entries
        .iter()
        .all(|v| v.bytes > 0 && v.artifact_key.is_some()));
    assert!(
        entries.iter().all(|v| v.calls_since_use <= 1),
        "{entries:?}"
    );
    let sigmoid = jit.entries_of(&reference::sigmoid());
    assert_eq!(sigmoid.len(), 2);
    assert!(sigmoid.iter().all(|v| v.function.name() == "sigmoid"));

    // Cleared: nothing held, nothing weighed; the totals keep counting.
    assert_eq!(jit.clear(), 4);
    assert!(jit.entries().is_empty());
    let stats = jit.stats();
    assert_eq!((stats.total.live_entries, stats.total.live_bytes), (0, 0));
    assert_eq!(stats.total.calls, 20, "the totals keep what happened");

    // The disk cache stays: the next calls load every variant from it.
    ping_pong(&jit, 4);
    let sources: Vec<ArtifactSource> = jit.entries().iter().map(|v| v.source).collect();
    assert_eq!(
        sources,
        [ArtifactSource::DiskCache; 4],
        "{:?}",
        jit.entries()
    );
    let profile = jit.profile();
    assert_eq!(
        (
            profile.loaded_from(ArtifactSource::Compiler),
            profile.loaded_from(ArtifactSource::DiskCache)
        ),
        (4, 4),
        "nothing compiled again"
    );
    // In the statistics, the loads from disk are fetches, not compiles.
    let stats = jit.stats();
    assert_eq!(
        (stats.total.compiles, stats.total.fetches),
        (4, 4),
        "{stats}"
    );

    // A new process on the same disk cache lists them from disk too.
    drop(jit);
    let restarted = runtime(dir.path());
    ping_pong(&restarted, 2);
    assert!(rows(&restarted.entries())
        .iter()
        .all(|row| row.contains("disk cache")));
}

/// Set in the child process that measures its memory alone.
const CHILD: &str = "SHEAF_JIT_TEST_CLEAR_CHILD";

#[test]
fn clearing_again_and_again_unloads_the_modules() {
    if std::env::var_os(CHILD).is_none() {
        // Measured in a process of its own: the other tests' memory would
        // count too.
        let output = test_support::child::rerun("clearing_again_and_again_unloads_the_modules")
            .env(CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        println!("{stdout}");
        assert!(
            output.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime(dir.path());
    ping_pong(&jit, 2);
    let cycle = || {
        assert_eq!(jit.clear(), 4);
        ping_pong(&jit, 2);
    };
    for _ in 0..20 {
        cycle();
    }
    let before = test_support::proc_status::rss_bytes();
    let cycles = 200;
    for _ in 0..cycles {
        cycle();
    }
    let grown = test_support::proc_status::rss_bytes().saturating_sub(before);
    let loaded: usize = jit.entries().iter().map(|v| v.bytes).sum::<usize>() * cycles;
    println!(
        "{cycles} clears, {} modules loaded from disk again ({} KiB of artifacts): RSS grew {} KiB",
        4 * cycles,
        loaded / 1024,
        grown / 1024
    );
    // Every module kept would hold its artifact and about 24 KB more: a
    // leak grows by more than the artifacts alone.
    assert!(
        (grown as usize) < loaded / 2,
        "RSS grew by {grown} bytes over {cycles} clears of {} artifact bytes each",
        loaded / cycles
    );
    assert_eq!(jit.profile().loaded_from(ArtifactSource::Compiler), 4);
}

#[test]
fn the_statistics_and_the_profile_serialize_as_json() {
    let dir = tempfile::tempdir().unwrap();
    let jit = runtime(dir.path());
    ping_pong(&jit, 3);
    let profile = serde_json::to_value(jit.profile()).unwrap();
    assert_eq!(profile["cache"]["total"]["compiles"], 4);
    assert_eq!(profile["phases"][2]["phase"], "Compile");
    assert_eq!(profile["phases"][2]["count"], 4);
    assert_eq!(profile["sources"][0], serde_json::json!(["Compiler", 4]));
    assert!(profile["remote"].is_null(), "no remote cache");
    let disk = serde_json::to_value(jit.disk_cache_stats()).unwrap();
    assert_eq!(disk["misses"], 4);
    let uploads = serde_json::to_value(jit.upload_stats()).unwrap();
    assert!(uploads["uploads"].as_u64().unwrap() + uploads["imports"].as_u64().unwrap() > 0);
    let entries = serde_json::to_value(jit.entries()).unwrap();
    assert_eq!(entries.as_array().unwrap().len(), 4);
    assert_eq!(entries[0]["function"]["name"], "sigmoid");
    assert_eq!(entries[0]["source"], "Compiler");
    assert_eq!(entries[0]["artifact_key"].as_str().unwrap().len(), 64);
}

#[test]
fn every_call_is_counted_and_timed_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    // Timed when asked, or when the profile is printed at exit.
    let timing = |time_calls: bool, profile_at_exit: bool| {
        let config = JitConfig::builder()
            .disk(|disk| disk.folder = DiskCacheFolder::Dir(dir.path().to_path_buf()))
            .compile(|compile| compile.mode = CompileMode::Blocking)
            .time_calls(time_calls)
            .profile_at_exit(profile_at_exit)
            .build()
            .unwrap();
        let timed = time_calls || profile_at_exit;
        let jit = JitRuntime::new(config).unwrap();
        ping_pong(&jit, 4);
        let profile = jit.profile();
        let row = |phase| {
            let totals = profile.phase(phase);
            (totals.count, totals.timed, !totals.total.is_zero())
        };
        // Eight calls, each looked up, its host argument copied and run.
        for phase in [Phase::KeyLookup, Phase::InputTransfer, Phase::Call] {
            assert_eq!(row(phase), (8, timed, timed), "{phase:?}");
        }
        // A miss's lowering is timed either way.
        assert!(row(Phase::Lower).1 && row(Phase::Lower).2);
        profile.to_string()
    };
    let untimed = timing(false, false);
    assert!(
        untimed.contains("untimed")
            && untimed
                .lines()
                .any(|l| l.contains("call") && l.contains(" 8 ")),
        "{untimed}"
    );
    assert!(!timing(true, false).contains("untimed"));
    assert!(!timing(false, true).contains("untimed"));
}
