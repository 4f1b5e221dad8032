// Dtype: the number formats a model is trained or stored in, with their file spellings and sizes.
// Used by the model, cluster and plan formats and by the cost models.
#pragma once

#include <array>
#include <cstdint>

#include "strata/schemas/enum_names.h"

namespace strata::schemas {

enum class Dtype { fp32, tf32, fp16, bf16, fp8 };

inline constexpr std::array<EnumName<Dtype>, 5> kDtypeNames{{{Dtype::fp32, "fp32"},
                                                             {Dtype::tf32, "tf32"},
                                                             {Dtype::fp16, "fp16"},
                                                             {Dtype::bf16, "bf16"},
                                                             {Dtype::fp8, "fp8"}}};

// Storage size of one element (tf32 is stored in 32 bits; it is a tensor-core math mode).
constexpr std::int64_t dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32:
    case Dtype::tf32:
      return 4;
    case Dtype::fp16:
    case Dtype::bf16:
      return 2;
    case Dtype::fp8:
      return 1;
  }
  return 0;
}

}  // namespace strata::schemas
