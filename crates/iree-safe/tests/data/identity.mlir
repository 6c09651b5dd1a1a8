// Negation or identity per element type, to round-trip every dtype through a
// call: f16, bf16, f64, i8, i32, i64 and i1.
module @dtypes {
  func.func @neg_f16(%x: tensor<3xf16>) -> tensor<3xf16> {
    %y = stablehlo.negate %x : tensor<3xf16>
    return %y : tensor<3xf16>
  }
  func.func @neg_bf16(%x: tensor<3xbf16>) -> tensor<3xbf16> {
    %y = stablehlo.negate %x : tensor<3xbf16>
    return %y : tensor<3xbf16>
  }
  func.func @neg_f64(%x: tensor<3xf64>) -> tensor<3xf64> {
    %y = stablehlo.negate %x : tensor<3xf64>
    return %y : tensor<3xf64>
  }
  func.func @neg_i8(%x: tensor<3xi8>) -> tensor<3xi8> {
    %y = stablehlo.negate %x : tensor<3xi8>
    return %y : tensor<3xi8>
  }
  func.func @neg_i32(%x: tensor<3xi32>) -> tensor<3xi32> {
    %y = stablehlo.negate %x : tensor<3xi32>
    return %y : tensor<3xi32>
  }
  func.func @neg_i64(%x: tensor<3xi64>) -> tensor<3xi64> {
    %y = stablehlo.negate %x : tensor<3xi64>
    return %y : tensor<3xi64>
  }
  func.func @not_i1(%x: tensor<3xi1>) -> tensor<3xi1> {
    %y = stablehlo.not %x : tensor<3xi1>
    return %y : tensor<3xi1>
  }
}
