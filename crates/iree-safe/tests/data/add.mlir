// Elementwise sum of two f32[4] tensors.
module @add {
  func.func @add(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %sum = stablehlo.add %a, %b : tensor<4xf32>
    return %sum : tensor<4xf32>
  }
}
