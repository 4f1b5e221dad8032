// The model's parameters in units — the embeddings, each layer, the head (final norm and LM
// head) — and the hooks through which the model tells the owner of their storage when a unit's
// values and gradients are needed. ZeRO-3 gathers a unit's parameters before it runs and frees
// them after (once for the forward, again for the backward); gradient reduction starts a unit's
// reduction when its backward is done. Used by Transformer and the sharded optimizer.
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/executor/model/parameter_store.h"

namespace strata::executor {

// A parameter's unit and a model's unit count: layout::parameter_unit and
// layout::parameter_unit_count (named here through model/parameter_store.h).

// Acquire and release come in pairs and may nest (with tied embeddings the head uses unit 0's
// word embedding too). A unit's values are valid between acquire_values and the matching
// release; its gradient views between acquire_gradients and the matching release, and the
// unit's gradients of this backward are complete when its last gradient reference is released.
class ParameterUnitHooks {
 public:
  virtual ~ParameterUnitHooks() = default;
  virtual void acquire_values(std::int64_t unit) = 0;
  virtual void release_values(std::int64_t unit) = 0;
  virtual void acquire_gradients(std::int64_t unit) = 0;
  virtual void release_gradients(std::int64_t unit) = 0;
};

}  // namespace strata::executor
