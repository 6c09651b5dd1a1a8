//! How much contraction work a module holds, read from the types of its
//! `stablehlo.dot_general`s: its largest contraction's multiply-adds, which
//! decide whether CPU code runs on several cores beside `local-sync`
//! (`parallel.rs`), and its largest matrix product's (a batched contraction
//! is one product per batch), which decide whether it gets IREE's data
//! tiling (`code.rs`, `CONTRACTION_FLAGS`): tiling speeds up large matrix
//! products and only costs compile time on small ones, however many of
//! them a batch holds; and whether every contraction is an f32 matrix
//! product of a form that, on AVX-512, gets register-blocked tiles instead
//! (`code.rs`, [`AVX512_MATMUL_SPEC`](super::AVX512_MATMUL_SPEC)), with its
//! longest row.

/// The contraction work of a module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Work {
    /// No contraction at all.
    None,
    /// Contractions all of whose dims are static.
    Known(Contraction),
    /// A contraction whose size cannot be read here: a dynamic dim, a
    /// convolution, a linalg op, or a form this reader does not parse.
    Unknown,
}

/// The size of a module's largest contractions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Contraction {
    /// The multiply-adds of its largest contraction.
    pub(crate) multiply_adds: u64,
    /// The multiply-adds of its largest matrix product: a contraction's
    /// over the product of its batch dims (all of them, unbatched).
    pub(crate) per_product: u64,
    /// The module's f32 matrix products, when every contraction is one.
    pub(crate) f32_products: Option<F32Products>,
}

/// A module's contractions when every one is an f32 matrix product
/// `A[M,K]·B[K,N]` (contracting dims `[1] x [0]`), or a batch of them over
/// one leading dim (`[B,M,K]·[B,K,N]`, batching dims `[0] x [0]`,
/// contracting dims `[2] x [1]`): the forms of `linalg.matmul` and
/// `linalg.batch_matmul` that the tuning spec matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct F32Products {
    /// The longest right-hand row (`N`, in elements) among them.
    pub(crate) longest_row: u64,
    /// Whether one of them is batched.
    pub(crate) batched: bool,
}

impl F32Products {
    /// Both modules' products together.
    fn and(self, other: F32Products) -> F32Products {
        F32Products {
            longest_row: self.longest_row.max(other.longest_row),
            batched: self.batched || other.batched,
        }
    }
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
        let Some(this) = dot_general(line) else {
            return Work::Unknown;
        };
        work = match work {
            Work::Known(largest) => Work::Known(Contraction {
                multiply_adds: largest.multiply_adds.max(this.multiply_adds),
                per_product: largest.per_product.max(this.per_product),
                f32_products: largest
                    .f32_products
                    .zip(this.f32_products)
                    .map(|(a, b)| a.and(b)),
            }),
            _ => Work::Known(this),
        };
    }
    work
}

/// The size of the `dot_general` on `line` (pretty form, on one line): its
/// multiply-adds are the result's elements times the product of the
/// contracted dims, and each of its products' are that over the product of
/// its (left-hand) batch dims.
fn dot_general(line: &str) -> Option<Contraction> {
    let types = line.rsplit_once(" : (")?.1;
    let (operands, result) = types.split_once(") -> ")?;
    let (lhs_type, rhs_type) = operands.split_once(", tensor<")?;
    let lhs = shape(lhs_type)?;
    let rhs = shape(rhs_type)?;
    let out = shape(result)?;
    let product_of = |dims: &str| -> Option<u64> {
        let list = line.split(dims).nth(1)?.split(']').next()?;
        list.split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
            .try_fold(1u64, |acc, index| {
                acc.checked_mul(*lhs.get(index.parse::<usize>().ok()?)?)
            })
    };
    let k = product_of("contracting_dims = [")?;
    let batch = if line.contains("batching_dims = [") {
        product_of("batching_dims = [")?
    } else {
        1
    };
    let multiply_adds = out.iter().try_fold(k, |acc, &d| acc.checked_mul(d))?;
    let plain = line.contains("contracting_dims = [1] x [0] :")
        && !line.contains("batching_dims")
        && [lhs.len(), rhs.len(), out.len()] == [2, 2, 2];
    let batched = line.contains("batching_dims = [0] x [0], contracting_dims = [2] x [1] :")
        && [lhs.len(), rhs.len(), out.len()] == [3, 3, 3];
    let f32 = [lhs_type, rhs_type, result]
        .iter()
        .all(|ty| element(ty) == Some("f32"));
    let f32_products = ((plain || batched) && f32).then(|| F32Products {
        longest_row: rhs[rhs.len() - 1],
        batched,
    });
    Some(Contraction {
        multiply_adds,
        per_product: multiply_adds.checked_div(batch).unwrap_or(0),
        f32_products,
    })
}

/// The element type of `tensor<2x3xf32>` (with or without `tensor<`).
fn element(ty: &str) -> Option<&str> {
    ty.split('>').next()?.rsplit('x').next().map(str::trim)
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

    const PLAIN: Option<F32Products> = Some(F32Products {
        longest_row: 256,
        batched: false,
    });

    fn f32_products(module: &str) -> Option<F32Products> {
        match largest(module) {
            Work::Known(contraction) => contraction.f32_products,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_matmul_is_its_result_times_its_contracted_dim() {
        assert_eq!(
            largest(MATMUL),
            Work::Known(Contraction {
                multiply_adds: 384 * 256 * 512,
                per_product: 384 * 256 * 512,
                f32_products: PLAIN,
            })
        );
        let vector = "%y = stablehlo.dot_general %x, %w, contracting_dims = [0] x [0] : (tensor<64xf32>, tensor<64x10xf32>) -> tensor<10xf32>";
        assert_eq!(
            largest(vector),
            Work::Known(Contraction {
                multiply_adds: 640,
                per_product: 640,
                f32_products: None,
            })
        );
    }

    #[test]
    fn a_batched_matmul_is_as_many_products_as_its_batch() {
        let batched = "%c = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>";
        let each = 8 * 32 * 16;
        assert_eq!(
            largest(batched),
            Work::Known(Contraction {
                multiply_adds: 4 * each,
                per_product: each,
                f32_products: Some(F32Products {
                    longest_row: 32,
                    batched: true,
                }),
            })
        );
        let two_batch_dims = "%c = stablehlo.dot_general %a, %b, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x8x16xf32>, tensor<2x3x16x32xf32>) -> tensor<2x3x8x32xf32>";
        assert_eq!(
            largest(two_batch_dims),
            Work::Known(Contraction {
                multiply_adds: 6 * each,
                per_product: each,
                f32_products: None,
            })
        );
    }

    #[test]
    fn f32_products_are_plain_or_batched_over_one_dim_with_their_longest_row() {
        assert_eq!(f32_products(MATMUL), PLAIN);
        let wide = MATMUL
            .replace("512x256xf32>)", "512x2048xf32>)")
            .replace("384x256", "384x2048");
        assert_eq!(
            f32_products(&wide),
            Some(F32Products {
                longest_row: 2048,
                batched: false
            })
        );
        assert_eq!(f32_products(&MATMUL.replace("f32", "f16")), None);
        let transposed = MATMUL
            .replace("[1] x [0]", "[1] x [1]")
            .replace("512x256xf32>)", "256x512xf32>)");
        assert_eq!(f32_products(&transposed), None);
        // One product of another form makes the module's answer none.
        assert_eq!(f32_products(&format!("{MATMUL}\n{transposed}")), None);
        let batched = "%c = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1] : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>";
        // The longest row and whether one is batched are the module's.
        assert_eq!(
            f32_products(&format!("{MATMUL}\n{batched}")),
            Some(F32Products {
                longest_row: 256,
                batched: true
            })
        );
        let two_batch_dims = "%c = stablehlo.dot_general %a, %b, batching_dims = [0, 1] x [0, 1], contracting_dims = [3] x [2] : (tensor<2x3x8x16xf32>, tensor<2x3x16x32xf32>) -> tensor<2x3x8x32xf32>";
        assert_eq!(f32_products(two_batch_dims), None);
    }

    #[test]
    fn the_largest_contraction_counts_and_none_is_none() {
        let two = format!("{MATMUL}\n{}", MATMUL.replace("384x", "8x"));
        assert_eq!(
            largest(&two),
            Work::Known(Contraction {
                multiply_adds: 384 * 256 * 512,
                per_product: 384 * 256 * 512,
                f32_products: PLAIN,
            })
        );
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
