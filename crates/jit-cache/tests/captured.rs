//! Captured scalars are part of the key: a changed constant never reuses
//! code compiled for another value.

use jit_cache::{
    CapturedScalar, DType, FunctionId, JitCache, MissReason, Origin, Provenance, Signature,
};
use test_support::mock_cache::{expected, run, MockCompiler, Ran};

fn softmax(temperature: f32) -> Signature {
    Signature::builder()
        .arg(DType::F32, &[1, 32])
        .captured(CapturedScalar::f32("temperature", temperature))
        .captured(CapturedScalar::i64("top_k", 5))
        .build()
}

#[test]
fn a_changed_captured_scalar_compiles_a_new_entry() {
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let f = FunctionId::new("sample", 3);
    let values = [0.8, 1.0, 0.800_000_1, 0.0, -0.0];
    for (i, &t) in values.iter().enumerate() {
        let s = softmax(t);
        let (ran, outcome) = run(&cache, &f, &s, &compiler);
        // The executable compiled for this exact value (bits included).
        assert_eq!(ran, Ran::Compiled(expected(&s)), "temperature {t:?}");
        assert!(
            matches!(outcome, Provenance::Compiled(Origin::CompiledNow { .. })),
            "{t:?}"
        );
        assert_eq!(compiler.compiles(), i + 1);
    }
    // Every value hits its own entry afterwards.
    for &t in &values {
        let s = softmax(t);
        let (ran, outcome) = run(&cache, &f, &s, &compiler);
        assert_eq!(ran, Ran::Compiled(expected(&s)));
        assert_eq!(outcome, Provenance::Compiled(Origin::Hit));
        assert_eq!(compiler.compiles_of(&s), 1);
    }
    assert_eq!(cache.stats().total.live_entries, values.len());
}

#[test]
fn the_miss_names_the_changed_scalar() {
    let compiler = MockCompiler::new();
    let cache = JitCache::default();
    let f = FunctionId::new("sample", 3);
    run(&cache, &f, &softmax(0.8), &compiler);
    let (_, outcome) = run(&cache, &f, &softmax(1.0), &compiler);
    let Provenance::Compiled(Origin::CompiledNow { miss }) = outcome else {
        panic!("expected a compile, got {outcome:?}");
    };
    assert!(matches!(miss, MissReason::Changed { .. }));
    assert_eq!(miss.to_string(), "captured `temperature`: 0.8 → 1.0");
}
