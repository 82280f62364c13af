// The built-in op families, registered into the global registry (OpRegistry::instance()):
// a family is one file in graph/ops/ with its register function, declared and called here.
#include "graph/fused_ops.h"
#include "graph/ops/op_util.h"

namespace probelab::graph {

namespace ops {
void register_matmul_ops(OpRegistry& r);
void register_conv_ops(OpRegistry& r);
void register_elementwise_ops(OpRegistry& r);
void register_activation_ops(OpRegistry& r);
void register_softmax_ops(OpRegistry& r);
void register_layer_norm_ops(OpRegistry& r);
void register_instance_norm_ops(OpRegistry& r);
void register_batch_norm_ops(OpRegistry& r);
void register_pool_ops(OpRegistry& r);
void register_shape_ops(OpRegistry& r);
void register_reduce_ops(OpRegistry& r);
void register_loss_ops(OpRegistry& r);
void register_gather_ops(OpRegistry& r);
void register_optimizer_ops(OpRegistry& r);
void register_math_ops(OpRegistry& r);
void register_activation_param_ops(OpRegistry& r);
void register_binary_math_ops(OpRegistry& r);
void register_shape_query_ops(OpRegistry& r);
void register_shape_edit_ops(OpRegistry& r);
void register_pad_ops(OpRegistry& r);
void register_conv_transpose_ops(OpRegistry& r);
void register_resize_ops(OpRegistry& r);
void register_grid_sample_ops(OpRegistry& r);
void register_scatter_ops(OpRegistry& r);
void register_quantize_ops(OpRegistry& r);
void register_integer_gemm_ops(OpRegistry& r);
void register_topk_ops(OpRegistry& r);
void register_einsum_ops(OpRegistry& r);
void register_gather_nd_ops(OpRegistry& r);
void register_lrn_ops(OpRegistry& r);
void register_lp_norm_ops(OpRegistry& r);
void register_mvn_ops(OpRegistry& r);
void register_axis_scan_ops(OpRegistry& r);
void register_recurrent_ops(OpRegistry& r);
void register_pointwise_grad_op(OpRegistry& r);
void register_collective_ops(OpRegistry& r);
}  // namespace ops

// Every built-in family registers here, explicitly: static registrar objects in a static library
// are dropped by the linker when nothing else references their translation unit.
void register_builtin_ops(OpRegistry& r) {
  ops::register_matmul_ops(r);
  ops::register_conv_ops(r);
  ops::register_elementwise_ops(r);
  ops::register_activation_ops(r);
  ops::register_softmax_ops(r);
  ops::register_layer_norm_ops(r);
  ops::register_instance_norm_ops(r);
  ops::register_batch_norm_ops(r);
  ops::register_pool_ops(r);
  ops::register_shape_ops(r);
  ops::register_reduce_ops(r);
  ops::register_loss_ops(r);
  ops::register_gather_ops(r);
  ops::register_optimizer_ops(r);
  ops::register_math_ops(r);
  ops::register_activation_param_ops(r);
  ops::register_binary_math_ops(r);
  ops::register_shape_query_ops(r);
  ops::register_shape_edit_ops(r);
  ops::register_pad_ops(r);
  ops::register_conv_transpose_ops(r);
  ops::register_resize_ops(r);
  ops::register_grid_sample_ops(r);
  ops::register_quantize_ops(r);
  ops::register_integer_gemm_ops(r);
  ops::register_topk_ops(r);
  ops::register_einsum_ops(r);
  ops::register_gather_nd_ops(r);
  ops::register_lrn_ops(r);
  ops::register_lp_norm_ops(r);
  ops::register_mvn_ops(r);
  ops::register_scatter_ops(r);
  ops::register_axis_scan_ops(r);
  ops::register_recurrent_ops(r);
  ops::register_pointwise_grad_op(r);  // after every family with pointwise gradients
  ops::register_collective_ops(r);
  register_fused_ops(r);
}

}  // namespace probelab::graph
