#include "strata/schedule/micro_batches_in_flight.h"

#include <algorithm>

namespace strata::schedule {

std::int64_t peak_micro_batches_in_flight(schemas::ScheduleType schedule, std::int64_t pp,
                                          std::int64_t vpp, std::int64_t m, std::int64_t rank) {
  switch (schedule) {
    case schemas::ScheduleType::gpipe:
      return m * vpp;
    case schemas::ScheduleType::interleaved_one_f_one_b:
      // Megatron's warm-up, 2·(pp − r − 1) + (vpp − 1)·pp forwards, and one more before the first
      // backward.
      return std::min(2 * (pp - rank - 1) + (vpp - 1) * pp + 1, m * vpp);
    default:
      // 1F1B, and ZB-H1, which splits its backwards but starts each as early.
      return std::min(pp - rank, m);
  }
}

}  // namespace strata::schedule
