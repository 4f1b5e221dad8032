#include "phased_plan_report.h"

#include "strata/schemas/plan_set.h"

namespace strata::tools {

nlohmann::json phased_plan_report(const schemas::ModelConfig& model,
                                  const schemas::ClusterConfig& cluster,
                                  const schemas::TrainingPhases& phases,
                                  const planner::PhasedPlan& planned) {
  nlohmann::json each = nlohmann::json::array();
  for (const planner::PlannedPhase& phase : planned.phases) {
    nlohmann::json entry{{"name", phase.phase.name},
                         {"first_step", phase.first_step},
                         {"steps", phase.phase.steps},
                         {"global_batch_size", phase.phase.global_batch_size},
                         {"seq_length", phase.phase.seq_length},
                         {"step_time_s", phase.chosen.metrics.step_time_s},
                         {"steps_seconds", phase.steps_seconds},
                         {"candidate", phase.candidate + 1},
                         {"candidates", phase.candidates}};
    if (phase.switch_in) {
      entry["switch_in"] = {{"seconds", phase.switch_in->seconds},
                            {"most_sent_bytes", phase.switch_in->most_sent_bytes},
                            {"most_received_bytes", phase.switch_in->most_received_bytes}};
    }
    each.push_back(std::move(entry));
  }
  return {{"model", model.name},
          {"cluster", cluster.name},
          {"gpus", cluster.world_size()},
          {"phases", each},
          {"total_steps", phases.total_steps()},
          {"total_seconds", planned.total_seconds},
          {"switch_seconds", planned.switch_seconds},
          {"each_fastest_seconds", planned.each_fastest_seconds},
          {"plan_set", schemas::plan_set_to_json(planned.set)}};
}

}  // namespace strata::tools
