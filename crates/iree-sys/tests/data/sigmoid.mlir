// The smoke test's program: an elementwise logistic function in StableHLO.
module @sigmoid {
  func.func @sigmoid(%x: tensor<8xf32>) -> tensor<8xf32> {
    %y = stablehlo.logistic %x : tensor<8xf32>
    return %y : tensor<8xf32>
  }
}
