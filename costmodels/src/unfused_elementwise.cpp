#include "strata/costmodels/unfused_elementwise.h"

#include "strata/costmodels/framework_behaviour.h"

namespace strata::costmodels {

bool autocasts_parameters(const LayerContext& context) {
  return context.autocast_over_fp32_parameters && autocast_reaches(context.precision);
}

UnfusedElementwise unfused_elementwise(const LayerContext& context, const LocalLayerDims& dims,
                                       const std::vector<GemmShape>& shapes) {
  const schemas::ModelConfig& model = *context.model;
  const double tokens = context.local_tokens();
  const double norm_tokens = context.norm_tokens();
  const double element = context.activation_bytes();
  const bool has_mlp = dims.ffn > 0;
  // The layer's biases (a fused qkv projection's, the attention output's, fc1's and fc2's): how
  // many, and their elements at their local lengths.
  double bias_count = 0;
  double bias_elements = 0;
  const auto add_bias = [&](double length) {
    bias_count += 1;
    bias_elements += length;
  };
  if (model.qkv_bias && !model.mla) add_bias(shapes.front().n);
  if (model.attention_output_bias) add_bias(dims.hidden);
  if (model.mlp_bias && has_mlp) {
    add_bias(shapes[shapes.size() - 2].n);
    add_bias(dims.hidden);
  }

  UnfusedElementwise extra;
  if (autocasts_parameters(context)) {
    constexpr double kMaster = kAutocastMasterBytes;
    const double stream = norm_tokens * dims.hidden;
    // Two norms and two residual adds, each reading and writing fp32 where the fused count has
    // 16 bits: a norm 2·(4 − 2) bytes more per element, an add (4 + 2 + 4) − 3·2.
    extra.widened_forward_bytes = 2 * (2 * (kMaster - element)) * stream +
                                  2 * ((2 * kMaster + element) - 3 * element) * stream;
    double weights = 0;
    for (const GemmShape& shape : shapes) weights += shape.n * shape.k;
    const double gemms = static_cast<double>(shapes.size());
    const double cast = kMaster + element;  // read one width, write the other
    // Forward: every weight and bias to 16 bits, each norm's output for its GEMM.
    extra.forward_kernels += gemms + bias_count + 2;
    extra.forward_bytes += cast * (weights + bias_elements + 2 * stream);
    // Backward: the norms' input gradients back to fp32 ...
    extra.backward_input_kernels += 2;
    extra.backward_input_bytes += cast * 2 * stream;
    // ... and every weight's and bias's gradient.
    extra.backward_weight_kernels += gemms + bias_count;
    extra.backward_weight_bytes += cast * (weights + bias_elements);
  }
  if (context.bias_gradients_in_own_kernels) {
    // One reduction over the tokens per bias, reading its output's gradient.
    extra.backward_weight_kernels += bias_count;
    extra.backward_weight_bytes += element * tokens * bias_elements;
  }
  if (context.unfused_elementwise) {
    if (model.dropout > 0) {
      // Each residual branch's dropout apart from its add: read and write the branch (the mask is
      // in the fused count), forward and backward.
      const double dropout_bytes = 2 * (2 * element) * norm_tokens * dims.hidden;
      extra.forward_kernels += 2;
      extra.forward_bytes += dropout_bytes;
      extra.backward_input_kernels += 2;
      extra.backward_input_bytes += dropout_bytes;
    }
    if (has_mlp && dims.gate == 2) {
      // SiLU, then its product with the up projection: forward 2 + 3 element accesses for the
      // fused kernel's 3; backward the product's two gradients and SiLU's, 9 for 6.
      extra.forward_kernels += 1;
      extra.forward_bytes += 2 * element * tokens * dims.ffn;
      extra.backward_input_kernels += 1;
      extra.backward_input_bytes += 3 * element * tokens * dims.ffn;
    }
    if (!model.mla) {
      // The attention returns q, k and v's gradients apart; they are concatenated into the
      // fused projection's output gradient (read and write).
      extra.backward_input_kernels += 1;
      extra.backward_input_bytes += 2 * element * tokens * shapes.front().n;
    }
  }
  return extra;
}

}  // namespace strata::costmodels
