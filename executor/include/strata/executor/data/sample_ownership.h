// Which samples of a step's global batch a data-parallel rank reads: dp rank d takes the
// contiguous d-th 1/dp of them, and its micro-batch m the m-th run of micro_batch_size within
// that (every tp, cp and pp rank of a dp replica reads the same ones). With the sampler's windows
// a function of (seed, step, sample), this is what makes every layout train on the one device's
// batches. The one place the split is decided; the pipeline runtime reads from it.
#pragma once

#include <cstdint>

#include "strata/schemas/plan.h"

namespace strata::executor {

// The global index of the first sample of micro-batch `micro_batch` on dp rank `dp_rank`.
inline std::int64_t first_sample_of(const schemas::BatchConfig& batch, std::int64_t dp,
                                    std::int64_t dp_rank, std::int64_t micro_batch) {
  return dp_rank * (batch.global_batch_size / dp) + micro_batch * batch.micro_batch_size;
}

}  // namespace strata::executor
