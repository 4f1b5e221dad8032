// The gradient buckets of a plan's data-parallel reduction — a decision the simulator and the
// executor share, so it lives with the plan. Their size is the plan's gradient_bucket_elements
// (`strata train --bucket-size`; absent: Megatron-LM's default max(40M, 1M·dp·cp) parameters), and
// how a rank's parameter units (the embeddings, each layer, the head) group into buckets is one
// rule: the cost models price the buckets it makes, the executor reduces them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "strata/schemas/plan.h"

namespace strata::schemas {

// Megatron-LM's --ddp-bucket-size default for `data_parallel_shards` = dp·cp ranks.
std::int64_t default_gradient_bucket_elements(std::int64_t data_parallel_shards);

// The plan's bucket size: its field, or the default for its dp·cp.
std::int64_t gradient_bucket_elements(const Plan& plan);

// The units of one bucket, inclusive, in forward order.
struct UnitBucket {
  std::size_t first_unit = 0, last_unit = 0;
  bool operator==(const UnitBucket&) const = default;
};

// Buckets of a run of consecutive units (`unit_elements`, forward order) that may share one:
// walking back from the last unit (the order gradients become ready), a bucket closes at the
// first unit that brings it to `bucket_elements`, after every unit when `bucket_per_unit` (ZeRO-3
// gathers and frees each unit on its own), and at the run's first unit. Forward order.
std::vector<UnitBucket> group_units_into_buckets(std::span<const std::int64_t> unit_elements,
                                                 std::int64_t bucket_elements,
                                                 bool bucket_per_unit);

}  // namespace strata::schemas
