// Parameter initialisation keyed by (seed, parameter name, global element index). Used by
// ParameterStore for whole tensors, and by part 2 to create exactly the shard a rank owns.
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/executor/model/parameter_store.h"

namespace strata::executor {

// The initial value of element `global_index` (row-major in the unsharded tensor) of `name`.
double initial_value(const InitRule& rule, std::uint64_t seed, std::string_view name,
                     std::uint64_t global_index);

// Fills `shard`, whose element i is global element first_global_index + i of `name`.
void initialize_elements(Tensor& shard, const InitRule& rule, std::uint64_t seed,
                         std::string_view name, std::uint64_t first_global_index);

}  // namespace strata::executor
