#include "strata/schedule/plan_schedule.h"

#include <algorithm>

#include "strata/schedule/plan_program_check.h"
#include "strata/schedule/schedule_check.h"
#include "strata/schedule/schedule_csv.h"

namespace strata::schedule {
namespace {

bool has_any(const PipelineSchedule& schedule, auto&& predicate) {
  return std::any_of(schedule.ranks.begin(), schedule.ranks.end(),
                     [&](const std::vector<Action>& actions) {
                       return std::any_of(actions.begin(), actions.end(), predicate);
                     });
}

}  // namespace

StepActions step_actions_of(const schemas::Plan& plan) {
  return {.unshard_parameters = plan.zero_stage == 3,
          .reduce_gradients = plan.mesh.dp * plan.mesh.cp > 1,
          .overlap_gradient_reduction = plan.overlap_grad_reduce,
          .tied_embedding = plan.model.last_stage_uses_word_embedding() && plan.mesh.pp > 1};
}

PipelineSchedule build_plan_schedule(const schemas::Plan& plan,
                                     const std::filesystem::path& plan_directory) {
  const int pp = static_cast<int>(plan.mesh.pp);
  const int vpp = static_cast<int>(plan.mesh.vpp);
  const int m = static_cast<int>(plan.batch.num_micro_batches);
  using schemas::ScheduleType;
  PipelineSchedule schedule;
  switch (plan.schedule.type) {
    case ScheduleType::gpipe:
      schedule = gpipe_schedule(pp, vpp, m);
      break;
    case ScheduleType::one_f_one_b:
      schedule = one_f_one_b_schedule(pp, m);
      break;
    case ScheduleType::interleaved_one_f_one_b:
      schedule = interleaved_one_f_one_b_schedule(pp, vpp, m);
      break;
    case ScheduleType::zb_h1:
      schedule = zb_h1_schedule(pp, m);
      break;
    case ScheduleType::custom: {
      const std::filesystem::path file = plan_directory / plan.schedule.file;
      schedule = read_schedule_csv(file, pp, vpp, m);
      const bool has_communication = has_any(schedule, [](const Action& action) {
        return has_micro_batch(action.type) && !is_compute(action.type);
      });
      const bool has_step_actions =
          has_any(schedule, [](const Action& action) { return !has_micro_batch(action.type); });
      if (!has_communication) add_communication(schedule);
      if (!has_step_actions) add_step_actions(schedule, step_actions_of(plan));
      check_schedule(schedule, file.string());
      check_plan_program(schedule, plan, file.string());
      return schedule;
    }
  }
  add_communication(schedule);
  add_step_actions(schedule, step_actions_of(plan));
  return schedule;
}

}  // namespace strata::schedule
