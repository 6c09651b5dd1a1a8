//! The signature builder driven by any sequence of calls: it never panics,
//! equal call sequences give equal signatures with equal hashes, and every
//! signature displays and explains its difference to another.
#![no_main]

use jit_cache::{CapturedScalar, Container, DType, ScalarValue, Signature, SignatureBuilder};
use libfuzzer_sys::fuzz_target;

const DTYPES: [DType; 6] = [
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I64,
    DType::Bool,
];

/// Replays `ops` on a builder.
fn build(ops: &[u8]) -> Signature {
    let mut builder = Signature::builder();
    let mut bytes = ops.iter().copied();
    let mut next = move || bytes.next().unwrap_or(0);
    for _ in 0..ops.len() / 2 {
        apply(&mut builder, next(), &mut next);
    }
    builder.build()
}

fn apply(builder: &mut SignatureBuilder, op: u8, next: &mut impl FnMut() -> u8) {
    match op % 7 {
        0 => {
            let dtype = DTYPES[usize::from(next()) % DTYPES.len()];
            let rank = usize::from(next() % 6);
            let dims: Vec<i64> = (0..rank).map(|_| i64::from(next() as i8) * 97).collect();
            builder.arg(dtype, &dims);
        }
        1 => {
            builder.static_scalar(ScalarValue::I64(i64::from(next() as i8)));
        }
        2 => {
            builder.static_scalar(ScalarValue::F32(f32::from_bits(u32::from(next()) << 23)));
        }
        3 => {
            let container = match next() % 3 {
                0 => Container::Tuple,
                1 => Container::List,
                _ => Container::Dict,
            };
            builder.open(container);
        }
        4 => {
            builder.key(format!("k{}", next()));
        }
        5 => {
            builder.close();
        }
        _ => {
            builder.captured(CapturedScalar::new(
                format!("c{}", next() % 4),
                ScalarValue::F64(f64::from(next()) / 7.0),
            ));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let half = data.len() / 2;
    let (a, b) = (build(data), build(data));
    assert_eq!(a, b);
    assert_eq!(a.precomputed_hash(), b.precomputed_hash());
    let other = build(&data[..half]);
    let _ = a.to_string();
    // A miss is always explained: two signatures differ exactly when their
    // explanation names a difference.
    let explained = other.explain_difference(&a);
    assert_eq!(
        a == other,
        explained == "identical",
        "{other} -> {a}: {explained}"
    );
});
