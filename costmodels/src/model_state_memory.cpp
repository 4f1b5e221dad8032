#include "strata/costmodels/model_state_memory.h"

namespace strata::costmodels {

ModelStateBytesPerParameter adam_model_state_bytes(schemas::Dtype precision) {
  switch (precision) {
    case schemas::Dtype::fp32:
    case schemas::Dtype::tf32:
      return {4, 4, 8};
    case schemas::Dtype::fp16:
      return {2, 2, 12};
    case schemas::Dtype::bf16:
    case schemas::Dtype::fp8:
    case schemas::Dtype::mxfp8:
    case schemas::Dtype::nvfp4:
      return {2, 4, 12};
  }
  return {};
}

ModelStateBytesPerParameter adam_model_state_bytes(schemas::Dtype precision,
                                                   schemas::Dtype gradients) {
  ModelStateBytesPerParameter bytes = adam_model_state_bytes(precision);
  bytes.gradients = schemas::dtype_bits(gradients) / 8;
  return bytes;
}

}  // namespace strata::costmodels
