// A pipeline stage's gradient buckets as the plan's stack forms them, and their reduction times
// (plan_costs.cpp): Strata's executor's buckets from the layout rule it runs, other stacks' filled
// evenly; the times kept per stage shape, since most stages of a deep pipeline share one.
#pragma once

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

#include "strata/costmodels/collective_time.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/schemas/plan.h"

namespace strata::costmodels {

// One bucket as priced: its elements, and whether it holds routed experts reduced apart.
struct PricedBucket {
  double elements = 0;
  bool experts = false;
};

// The buckets Strata's executor forms on the first rank of `stage`'s tp, ep and etp groups, in
// the order its backward completes them: layout/gradient_buckets.h, the rule the executor runs.
std::vector<PricedBucket> executor_gradient_buckets(const schemas::Plan& plan,
                                                    const schemas::PipelineStage& stage);

// Stacks that fill buckets parameter by parameter (Megatron-Core's DDP): the stage's dense
// parameters in even buckets and, apart, the routed experts in buckets of their own (its expert
// gradient buffer), completed through the backward alongside the dense ones: interleaved in
// proportion.
std::vector<PricedBucket> even_stage_buckets(const RankParameters& held, double bucket_parameters);

// The reduction time of each bucket of a stage and its largest bucket, kept per stage shape: a
// stage's buckets depend on it only through which of its layers are MoE layers and whether it
// holds the embedding or the head.
class StageBucketTimes {
 public:
  struct Times {
    std::vector<double> times_s;
    double largest = 0;  // parameters of the largest bucket
  };
  // `bucket_time_s(elements, experts)` prices one bucket; `even_buckets` chooses other stacks'
  // even buckets of `bucket_parameters` over the executor's.
  template <typename BucketTime>
  const Times& of(const schemas::Plan& plan, const schemas::PipelineStage& stage,
                  const RankParameters& held, bool even_buckets, double bucket_parameters,
                  const BucketTime& bucket_time_s) {
    Key key{shape_of(plan.model, stage), stage.embedding, stage.lm_head};
    for (const auto& [known, times] : known_) {
      if (known == key) return times;
    }
    const std::vector<PricedBucket> buckets = even_buckets
                                                  ? even_stage_buckets(held, bucket_parameters)
                                                  : executor_gradient_buckets(plan, stage);
    Times times;
    for (const PricedBucket& bucket : buckets) {
      times.largest = std::max(times.largest, bucket.elements);
      times.times_s.push_back(bucket_time_s(bucket.elements, bucket.experts));
    }
    known_.emplace_back(std::move(key), std::move(times));
    return known_.back().second;
  }

 private:
  using Key = std::tuple<std::vector<bool>, bool, bool>;
  static std::vector<bool> shape_of(const schemas::ModelConfig& model,
                                    const schemas::PipelineStage& stage);
  std::vector<std::pair<Key, Times>> known_;
};

}  // namespace strata::costmodels
