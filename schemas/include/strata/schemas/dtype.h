// Dtype: the number formats a model is trained or stored in, with their file spellings and sizes.
// Used by the model, cluster and plan formats and by the cost models.
//
// Three of them are training recipes as much as formats: the GEMMs of the transformer layers run
// in them while everything else (attention, norms, the LM head, the optimizer) stays in bf16, as
// Transformer Engine does. fp8 scales a whole tensor by one factor (delayed or current scaling);
// mxfp8 is OCP's microscaling fp8, one power-of-two (E8M0) scale per 32 elements, which Blackwell's
// tensor cores apply in hardware; nvfp4 is NVIDIA's 4-bit E2M1 with one E4M3 scale per 16
// elements and a per-tensor fp32 scale on top.
#pragma once

#include <array>
#include <cstdint>

#include "strata/schemas/enum_names.h"

namespace strata::schemas {

enum class Dtype { fp32, tf32, fp16, bf16, fp8, mxfp8, nvfp4 };

inline constexpr std::array<EnumName<Dtype>, 7> kDtypeNames{{{Dtype::fp32, "fp32"},
                                                             {Dtype::tf32, "tf32"},
                                                             {Dtype::fp16, "fp16"},
                                                             {Dtype::bf16, "bf16"},
                                                             {Dtype::fp8, "fp8"},
                                                             {Dtype::mxfp8, "mxfp8"},
                                                             {Dtype::nvfp4, "nvfp4"}}};

// Storage bits of one element, scales aside (tf32 is stored in 32 bits; it is a tensor-core math
// mode).
constexpr int dtype_bits(Dtype dtype) {
  switch (dtype) {
    case Dtype::fp32:
    case Dtype::tf32:
      return 32;
    case Dtype::fp16:
    case Dtype::bf16:
      return 16;
    case Dtype::fp8:
    case Dtype::mxfp8:
      return 8;
    case Dtype::nvfp4:
      return 4;
  }
  return 0;
}

// Bytes of scale per element a block-scaled format carries beside its data: mxfp8 one byte per
// 32, nvfp4 one byte per 16 (its per-tensor fp32 scale is negligible); none for the others.
constexpr double dtype_scale_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::mxfp8:
      return 1.0 / 32;
    case Dtype::nvfp4:
      return 1.0 / 16;
    default:
      return 0.0;
  }
}

// Bytes one element occupies in memory, its block scales included (nvfp4: half a byte and a
// sixteenth).
constexpr double dtype_bytes(Dtype dtype) {
  return dtype_bits(dtype) / 8.0 + dtype_scale_bytes(dtype);
}

// Whether the layers' GEMMs run in a scaled low-precision format with bf16 around them (the
// recipes above); such a plan keeps bf16 weights, gradients and activations between kernels.
constexpr bool quantises_gemms(Dtype dtype) {
  return dtype == Dtype::fp8 || dtype == Dtype::mxfp8 || dtype == Dtype::nvfp4;
}

// The dtype a precision accumulates and reduces its gradients in unless a plan says otherwise:
// fp32 and tf32 in fp32; fp16 in fp16 (loss-scaled, the ZeRO paper's accounting); bf16 and the
// quantised recipes in fp32, as Megatron-LM's main-grad buffers do (bf16's 8-bit mantissa loses
// small updates summed over micro-batches).
constexpr Dtype default_gradient_dtype(Dtype precision) {
  switch (precision) {
    case Dtype::fp16:
      return Dtype::fp16;
    case Dtype::fp32:
    case Dtype::tf32:
    case Dtype::bf16:
    case Dtype::fp8:
    case Dtype::mxfp8:
    case Dtype::nvfp4:
      return Dtype::fp32;
  }
  return Dtype::fp32;
}

// The gradient dtypes a precision may use: its default; bf16 for bf16 and the quantised recipes
// (Megatron-Core's grad_reduce_in_fp32 = false, Megatron-LM's --grad-reduce-in-bf16: half the
// gradient memory and data-parallel traffic, which NVIDIA's Megatron-Bridge performance recipes
// use); fp32 for fp16.
constexpr bool allows_gradient_dtype(Dtype precision, Dtype gradients) {
  if (gradients == default_gradient_dtype(precision)) return true;
  if (gradients == Dtype::bf16) return precision == Dtype::bf16 || quantises_gemms(precision);
  return gradients == Dtype::fp32 && precision == Dtype::fp16;
}

}  // namespace strata::schemas
