// CUDA launcher of dropout (ops/dropout.h): the keep mask of element (row, column) is drawn by
// counter_uniform(seed, stream, (first_token + row)·total_features + first_feature + column) > p,
// as on the CPU, so both backends drop the same elements.
#pragma once

#include <cstdint>

#include "strata/executor/tensor/scalar_type.h"

namespace strata::executor::cuda {

struct DropoutLaunch {
  std::uint64_t seed = 0;
  std::uint64_t stream = 0;  // (step << 24) | site, as dropout.cpp packs it
  std::int64_t first_token = 0;
  std::int64_t first_feature = 0;
  std::int64_t total_features = 0;
  double probability = 0;
};

// out = in·keep/(1 − p) (accumulate: out += …) over [rows, features].
void launch_dropout(const void* in, void* out, std::int64_t rows, std::int64_t features,
                    const DropoutLaunch& mask, bool accumulate, ScalarType type);

}  // namespace strata::executor::cuda
