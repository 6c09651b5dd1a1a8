// Scalar arguments and results: tensor * f32 scalar, plus integer and f64
// scalar arithmetic.
module @scalars {
  func.func @scale(%x: tensor<4xf32>, %s: f32) -> tensor<4xf32> {
    %t = tensor.from_elements %s : tensor<f32>
    %b = stablehlo.broadcast_in_dim %t, dims = [] : (tensor<f32>) -> tensor<4xf32>
    %y = stablehlo.multiply %x, %b : tensor<4xf32>
    return %y : tensor<4xf32>
  }
  func.func @add_i32(%a: i32, %b: i32) -> i32 {
    %c = arith.addi %a, %b : i32
    return %c : i32
  }
  func.func @mul_i64(%a: i64, %b: i64) -> i64 {
    %c = arith.muli %a, %b : i64
    return %c : i64
  }
  func.func @half_f64(%a: f64) -> f64 {
    %two = arith.constant 2.0 : f64
    %c = arith.divf %a, %two : f64
    return %c : f64
  }
}
