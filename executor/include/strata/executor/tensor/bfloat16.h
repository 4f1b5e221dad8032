// bfloat16 ↔ float32 on the host: the conversions the GPU does (round to nearest, ties to even),
// for llm.c bfloat16 files, checkpoints of bf16 runs and the CUDA tests' inputs and references.
#pragma once

#include <bit>
#include <cstdint>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

constexpr float bfloat16_to_float(BFloat16 value) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
}

constexpr BFloat16 float_to_bfloat16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return BFloat16{static_cast<std::uint16_t>((bits >> 16) | 0x0040u)};  // NaN stays NaN
  }
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return BFloat16{static_cast<std::uint16_t>((bits + rounding) >> 16)};
}

}  // namespace strata::executor
