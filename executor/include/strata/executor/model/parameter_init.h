// Parameter initialisation keyed by (seed, parameter name, global element index). Used by
// ParameterStore for whole tensors, and by part 2 to create exactly the shard a rank owns.
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/executor/model/parameter_store.h"

namespace strata::executor {

// Fills `shard`, whose element i is global element first_global_index + i of `name`.
void initialize_elements(Tensor& shard, const InitRule& rule, std::uint64_t seed,
                         std::string_view name, std::uint64_t first_global_index);

// Fills destination[destination_offset + (i − first)] with element i of `entry`'s local slice for
// i in [first, last): each from its global index through entry.runs. How a tensor-parallel shard,
// or a ZeRO-3 rank's part of one, is made without making the rest.
void initialize_slice(Tensor& destination, std::int64_t destination_offset,
                      const ParameterEntry& entry, std::int64_t first, std::int64_t last,
                      std::uint64_t seed);

}  // namespace strata::executor
