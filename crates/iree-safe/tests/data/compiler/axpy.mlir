// a * x + y over f32[4] in StableHLO.
module @axpy {
  func.func @axpy(%a: tensor<4xf32>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
    %ax = stablehlo.multiply %a, %x : tensor<4xf32>
    %sum = stablehlo.add %ax, %y : tensor<4xf32>
    return %sum : tensor<4xf32>
  }
}
