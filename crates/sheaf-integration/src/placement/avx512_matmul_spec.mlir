// IREE tuning spec (`--iree-codegen-tuning-spec-path`): the tiles of an
// f32 `linalg.matmul` (A[M,K] * B[K,N], B's rows contiguous) and of an f32
// `linalg.batch_matmul` (the same for each entry of a leading batch dim) on
// an x86-64 CPU with AVX-512, compiled without data tiling. Each workgroup
// computes a 64x64 block of the result (of one batch entry) over K in
// chunks of 128, and its innermost code an 8x32 block (16 zmm accumulators,
// 2 vector loads of B and 8 broadcasts of A per step of K) four steps of K
// at a time. K is summed in order, as in IREE's own code, so results are
// unchanged. Applied by sheaf-integration (`placement/code.rs`,
// `AVX512_MATMUL_SPEC` and `MatmulSpecReach`), which says where it wins on
// each CPU family and where IREE's data tiling is kept.
module @sheaf_avx512_f32_matmul attributes { transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint } {
  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly}, %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.yield
  }
  // Only the plain form: a transposed operand's `linalg.matmul` carries
  // `indexing_maps`, and does not match.
  transform.named_sequence @match_f32_matmul(%matmul: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_param) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %matmul {
    ^bb0(%lhs: tensor<?x?xf32>, %rhs: tensor<?x?xf32>, %out: tensor<?x?xf32>):
      %r = linalg.matmul ins(%lhs, %rhs : tensor<?x?xf32>, tensor<?x?xf32>) outs(%out : tensor<?x?xf32>) -> tensor<?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %config = transform.param.constant #iree_codegen.compilation_info<
      lowering_config = #iree_cpu.lowering_config<distribution = [64, 64, 0], cache_reduction = [0, 0, 128], vector_common_parallel = [8, 32, 0], vector_reduction = [0, 0, 4]>,
      translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>> -> !transform.any_param
    transform.yield %matmul, %config : !transform.any_op, !transform.any_param
  }
  transform.named_sequence @match_f32_batch_matmul(%matmul: !transform.any_op {transform.readonly}) -> (!transform.any_op, !transform.any_param) {
    %ins, %outs = transform.iree.match.cast_compatible_dag_from_root %matmul {
    ^bb0(%lhs: tensor<?x?x?xf32>, %rhs: tensor<?x?x?xf32>, %out: tensor<?x?x?xf32>):
      %r = linalg.batch_matmul ins(%lhs, %rhs : tensor<?x?x?xf32>, tensor<?x?x?xf32>) outs(%out : tensor<?x?x?xf32>) -> tensor<?x?x?xf32>
    } : (!transform.any_op) -> (!transform.any_value, !transform.any_value)
    %config = transform.param.constant #iree_codegen.compilation_info<
      lowering_config = #iree_cpu.lowering_config<distribution = [1, 64, 64, 0], cache_reduction = [0, 0, 0, 128], vector_common_parallel = [1, 8, 32, 0], vector_reduction = [0, 0, 0, 4]>,
      translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>> -> !transform.any_param
    transform.yield %matmul, %config : !transform.any_op, !transform.any_param
  }
  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed}) -> !transform.any_op attributes { iree_codegen.tuning_spec_entrypoint } {
    %res = transform.foreach_match in %variant_op
        @match_f32_matmul -> @apply_op_config,
        @match_f32_batch_matmul -> @apply_op_config
      : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }
}
