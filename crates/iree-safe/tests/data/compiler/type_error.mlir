// Does not compile: the returned value is f32 but the result type says i32.
module @type_error {
  func.func @type_error(%x: tensor<4xf32>) -> tensor<4xi32> {
    return %x : tensor<4xf32>
  }
}
