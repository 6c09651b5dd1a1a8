// 2 * x + 1 over f32[4], written in linalg (no StableHLO).
#id = affine_map<(d0) -> (d0)>
module @scale {
  func.func @scale(%x: tensor<4xf32>) -> tensor<4xf32> {
    %empty = tensor.empty() : tensor<4xf32>
    %y = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%x : tensor<4xf32>) outs(%empty : tensor<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %two = arith.constant 2.0 : f32
      %one = arith.constant 1.0 : f32
      %scaled = arith.mulf %in, %two : f32
      %shifted = arith.addf %scaled, %one : f32
      linalg.yield %shifted : f32
    } -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
