// Logistic function of an f32[4] in StableHLO: the benchmark's tiny module.
module @sigmoid {
  func.func @sigmoid(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = stablehlo.logistic %x : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
