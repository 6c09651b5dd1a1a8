//! The main job's binary, run briefly: the shared mode compiles each
//! distinct signature once, the background mode gets the same compiles done
//! while its calls run in the interpreter, the legacy mode builds a runtime
//! per mismatch and serves stale softmax results, and the plot is written.

use serde_json::Value;

/// Runs the pingpong binary with `args` and `--json --plot plot`; its
/// records and what it wrote to stderr. Fails the test if it fails.
fn run_json(args: &[&str], plot: &std::path::Path) -> (Vec<Value>, String) {
    let output = test_support::child::command(env!("CARGO_BIN_EXE_pingpong"))
        .args(args)
        .args(["--json", "--plot"])
        .arg(plot)
        .output()
        .expect("the pingpong binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    let records = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("one JSON object per line"))
        .collect();
    (records, stderr)
}

#[test]
fn pingpong_reports_every_mode_and_writes_the_plot() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("rss.svg");
    let (records, _) = run_json(&["--iters", "4,12"], &plot);
    let find = |mode: &str, kind: &str, iters: u64| {
        records
            .iter()
            .find(|r| r["mode"] == mode && r["kind"] == kind && r["iters"] == iters)
            .unwrap_or_else(|| panic!("no {mode} {kind} record at {iters}: {records:?}"))
    };
    let get = |mode: &str, iters: u64| find(mode, "checkpoint", iters);
    for mode in ["legacy", "shared", "background"] {
        assert!(find(mode, "first_result", 0)["wall_s"].as_f64().unwrap() > 0.0);
    }
    // Background calls never return stale results; by the end every compile
    // is done, as in the shared mode.
    for iters in [4, 12] {
        assert_eq!(get("background", iters)["stale_results"], 0);
    }
    for mode in ["shared", "background"] {
        let drained = find(mode, "drained", 12);
        assert_eq!(
            (&drained["compiles"], &drained["live_modules"]),
            (&Value::from(4), &Value::from(4)),
            "{drained}"
        );
    }
    for iters in [4, 12] {
        let shared = get("shared", iters);
        assert_eq!(
            shared["compiles"], 4,
            "2 sigmoid shapes + 2 temperatures: {shared}"
        );
        assert_eq!(shared["live_modules"], 4);
        assert_eq!(shared["stale_results"], 0);
        assert!(shared["rss_bytes"].as_u64().unwrap() > 0);
        let legacy = get("legacy", iters);
        assert_eq!(
            legacy["compiles"],
            iters + 1,
            "one runtime per sigmoid call, plus softmax's: {legacy}"
        );
        assert_eq!(
            legacy["stale_results"],
            iters / 2,
            "every other softmax is stale: {legacy}"
        );
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    // One line per mode (plus its legend sample), both labelled.
    assert!(svg.starts_with("<svg"), "{svg}");
    assert!(svg.matches("<polyline").count() >= 3, "{svg}");
    for label in [
        "legacy: runtime per recompile",
        "shared: one runtime",
        "background: shared, compiling",
    ] {
        assert!(svg.contains(label), "no `{label}` in {svg}");
    }
}

#[test]
fn legacy_stops_at_the_memory_ceiling_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    // Any process is above 1 MiB: legacy stops before its first runtime.
    let (records, stderr) = run_json(
        &["--iters", "3", "--ceiling-mib", "1"],
        &dir.path().join("rss.svg"),
    );
    let stopped = records
        .iter()
        .find(|r| r["kind"] == "stopped")
        .unwrap_or_else(|| panic!("no stopped record in {records:?}"));
    assert_eq!(
        (stopped["mode"].as_str(), stopped["iters"].as_u64()),
        (Some("legacy"), Some(0))
    );
    assert!(stderr.contains("legacy mode stopped after 0 iterations"));
}

#[test]
fn the_ragged_scenario_compares_legacy_static_dynamic_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("ragged.svg");
    let (records, _) = run_json(&["--ragged", "--calls", "8"], &plot);
    let summary = |mode: &str| {
        records
            .iter()
            .find(|r| r["mode"] == mode && r["kind"] == "ragged")
            .unwrap_or_else(|| panic!("no {mode} summary: {records:?}"))
    };
    for mode in ["legacy", "static", "dynamic", "restart"] {
        let r = summary(mode);
        assert_eq!(
            (&r["iters"], &r["stale_results"]),
            (&Value::from(8), &Value::from(0)),
            "{r}"
        );
    }
    let dynamic = summary("dynamic");
    assert_eq!(
        dynamic["compiles"], 2,
        "the first batch size, then any: {dynamic}"
    );
    assert_eq!(dynamic["compiled_calls"], 8, "{dynamic}");
    // A new process on the dynamic run's disk cache, for the generator's
    // next 8 calls: the batch dim is dynamic from its first call, and every
    // variant comes from disk.
    let restart = summary("restart");
    assert_eq!(
        (&restart["compiles"], &restart["compiled_calls"]),
        (&Value::from(0), &Value::from(8)),
        "{restart}"
    );
    assert!(restart["disk_loads"].as_u64().unwrap() >= 1, "{restart}");
    let first_compiled = |mode: &str| {
        records
            .iter()
            .find(|r| r["mode"] == mode && r["kind"] == "first_compiled")
            .unwrap_or_else(|| panic!("no {mode} first_compiled: {records:?}"))["iters"]
            .clone()
    };
    assert_eq!(first_compiled("restart"), 1, "compiled from its first call");
    assert_eq!(
        first_compiled("dynamic"),
        1,
        "misses wait for their compile"
    );
    let legacy = summary("legacy");
    assert!(
        legacy["compiles"].as_u64().unwrap() > 3,
        "one per batch size: {legacy}"
    );
    let svg = std::fs::read_to_string(&plot).unwrap();
    for label in [
        "legacy: runtime per recompile",
        "static: one variant per shape",
        "dynamic: one variant",
        "restart: dynamic again",
    ] {
        assert!(svg.contains(label), "{label} missing from the plot");
    }
}
