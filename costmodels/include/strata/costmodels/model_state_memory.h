// Bytes per parameter of the model states (weights, gradients, optimizer state) for Adam at a
// training precision. Used by `strata describe`; the memory model builds ZeRO sharding on it.
#pragma once

#include <cstdint>
#include <optional>

#include "strata/schemas/dtype.h"
#include "strata/schemas/training_framework.h"

namespace strata::costmodels {

struct ModelStateBytesPerParameter {
  std::int64_t weights = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer = 0;  // fp32 master weights (mixed precision), Adam's two moments
  std::int64_t total() const { return weights + gradients + optimizer; }
  bool operator==(const ModelStateBytesPerParameter&) const = default;
};

// fp32 (and tf32): 4 weights + 4 gradients + 8 Adam moments = 16.
// fp16 mixed precision (ZeRO paper's accounting): 2 + 2 + (4 master + 4 + 4) = 16.
// bf16: 2 + 4 + 12 = 18 — Megatron-LM accumulates and reduces bf16 gradients in fp32 main-grad
// buffers (bf16's 8-bit mantissa loses small updates), so its distributed optimizer costs
// 6 + 12/dp bytes per parameter, as its documentation's table says.
// fp8 (Transformer Engine): as bf16 — the fp8 copies of the weights are transient casts,
// counted with activations rather than here.
// `gradients` overrides the precision's gradient dtype (a plan's gradient_dtype): bf16 gradients
// under bf16 are 2 + 2 + 12 = 16, Megatron-Core's grad_reduce_in_fp32 = false.
ModelStateBytesPerParameter adam_model_state_bytes(schemas::Dtype precision);
ModelStateBytesPerParameter adam_model_state_bytes(schemas::Dtype precision,
                                                   schemas::Dtype gradients);

// The dtype whose model states a stack keeps at a training precision: the precision itself, or
// fp32 where the stack trains fp32 parameters under torch.autocast at a 16-bit precision
// (FrameworkBehaviour::autocast_over_fp32_parameters): fp32 weights and gradients and Adam's two
// moments with no master copy, 4 + 4 + 8 bytes; the 16-bit copies each forward casts are
// activations (activation_memory.h).
schemas::Dtype model_state_dtype(schemas::Dtype precision, schemas::TrainingFramework framework);

// What a plan's stack keeps its model states in: model_state_dtype's, with gradients in the
// plan's gradient dtype or, where it names none, that dtype's default.
struct ModelStateDtypes {
  schemas::Dtype states = schemas::Dtype::bf16;
  schemas::Dtype gradients = schemas::Dtype::fp32;
};
ModelStateDtypes model_state_dtypes(schemas::Dtype precision,
                                    std::optional<schemas::Dtype> gradient_dtype,
                                    schemas::TrainingFramework framework);

}  // namespace strata::costmodels
