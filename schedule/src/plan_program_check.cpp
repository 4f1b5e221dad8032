#include "strata/schedule/plan_program_check.h"

#include <fmt/format.h>

#include "strata/schemas/input_error.h"

namespace strata::schedule {
namespace {

bool gives_gradients(ActionType type) {
  return type == ActionType::backward || type == ActionType::backward_weight;
}

}  // namespace

void check_plan_program(const PipelineSchedule& schedule, const schemas::Plan& plan,
                        const std::string& source) {
  const int pp = schedule.pp;
  const int last_stage = schedule.num_stages() - 1;
  const bool zero3 = plan.zero_stage == 3;
  const std::int64_t replicas = plan.mesh.dp * plan.mesh.cp;
  const bool ties = plan.model.last_stage_uses_word_embedding() && pp > 1;
  for (int rank = 0; rank < pp; ++rank) {
    const std::vector<Action>& actions = schedule.ranks[static_cast<std::size_t>(rank)];
    const auto refuse = [&](const Action& action, const std::string& why) {
      throw schemas::InputError(source, "",
                                fmt::format("rank {}: {}: {}", rank, to_string(action), why));
    };
    const Action step{ActionType::optimizer_step, -1, -1};
    if (actions.empty() || actions.back().type != ActionType::optimizer_step) {
      refuse(actions.empty() ? step : actions.back(),
             "a rank's action list ends with STEP, the optimizer step");
    }
    struct StageUse {
      int unshards = 0, reshards = 0, reductions = 0, ties = 0;
      bool gathered = false;
      std::size_t last_gradient = 0;
    };
    std::vector<StageUse> stages(static_cast<std::size_t>(schedule.num_stages()));
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (gives_gradients(actions[i].type)) {
        stages[static_cast<std::size_t>(actions[i].stage)].last_gradient = i;
      }
    }
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      if (action.type == ActionType::optimizer_step) {
        if (i + 1 != actions.size()) refuse(action, "STEP comes once, as the rank's last action");
        continue;
      }
      StageUse& use = stages[static_cast<std::size_t>(action.stage)];
      switch (action.type) {
        case ActionType::unshard:
        case ActionType::reshard:
          if (!zero3) {
            refuse(action, fmt::format("the plan's ZeRO stage {} keeps every stage's parameters "
                                       "whole; UNSHARD and RESHARD belong to ZeRO-3 plans",
                                       plan.zero_stage));
          }
          if (action.type == ActionType::unshard) {
            use.unshards += 1;
            use.gathered = true;
          } else {
            use.reshards += 1;
            use.gathered = false;
          }
          break;
        case ActionType::tied_embedding_grad:
          if (!ties) {
            refuse(action,
                   "nothing is tied across stages (the model's embeddings are untied or "
                   "the plan has one pipeline stage)");
          }
          if (action.stage != 0 && action.stage != last_stage) {
            refuse(action, fmt::format("only the first and the last stage ({}) hold the tied "
                                       "word embedding",
                                       last_stage));
          }
          use.ties += 1;
          break;
        case ActionType::reduce_grad:
          if (i < use.last_gradient) {
            refuse(action, fmt::format("comes before the stage's last backward ({}): gradients "
                                       "made after it would never be reduced",
                                       to_string(actions[use.last_gradient])));
          }
          use.reductions += 1;
          break;
        default:
          if (zero3 && schedule::is_compute(action.type) && !use.gathered &&
              action.type != ActionType::backward_weight) {
            refuse(action,
                   fmt::format("runs without its parameters: under ZeRO-3 it needs {}UNSHARD "
                               "before it and {}RESHARD after",
                               action.stage, action.stage));
          }
          break;
      }
    }
    for (int stage = rank; stage <= last_stage; stage += pp) {
      const StageUse& use = stages[static_cast<std::size_t>(stage)];
      if (replicas > 1 && use.reductions != 1) {
        refuse({ActionType::reduce_grad, stage, -1},
               fmt::format("appears {} times; with dp·cp = {} each stage's gradients are reduced "
                           "once a step",
                           use.reductions, replicas));
      }
      if (ties && (stage == 0 || stage == last_stage) && use.ties != 1) {
        refuse({ActionType::tied_embedding_grad, stage, -1},
               fmt::format("appears {} times; the tied word embedding's gradient is summed over "
                           "the first and last stage once a step",
                           use.ties));
      }
      if (zero3 && (use.unshards != 1 || use.reshards != 1)) {
        refuse({use.unshards != 1 ? ActionType::unshard : ActionType::reshard, stage, -1},
               "under ZeRO-3 each stage gathers its parameters once a step and frees them once");
      }
    }
  }
}

}  // namespace strata::schedule
