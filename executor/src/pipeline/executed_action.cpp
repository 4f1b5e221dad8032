#include "strata/executor/pipeline/executed_action.h"

#include "strata/executor/distributed/typed_collectives.h"

namespace strata::executor {

std::vector<std::vector<ExecutedAction>> gather_executed_actions(
    const std::vector<ExecutedAction>& mine, Communicator* world) {
  if (world == nullptr || world->size() == 1) return {mine};
  std::vector<std::vector<ExecutedAction>> by_rank = all_gather_record_lists(*world, mine);
  if (world->rank() != 0) return {};
  return by_rank;
}

}  // namespace strata::executor
