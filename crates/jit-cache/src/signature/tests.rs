//! The key: what makes two signatures differ, how they display, and
//! which dims a dynamic one generalizes.

use super::*;

fn sig(dims: &[i64]) -> Signature {
    Signature::builder().arg(DType::F32, dims).build()
}

#[test]
fn rank_is_part_of_the_key() {
    assert_ne!(sig(&[1, 5]), sig(&[1, 5, 1]));
    assert_eq!(sig(&[1, 5]), sig(&[1, 5]));
    assert_eq!(
        sig(&[1, 5]).precomputed_hash(),
        sig(&[1, 5]).precomputed_hash()
    );
}

#[test]
fn dtype_is_part_of_the_key() {
    let f16 = Signature::builder().arg(DType::F16, &[1, 5]).build();
    assert_ne!(sig(&[1, 5]), f16);
    assert_eq!(f16.to_string(), "(f16[1,5])");
}

#[test]
fn captured_scalars_compare_by_exact_bits() {
    let with = |v: f32| {
        Signature::builder()
            .arg(DType::F32, &[2])
            .captured(CapturedScalar::f32("temperature", v))
            .build()
    };
    assert_eq!(with(0.8), with(0.8));
    assert_ne!(with(0.8), with(0.800_000_1));
    assert_ne!(with(0.0), with(-0.0));
    assert_eq!(with(f32::NAN), with(f32::NAN));
    let i32_three = CapturedScalar::i32("k", 3);
    let i64_three = CapturedScalar::i64("k", 3);
    assert_ne!(i32_three, i64_three);
}

#[test]
fn captured_order_does_not_matter() {
    let a = CapturedScalar::i32("k", 3);
    let b = CapturedScalar::f64("temperature", 0.5);
    let s1 = Signature::new([], [a.clone(), b.clone()]);
    let s2 = Signature::new([], [b, a]);
    assert_eq!(s1, s2);
    assert_eq!(s1.to_string(), "() {k=3, temperature=0.5}");
}

#[test]
fn display_of_values_is_human_readable() {
    assert_eq!(ScalarValue::F32(0.8).to_string(), "0.8");
    assert_eq!(ScalarValue::F32(-0.0).to_string(), "-0.0");
    assert_eq!(ScalarValue::F64(1.0).to_string(), "1.0");
    assert_eq!(ScalarValue::Bool(true).to_string(), "true");
    assert_eq!(ScalarValue::I64(-4).to_string(), "-4");
    assert_eq!(format!("{:?}", ScalarValue::I32(3)), "3_i32");
    assert_eq!(ArgSpec::new(DType::BF16, &[]).to_string(), "bf16[]");
}

#[test]
fn dynamic_dims_generalize_exactly_what_agrees_elsewhere() {
    let any_rows = sig(&[-7, 5]);
    assert_eq!(
        any_rows,
        sig(&[ArgSpec::DYNAMIC, 5]),
        "negatives are one value"
    );
    assert_eq!(any_rows.to_string(), "(f32[?,5])");
    assert!(any_rows.args()[0].is_dynamic(0) && !any_rows.args()[0].is_dynamic(1));
    assert!(!any_rows.args()[0].is_dynamic(2));
    assert_eq!(
        (any_rows.dynamic_dim_count(), sig(&[1]).dynamic_dim_count()),
        (1, 0)
    );
    for rows in [0, 1, 2, 1 << 40] {
        assert!(any_rows.generalizes(&sig(&[rows, 5])));
    }
    assert!(!any_rows.generalizes(&sig(&[3, 6])), "a static dim differs");
    assert!(!any_rows.generalizes(&sig(&[3, 5, 1])), "rank");
    let f64_rows = Signature::builder().arg(DType::F64, &[3, 5]).build();
    assert!(!any_rows.generalizes(&f64_rows), "dtype");
    let with = |t: f32| {
        Signature::builder()
            .arg(DType::F32, &[-1, 5])
            .captured(CapturedScalar::f32("t", t))
            .build()
    };
    let call = sig(&[3, 5]).with_dynamic_dims(&[]);
    assert!(!with(0.5).generalizes(&call), "captured scalars");
    assert!(any_rows.generalizes(&any_rows));
    assert!(sig(&[-1, -1]).generalizes(&any_rows));
    assert!(!any_rows.generalizes(&sig(&[-1, -1])));
    assert_eq!(
        sig(&[3, 5]).with_dynamic_dims(&[(0, 0), (0, 9), (4, 0)]),
        any_rows
    );
    assert_eq!(sig(&[3, 5]).shape_class(), sig(&[-1, -1]));
}
