#include "strata/costmodels/framework_behaviour.h"

namespace strata::costmodels {

using schemas::TrainingFramework;

FrameworkBehaviour framework_behaviour(TrainingFramework framework) {
  switch (framework) {
    case TrainingFramework::megatron_deepspeed:
    case TrainingFramework::deepspeed:
      return {.pipeline_sends_whole_activations = true,
              .pipeline_sends_block_compute = true,
              .zero1_bf16_gradients_all_reduced = true,
              .zero3_gathers_per_layer = true,
              .issues_kernels_eagerly = true,
              .bias_gradients_in_own_kernels = true};
    case TrainingFramework::nemo:
      return {.zero3_gathers_per_layer = true,
              .issues_kernels_eagerly = true,
              .loss_gradient_in_logits = true};
    case TrainingFramework::megatron_lm:
    case TrainingFramework::torchtitan:
    case TrainingFramework::llm_foundry:
      return {.zero3_gathers_per_layer = true, .issues_kernels_eagerly = true};
    case TrainingFramework::pytorch:
      return {.zero3_gathers_per_layer = true,
              .issues_kernels_eagerly = true,
              .autocast_over_fp32_parameters = true,
              .bias_gradients_in_own_kernels = true,
              .unfused_elementwise = true};
    case TrainingFramework::strata:
      return {.executor_activation_buffers = true, .gradient_buckets_close_at_units = true};
  }
  return {};
}

}  // namespace strata::costmodels
