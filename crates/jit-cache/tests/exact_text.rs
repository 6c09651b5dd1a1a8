//! A signature's exact text names it exactly: it reads back equal, and two
//! different signatures never share it, whatever their captured-scalar
//! names and dict keys hold (the punctuation of `Display`, quotes,
//! newlines, tabs, non-ASCII).

use jit_cache::{stable_hash, CapturedScalar, Container, DType, ScalarValue, Signature};
use proptest::prelude::*;

/// Names made of what makes `Display` ambiguous.
fn name() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("a"),
            Just("t"),
            Just("=2.0"),
            Just(", "),
            Just("="),
            Just(":"),
            Just("{"),
            Just("}"),
            Just("("),
            Just(")"),
            Just("["),
            Just("]"),
            Just("\""),
            Just("'"),
            Just("\n"),
            Just("\t"),
            Just("|"),
            Just(";"),
            Just("é"),
            Just("温度"),
        ],
        0..5,
    )
    .prop_map(|parts| parts.concat())
}

fn scalar() -> impl Strategy<Value = ScalarValue> {
    prop_oneof![
        any::<f32>().prop_map(ScalarValue::F32),
        prop_oneof![Just(2.0), Just(3.0)].prop_map(ScalarValue::F32),
        any::<i64>().prop_map(ScalarValue::I64),
        (0..4i64).prop_map(ScalarValue::I64),
        any::<bool>().prop_map(ScalarValue::Bool),
    ]
}

/// Tensors (f32 or i32, rank 0–2, dims 0–3 or dynamic), an optional dict of
/// static scalars with such keys, captured scalars with such names.
fn signature() -> impl Strategy<Value = Signature> {
    let arg = (
        prop_oneof![Just(DType::F32), Just(DType::I32)],
        proptest::collection::vec(prop_oneof![0..4i64, Just(-1i64)], 0..3),
    );
    (
        proptest::collection::vec(arg, 0..3),
        proptest::option::of(proptest::collection::vec((name(), scalar()), 0..3)),
        proptest::collection::vec((name(), scalar()), 0..3),
    )
        .prop_map(|(args, dict, captured)| {
            let mut b = Signature::builder();
            for (dtype, dims) in &args {
                b.arg(*dtype, dims);
            }
            if let Some(entries) = dict {
                b.open(Container::Dict);
                let mut keys: Vec<String> = Vec::new();
                for (key, value) in entries {
                    if !keys.contains(&key) {
                        b.key(key.as_str()).static_scalar(value);
                        keys.push(key);
                    }
                }
                b.close();
            }
            let mut names: Vec<String> = Vec::new();
            for (name, value) in captured {
                if !names.contains(&name) {
                    b.captured(CapturedScalar::new(name.as_str(), value));
                    names.push(name);
                }
            }
            b.build()
        })
}

// Pure string and hash code, no unsafe: under miri these take minutes for
// nothing it could find, so they run natively only; the collision below
// runs under miri too.
proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    #[cfg_attr(miri, ignore)]
    fn exact_text_round_trips(sig in signature()) {
        let text = sig.exact_text();
        prop_assert!(!text.contains(['\t', '\n']), "{text:?}");
        let back = Signature::from_exact_text(&text);
        prop_assert_eq!(back.as_ref(), Some(&sig));
        prop_assert_eq!(back.map(|b| b.precomputed_hash()), Some(sig.precomputed_hash()));
    }

    /// So they never share a bundle entry, a policy record, or a variant
    /// symbol (sheaf-integration's `variant_symbol` is the stable hash of
    /// the exact text; a disk key hashes the module that names it).
    #[test]
    #[cfg_attr(miri, ignore)]
    fn different_signatures_have_different_exact_texts(a in signature(), b in signature()) {
        let (text_a, text_b) = (a.exact_text(), b.exact_text());
        prop_assert_eq!(a == b, text_a == text_b);
        prop_assert_eq!(a == b, stable_hash(text_a.as_bytes()) == stable_hash(text_b.as_bytes()));
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn text_that_no_signature_has_is_refused(text in "[a-z0-9|;:=\\[\\]?,\t -]{0,40}") {
        if let Some(sig) = Signature::from_exact_text(&text) {
            prop_assert_eq!(sig.exact_text(), text);
        }
    }
}

/// The collision the review found: two captured scalars and one whose
/// name holds the other's display.
#[test]
fn two_captured_scalars_and_one_named_like_them_differ() {
    let captured = |name: &str, value: f32| CapturedScalar::new(name, ScalarValue::F32(value));
    let sig = |captured: Vec<CapturedScalar>| {
        let mut b = Signature::builder();
        b.arg(DType::F32, &[1, 5]);
        for c in captured {
            b.captured(c);
        }
        b.build()
    };
    let two = sig(vec![captured("a", 2.0), captured("t", 3.0)]);
    let one = sig(vec![captured("a=2.0, t", 3.0)]);
    assert_ne!(two, one);
    assert_eq!(two.to_string(), one.to_string(), "Display is ambiguous");
    assert_ne!(two.exact_text(), one.exact_text());
}
