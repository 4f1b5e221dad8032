#include "strata/schemas/gradient_buckets.h"

#include <algorithm>

namespace strata::schemas {

std::int64_t default_gradient_bucket_elements(std::int64_t data_parallel_shards) {
  return std::max<std::int64_t>(40'000'000, 1'000'000 * data_parallel_shards);
}

std::int64_t gradient_bucket_elements(const Plan& plan) {
  return plan.gradient_bucket_elements.value_or(
      default_gradient_bucket_elements(plan.mesh.dp * plan.mesh.cp));
}

std::vector<UnitBucket> group_units_into_buckets(std::span<const std::int64_t> unit_elements,
                                                 std::int64_t bucket_elements,
                                                 bool bucket_per_unit) {
  std::vector<UnitBucket> backward_order;
  std::int64_t collected = 0;
  std::size_t last_unit = unit_elements.size();  // of the bucket being collected; size(): none
  for (std::size_t unit = unit_elements.size(); unit-- > 0;) {
    if (last_unit == unit_elements.size()) last_unit = unit;
    collected += unit_elements[unit];
    if (bucket_per_unit || collected >= bucket_elements || unit == 0) {
      backward_order.push_back({unit, last_unit});
      last_unit = unit_elements.size();
      collected = 0;
    }
  }
  return {backward_order.rbegin(), backward_order.rend()};
}

}  // namespace strata::schemas
