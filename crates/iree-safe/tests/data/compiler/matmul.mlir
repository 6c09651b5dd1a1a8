// f32[2,3] x f32[3,2] matrix product in StableHLO.
module @matmul {
  func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
    %c = stablehlo.dot %a, %b : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
    return %c : tensor<2x2xf32>
  }
}
