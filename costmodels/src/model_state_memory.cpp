#include "strata/costmodels/model_state_memory.h"

#include "strata/costmodels/framework_behaviour.h"

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

schemas::Dtype model_state_dtype(schemas::Dtype precision, schemas::TrainingFramework framework) {
  return autocast_reaches(precision) && framework_behaviour(framework).autocast_over_fp32_parameters
             ? schemas::Dtype::fp32
             : precision;
}

ModelStateDtypes model_state_dtypes(schemas::Dtype precision,
                                    std::optional<schemas::Dtype> gradient_dtype,
                                    schemas::TrainingFramework framework) {
  const schemas::Dtype states = model_state_dtype(precision, framework);
  return {states, gradient_dtype.value_or(schemas::default_gradient_dtype(states))};
}

}  // namespace strata::costmodels
