#include "stage_gradient_buckets.h"

#include <algorithm>

#include "strata/costmodels/plan_costs.h"
#include "strata/layout/gradient_buckets.h"

namespace strata::costmodels {

namespace {

// A stage's parameters split into buckets of `bucket_parameters`, the last one holding the rest:
// how stacks that fill buckets parameter by parameter (Megatron-Core's DDP) cut them.
std::vector<double> even_gradient_buckets(double parameters, double bucket_parameters) {
  std::vector<double> buckets;
  for (double remaining = parameters; remaining > 0; remaining -= bucket_parameters) {
    buckets.push_back(std::min(remaining, bucket_parameters));
  }
  if (buckets.empty()) buckets.push_back(0);
  return buckets;
}

}  // namespace

std::vector<PricedBucket> executor_gradient_buckets(const schemas::Plan& plan,
                                                    const schemas::PipelineStage& stage) {
  std::vector<PricedBucket> buckets;
  for (const layout::GradientBucket& bucket : layout::stage_gradient_buckets(plan, stage)) {
    buckets.push_back({static_cast<double>(bucket.elements), bucket.experts});
  }
  if (buckets.empty()) buckets.push_back({});
  std::reverse(buckets.begin(), buckets.end());
  return buckets;
}

std::vector<PricedBucket> even_stage_buckets(const RankParameters& held, double bucket_parameters) {
  const std::vector<double> dense = even_gradient_buckets(held.dense, bucket_parameters);
  const std::vector<double> expert = held.expert > 0
                                         ? even_gradient_buckets(held.expert, bucket_parameters)
                                         : std::vector<double>{};
  std::vector<PricedBucket> buckets;
  std::size_t next_dense = 0, next_expert = 0;
  while (next_dense < dense.size() || next_expert < expert.size()) {
    const bool expert_next =
        next_expert < expert.size() &&
        (next_dense == dense.size() ||
         static_cast<double>(next_expert) * static_cast<double>(dense.size()) <
             static_cast<double>(next_dense) * static_cast<double>(expert.size()));
    buckets.push_back(expert_next ? PricedBucket{expert[next_expert++], true}
                                  : PricedBucket{dense[next_dense++], false});
  }
  return buckets;
}

std::vector<bool> StageBucketTimes::shape_of(const schemas::ModelConfig& model,
                                             const schemas::PipelineStage& stage) {
  std::vector<bool> moe_layers;
  for (std::int64_t layer = stage.first_layer; layer < stage.first_layer + stage.num_layers;
       ++layer) {
    moe_layers.push_back(moe_layers_in(model, layer, 1) == 1);
  }
  return moe_layers;
}

}  // namespace strata::costmodels
