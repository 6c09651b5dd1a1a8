//! The exact text of a [`Signature`], as a policy file records it: every
//! part of the key, so that it reads back equal (same contents, same
//! hash), unlike `Display`, which is written for people and can be
//! ambiguous (a dict key or a scalar name may hold `, `).
//!
//! Four tab-separated fields, `-` for an empty one:
//!
//! | field | example |
//! | --- | --- |
//! | tensor arguments, `;`-separated, as displayed | `f32[?,256];f32[256,256];f32[256]` |
//! | static scalars, `;`-separated `kind:bits` (bits in hex) | `i64:3;f32:3f800000` |
//! | layout ([`Layout::token_text`]) | `T { k62 T k6b S )` |
//! | captured scalars, `;`-separated `name=kind:bits` (the name's UTF-8 in hex) | `74=f32:3f000000` |

use smallvec::SmallVec;

use super::{ArgSpec, CapturedScalar, ScalarValue, Signature};
use crate::dtype::DType;
use crate::hex;
use crate::layout::Layout;

/// The number of tab-separated fields of a signature.
pub(crate) const FIELDS: usize = 4;

/// Appends the text of `sig` to `out` (no tab or newline at either end).
pub(crate) fn encode_into(out: &mut String, sig: &Signature) {
    list(out, sig.args(), |out, arg| out.push_str(&arg.to_string()));
    out.push('\t');
    list(out, sig.statics(), |out, value| scalar(out, *value));
    out.push('\t');
    match sig.layout() {
        Some(layout) => out.push_str(&layout.token_text()),
        None => out.push('-'),
    }
    out.push('\t');
    list(out, sig.captured(), |out, captured| {
        hex::encode_into(out, captured.name().as_bytes());
        out.push('=');
        scalar(out, captured.value());
    });
}

/// What separates the fields in the one-line form ([`exact_text`]): in
/// none of them (captured names and dict keys are hex, arguments and
/// scalars are names, digits and `[?,;:]`).
const FIELD_SEPARATOR: char = '|';

/// The fields of [`encode_into`] joined by `|`: one line with no tab, for
/// texts that are themselves tab-separated (a bundle manifest).
pub(crate) fn exact_text(sig: &Signature) -> String {
    let mut text = String::new();
    encode_into(&mut text, sig);
    text.replace('\t', "|")
}

/// The signature whose [`exact_text`] is `text`; `None` for anything else.
pub(crate) fn from_exact_text(text: &str) -> Option<Signature> {
    let mut fields = text.split(FIELD_SEPARATOR);
    let parts: [&str; FIELDS] = std::array::from_fn(|_| fields.next().unwrap_or("\n"));
    if fields.next().is_some() || parts.iter().any(|part| part.contains(['\t', '\n'])) {
        return None;
    }
    decode(parts)
}

/// The signature whose text ([`encode_into`]) is `fields`; `None` for
/// anything else.
pub(crate) fn decode(fields: [&str; FIELDS]) -> Option<Signature> {
    let [args, statics, layout, captured] = fields;
    let args = parse_list(args, parse_arg)?;
    let statics = parse_list(statics, parse_scalar)?;
    let layout = match layout {
        "-" => None,
        text => Some(Layout::from_token_text(text)?),
    };
    let captured = parse_list(captured, |text| {
        let (name, value) = text.split_once('=')?;
        let name = String::from_utf8(hex::decode(name)?).ok()?;
        Some(CapturedScalar::new(name, parse_scalar(value)?))
    })?;
    // A flat call has no layout and no statics: the builder never makes a
    // signature with statics outside a layout.
    if layout.is_none() && !statics.is_empty() {
        return None;
    }
    // Captured scalars are kept sorted: text with them in another order was
    // not written by `encode_into`.
    let in_order = |captured: &[CapturedScalar]| captured.windows(2).all(|p| p[0] <= p[1]);
    in_order(&captured).then(|| Signature::from_parts(args, statics, layout, captured))
}

/// Writes `items` separated by `;`, or `-` when there are none.
fn list<T>(out: &mut String, items: &[T], mut item: impl FnMut(&mut String, &T)) {
    if items.is_empty() {
        out.push('-');
    }
    for (i, each) in items.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        item(out, each);
    }
}

fn parse_list<T, A: smallvec::Array<Item = T>>(
    text: &str,
    item: impl Fn(&str) -> Option<T>,
) -> Option<SmallVec<A>> {
    match text {
        "-" => Some(SmallVec::new()),
        text => text.split(';').map(item).collect(),
    }
}

fn scalar(out: &mut String, value: ScalarValue) {
    out.push_str(&format!("{}:{:x}", value.kind_name(), value.bits()));
}

fn parse_scalar(text: &str) -> Option<ScalarValue> {
    let (kind, bits) = text.split_once(':')?;
    ScalarValue::from_bits(kind, hex::parse_u64(bits, 1..=16)?)
}

/// `f32[?,256]`, `bool[]`.
fn parse_arg(text: &str) -> Option<ArgSpec> {
    let (dtype, dims) = text.strip_suffix(']')?.split_once('[')?;
    let dtype = DType::from_name(dtype)?;
    let dims: SmallVec<[i64; 4]> = match dims {
        "" => SmallVec::new(),
        dims => dims
            .split(',')
            .map(|dim| match dim {
                "?" => Some(ArgSpec::DYNAMIC),
                // Digits only: no sign, so no negative dims but `?`.
                digits if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) => {
                    digits.parse().ok()
                }
                _ => None,
            })
            .collect::<Option<_>>()?,
    };
    Some(ArgSpec::new(dtype, &dims))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::Container;

    fn round_trip(sig: &Signature) -> String {
        let mut text = String::new();
        encode_into(&mut text, sig);
        let fields: Vec<&str> = text.split('\t').collect();
        let decoded = decode(fields.clone().try_into().expect("five fields"));
        assert_eq!(decoded.as_ref(), Some(sig), "{text}");
        assert_eq!(
            decoded.map(|d| d.precomputed_hash()),
            Some(sig.precomputed_hash())
        );
        text
    }

    #[test]
    fn every_part_of_a_signature_round_trips() {
        let flat = Signature::builder()
            .arg(DType::F32, &[-1, 256])
            .arg(DType::BF16, &[])
            .build();
        assert_eq!(round_trip(&flat), "f32[?,256];bf16[]\t-\t-\t-");
        let structured = Signature::builder()
            .arg(DType::I64, &[0, 1 << 40])
            .open(Container::Dict)
            .key("a, b: c")
            .static_scalar(ScalarValue::F32(-0.0))
            .key("n")
            .static_scalar(ScalarValue::Bool(true))
            .close()
            .captured(CapturedScalar::i32("t=1;", -3))
            .captured(CapturedScalar::f64("s", f64::NAN))
            .build();
        assert_eq!(
            round_trip(&structured),
            "i64[0,1099511627776]\tf32:80000000;bool:1\tT { k612c20623a2063 S k6e S )\t\
             73=f64:7ff8000000000000;743d313b=i32:fffffffd"
        );
        round_trip(&Signature::builder().build());
    }

    #[test]
    fn text_that_no_signature_writes_is_refused() {
        let good = ["f32[2]", "-", "-", "-"];
        assert!(decode(good).is_some());
        let with = |i: usize, field: &'static str| {
            let mut fields = good;
            fields[i] = field;
            fields
        };
        for fields in [
            with(0, ""),
            with(0, "f32[2"),
            with(0, "f31[2]"),
            with(0, "f32[-2]"),
            with(0, "f32[+2]"),
            with(0, "f32[2,]"),
            with(0, "f32[99999999999999999999]"),
            with(0, "f32[2];"),
            with(1, "i64:3"),
            with(2, "( T"),
            with(3, "74=f32:100000000"),
            with(3, "74=bool:2"),
            with(3, "74=u8:1"),
            with(3, "74=i64:-1"),
            with(3, "7=f32:0"),
            with(3, "75=f32:0;74=f32:1"),
        ] {
            assert_eq!(decode(fields), None, "{fields:?}");
        }
        let structured = ["f32[2]", "i64:3", "T S", "-"];
        assert!(decode(structured).is_some());
    }
}
