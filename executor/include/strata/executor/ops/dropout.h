// Dropout with counter-based masks, forward and backward. Used after the embedding and after each
// residual branch when the model's dropout is non-zero.
//
// The mask of element (token, feature) is a pure function of (seed, step, site, global token
// index, global feature index), so no mask is stored between forward and backward, and part 2's
// ranks drop exactly the elements one device would, however tokens and features are sharded.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::uint32_t site = 0;           // which dropout in the model (layer × place)
  std::int64_t first_token = 0;     // global index of row 0's token
  std::int64_t first_feature = 0;   // global index of column 0 (a tp shard starts later)
  std::int64_t total_features = 0;  // the unsharded row width
};

// The keep decision of one element (true keeps it).
bool dropout_keeps(const DropoutKey& key, double probability, std::int64_t token,
                   std::int64_t feature);

// y = x·keep/(1 − p) for x [tokens, features]; p = 0 copies.
void dropout_forward(const Tensor& x, double probability, const DropoutKey& key, Tensor& y);
// dx += dy·keep/(1 − p), the mask recomputed from the key.
void dropout_backward(const Tensor& dy, double probability, const DropoutKey& key, Tensor& dx);

}  // namespace strata::executor
