//! The statistics serialize (cargo feature `serde`): the cache's, per
//! function and in total, as JSON a program can read back. (The store's
//! and the remote tier's: jit-store's `tests/serde.rs`.)

use jit_cache::{CompileFailure, DType, Executable, FunctionId, JitCache, Signature};
use serde_json::{json, Value};

struct Module;

impl Executable for Module {
    fn size_bytes(&self) -> usize {
        1000
    }
}

#[test]
fn cache_stats_serialize_with_functions_counters_and_reasons() {
    let cache: JitCache<Module> = JitCache::default();
    let sigmoid = FunctionId::new("sigmoid", 0xdead_beef);
    let compile = |_: &Signature| Ok::<_, CompileFailure>(Module);
    for dims in [&[1, 5][..], &[1, 5, 1], &[1, 5]] {
        let sig = Signature::builder().arg(DType::F32, dims).build();
        let _ = cache.get_or_compile(&sigmoid, &sig, compile);
    }
    let json: Value = serde_json::to_value(cache.stats()).unwrap();
    assert_eq!(json["total"]["calls"], 3);
    assert_eq!(json["total"]["compiles"], 2);
    assert_eq!(json["total"]["live_bytes"], 2000);
    assert_eq!(json["total"]["compile_time"]["secs"], 0);
    let function = &json["functions"][0];
    assert_eq!(
        function["function"],
        json!({"name": "sigmoid", "definition_hash": 0xdead_beef_u64})
    );
    assert_eq!(function["counters"]["hits"], 1);
    assert_eq!(function["mode"], "Normal");
    // A miss reason is its text; what is not there is null.
    assert_eq!(
        function["last_miss"],
        "arg 0: rank 2 → 3 (f32[1,5] vs f32[1,5,1])"
    );
    assert_eq!(function["last_refusal"], Value::Null);
    assert_eq!(json["max_total_entries"], 4096);
    // And as text, whole.
    let text = serde_json::to_string_pretty(&cache.stats()).unwrap();
    assert!(text.contains("\"fallback_calls\": 0"), "{text}");
}
