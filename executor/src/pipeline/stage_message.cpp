#include "strata/executor/pipeline/stage_message.h"

#include "strata/executor/check.h"

namespace strata::executor {

std::vector<PassThroughTensor> pass_through_tensors(const schemas::ModelConfig& model) {
  return {{"targets", ScalarType::int32, 1 + model.mtp_modules()}};
}

int stage_message_tag(bool backward, int stage, int num_stages, int micro_batch, int tensor,
                      int tensors_per_message) {
  const long long tag =
      ((static_cast<long long>(micro_batch) * num_stages + stage) * 2 + (backward ? 1 : 0)) *
          tensors_per_message +
      tensor;
  // MPI guarantees tags up to 32767; Open MPI allows 2^31 − 1.
  STRATA_CHECK(tag < (1LL << 30), "message tag {} of micro-batch {} stage {} is out of range", tag,
               micro_batch, stage);
  return static_cast<int>(tag);
}

}  // namespace strata::executor
