//! How much contraction work a module holds: the multiply-adds of its
//! largest `stablehlo.dot_general`, read from the op's types, which decides
//! whether CPU code gets IREE's data tiling (`code.rs`, `CONTRACTION_FLAGS`):
//! it speeds up large matmuls and only costs compile time on small ones.

/// The contraction work of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// No contraction at all.
    None,
    /// The multiply-adds of the largest contraction, all of whose dims are
    /// static.
    Known(u64),
    /// A contraction whose size cannot be read here: a dynamic dim, a
    /// convolution, a linalg op, or a form this reader does not parse.
    Unknown,
}

/// Ops that contract but whose size this reader does not work out.
const OTHER_CONTRACTIONS: &[&str] = &[
    "stablehlo.convolution",
    "stablehlo.dot ",
    "linalg.matmul",
    "linalg.batch_matmul",
    "linalg.conv",
    "linalg.generic",
];

/// The contraction work of `module` (MLIR text).
pub(crate) fn largest(module: &str) -> Work {
    if OTHER_CONTRACTIONS.iter().any(|op| module.contains(op)) {
        return Work::Unknown;
    }
    let mut work = Work::None;
    for line in module
        .lines()
        .filter(|l| l.contains("stablehlo.dot_general"))
    {
        let Some(macs) = dot_general(line) else {
            return Work::Unknown;
        };
        work = match work {
            Work::Known(largest) => Work::Known(largest.max(macs)),
            _ => Work::Known(macs),
        };
    }
    work
}

/// The multiply-adds of the `dot_general` on `line` (pretty form, on one
/// line): the result's elements times the product of the contracted dims.
fn dot_general(line: &str) -> Option<u64> {
    let contracting = line.split("contracting_dims = [").nth(1)?;
    let lhs_dims = contracting.split(']').next()?;
    let types = line.rsplit_once(" : (")?.1;
    let (operands, result) = types.split_once(") -> ")?;
    let lhs = shape(operands.split(", tensor<").next()?)?;
    let out = shape(result)?;
    let mut k: u64 = 1;
    for index in lhs_dims.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        k = k.checked_mul(*lhs.get(index.parse::<usize>().ok()?)?)?;
    }
    out.iter().try_fold(k, |acc, &d| acc.checked_mul(d))
}

/// The static dims of `tensor<2x3xf32>` (with or without `tensor<`);
/// `None` for a dynamic dim.
fn shape(ty: &str) -> Option<Vec<u64>> {
    let inner = ty.trim().trim_start_matches("tensor<");
    let inner = inner.split('>').next()?;
    let mut parts: Vec<&str> = inner.split('x').collect();
    parts.pop(); // the element type
    parts.iter().map(|d| d.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MATMUL: &str = "%c = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<384x512xf32>, tensor<512x256xf32>) -> tensor<384x256xf32>";

    #[test]
    fn a_matmul_is_its_result_times_its_contracted_dim() {
        assert_eq!(largest(MATMUL), Work::Known(384 * 256 * 512));
        let batched = "%c = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>";
        assert_eq!(largest(batched), Work::Known(4 * 8 * 32 * 16));
        let vector = "%y = stablehlo.dot_general %x, %w, contracting_dims = [0] x [0] : (tensor<64xf32>, tensor<64x10xf32>) -> tensor<10xf32>";
        assert_eq!(largest(vector), Work::Known(640));
    }

    #[test]
    fn the_largest_contraction_counts_and_none_is_none() {
        let two = format!("{MATMUL}\n{}", MATMUL.replace("384x", "8x"));
        assert_eq!(largest(&two), Work::Known(384 * 256 * 512));
        assert_eq!(
            largest("%y = stablehlo.logistic %x : tensor<4xf32>"),
            Work::None
        );
    }

    #[test]
    fn what_cannot_be_read_is_unknown() {
        let dynamic = MATMUL
            .replace("384x512", "?x512")
            .replace("384x256", "?x256");
        assert_eq!(largest(&dynamic), Work::Unknown);
        assert_eq!(
            largest("%c = stablehlo.convolution(%a, %b) ..."),
            Work::Unknown
        );
        assert_eq!(
            largest("%c = stablehlo.dot_general %a, %b, contracting_dims = [9] x [0] : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>"),
            Work::Unknown
        );
        assert_eq!(
            largest("stablehlo.dot_general(%a, %b) {generic}"),
            Work::Unknown
        );
    }
}
