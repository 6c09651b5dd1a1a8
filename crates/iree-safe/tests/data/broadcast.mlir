// A scalar broadcast to 2 GiB of f32: a device result too large to copy
// back under the address-space limit of tests/host_memory.rs.
module @broadcast {
  func.func @broadcast(%x: tensor<f32>) -> tensor<536870912xf32> {
    %y = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<536870912xf32>
    return %y : tensor<536870912xf32>
  }
}
