#include "plan_set_prediction.h"

#include <fmt/format.h>

#include <algorithm>

#include "strata/schemas/input_error.h"
#include "text_format.h"

namespace strata::tools {
namespace {

std::size_t index_of(const schemas::PlanSet& set, const std::string& id) {
  const auto found =
      std::find_if(set.plans.begin(), set.plans.end(),
                   [&](const schemas::PlanSetEntry& entry) { return entry.id == id; });
  return static_cast<std::size_t>(found - set.plans.begin());
}

// The plans a run of the set trains, in order: its phases' plans, or each plan once.
std::vector<std::size_t> run_order(const schemas::PlanSet& set) {
  std::vector<std::size_t> order;
  if (set.phases.empty()) {
    for (std::size_t i = 0; i < set.plans.size(); ++i) order.push_back(i);
  } else {
    for (const schemas::PlanSetPhase& phase : set.phases)
      order.push_back(index_of(set, phase.plan));
  }
  return order;
}

}  // namespace

const schemas::PlanSetEntry& plan_of_set(const schemas::PlanSet& set, const std::string& id,
                                         const std::string& set_path, const std::string& option) {
  const schemas::PlanSetEntry* entry = set.find(id);
  if (entry == nullptr) {
    throw schemas::InputError(
        option, "", fmt::format("\"{}\" is not a plan of {} ({})", id, set_path, set.id_list()));
  }
  return *entry;
}

PlanSetPrediction predict_plan_set(const schemas::PlanSet& set,
                                   const std::filesystem::path& set_directory,
                                   const simulator::SimulationOptions& options) {
  PlanSetPrediction prediction;
  for (const schemas::PlanSetEntry& entry : set.plans) {
    prediction.plans.push_back(simulator::simulate_plan(entry.plan, set_directory, options));
  }
  if (set.phases.empty()) return prediction;
  bool every_phase_timed = true;
  double steps_seconds = 0;
  for (std::size_t p = 0; p < set.phases.size(); ++p) {
    const schemas::PlanSetPhase& phase = set.phases[p];
    PhasePrediction predicted;
    predicted.plan = phase.plan;
    predicted.first_step = phase.first_step;
    predicted.step_time_s = prediction.plans[index_of(set, phase.plan)].metrics.step_time_s;
    if (p + 1 < set.phases.size()) {
      predicted.steps = set.phases[p + 1].first_step - phase.first_step;
    } else if (set.total_steps) {
      predicted.steps = *set.total_steps - phase.first_step;
    }
    if (predicted.steps) {
      predicted.seconds = static_cast<double>(*predicted.steps) * predicted.step_time_s;
      steps_seconds += *predicted.seconds;
    } else {
      every_phase_timed = false;
    }
    if (p > 0) {
      const std::string& previous = set.phases[p - 1].plan;
      // A phase that keeps the previous plan's id keeps its layout: nothing moves.
      predicted.switch_in =
          previous == phase.plan
              ? planner::SwitchPrediction{}
              : planner::predict_switch(set.find(previous)->plan, set.find(phase.plan)->plan);
      prediction.switch_seconds += predicted.switch_in->seconds;
    }
    prediction.phases.push_back(std::move(predicted));
  }
  if (every_phase_timed) prediction.total_seconds = steps_seconds + prediction.switch_seconds;
  return prediction;
}

simulator::Timeline phases_timeline(const schemas::PlanSet& set,
                                    const PlanSetPrediction& prediction) {
  simulator::Timeline timeline;
  const std::vector<std::size_t> order = run_order(set);
  double offset = 0;
  std::int64_t flow_offset = 0;
  const std::int64_t world = set.plans.front().plan.mesh.world_size();
  for (std::size_t k = 0; k < order.size(); ++k) {
    const simulator::PlanSimulation& simulation = prediction.plans[order[k]];
    const simulator::Timeline& step = simulation.result.timeline;
    if (timeline.rank_names.empty()) timeline.rank_names = step.rank_names;
    std::int64_t flows = 0;
    for (simulator::TimelineSlice slice : step.slices) {
      slice.start_s += offset;
      if (slice.flow_out >= 0) flows = std::max(flows, slice.flow_out + 1);
      if (slice.flow_in >= 0) flows = std::max(flows, slice.flow_in + 1);
      if (slice.flow_out >= 0) slice.flow_out += flow_offset;
      if (slice.flow_in >= 0) slice.flow_in += flow_offset;
      timeline.slices.push_back(std::move(slice));
    }
    for (simulator::MemorySample sample : step.memory) {
      sample.time_s += offset;
      timeline.memory.push_back(sample);
    }
    flow_offset += flows;
    offset += simulation.metrics.step_time_s;
    if (k + 1 == order.size()) break;
    const std::string& from = set.plans[order[k]].id;
    const std::string& to = set.plans[order[k + 1]].id;
    // With phases the prediction holds each switch; a set without them runs its plans in turn.
    const planner::SwitchPrediction transfer =
        !prediction.phases.empty() ? *prediction.phases[k + 1].switch_in
        : from == to
            ? planner::SwitchPrediction{}
            : planner::predict_switch(set.plans[order[k]].plan, set.plans[order[k + 1]].plan);
    for (std::int64_t rank = 0; rank < world; ++rank) {
      timeline.slices.push_back(
          {rank, simulator::Stream::data_parallel,
           fmt::format("SWITCH {} -> {} ({} out)", from, to,
                       format_bytes(static_cast<double>(transfer.most_sent_bytes))),
           offset, transfer.seconds, -1, -1});
    }
    offset += transfer.seconds;
  }
  return timeline;
}

nlohmann::json plan_set_prediction_to_json(const schemas::PlanSet& set,
                                           const PlanSetPrediction& prediction) {
  nlohmann::json plans = nlohmann::json::array();
  for (std::size_t i = 0; i < set.plans.size(); ++i) {
    nlohmann::json entry = simulator::simulation_to_json(set.plans[i].plan, prediction.plans[i]);
    entry["id"] = set.plans[i].id;
    plans.push_back(std::move(entry));
  }
  nlohmann::json report{{"plans", plans}};
  if (!prediction.phases.empty()) {
    nlohmann::json phases = nlohmann::json::array();
    for (const PhasePrediction& phase : prediction.phases) {
      nlohmann::json entry{{"plan", phase.plan},
                           {"first_step", phase.first_step},
                           {"step_time_s", phase.step_time_s}};
      if (phase.steps) entry["steps"] = *phase.steps;
      if (phase.seconds) entry["seconds"] = *phase.seconds;
      if (phase.switch_in) {
        entry["switch_in"] = {{"seconds", phase.switch_in->seconds},
                              {"most_sent_bytes", phase.switch_in->most_sent_bytes},
                              {"most_received_bytes", phase.switch_in->most_received_bytes}};
      }
      phases.push_back(std::move(entry));
    }
    report["phases"] = phases;
    report["switch_seconds"] = prediction.switch_seconds;
    if (prediction.total_seconds) report["total_seconds"] = *prediction.total_seconds;
  }
  return report;
}

std::string render_plan_set_prediction(const schemas::PlanSet& set,
                                       const PlanSetPrediction& prediction) {
  const schemas::Plan& first = set.plans.front().plan;
  std::string out =
      fmt::format("plan set of {} plan{} for {} on {} × {} ({})\n", set.plans.size(),
                  set.plans.size() == 1 ? "" : "s", first.model.name, first.mesh.world_size(),
                  first.cluster.gpu.name, first.cluster.name);
  const bool experts = first.model.moe.has_value();
  std::vector<std::string> header{"id", "tp", "cp", "pp", "dp"};
  if (experts) header.insert(header.end(), {"ep", "etp"});
  header.insert(header.end(),
                {"mb", "ZeRO", "batch", "seq", "step", "tokens/s", "MFU", "peak", "capacity"});
  std::vector<bool> right(header.size(), true);
  right.front() = false;
  TextTable plans(header, right);
  for (std::size_t i = 0; i < set.plans.size(); ++i) {
    const schemas::Plan& plan = set.plans[i].plan;
    const simulator::PlanSimulation& simulation = prediction.plans[i];
    std::vector<std::string> row{set.plans[i].id, std::to_string(plan.mesh.tp), cp_text(plan),
                                 std::to_string(plan.mesh.pp), std::to_string(plan.mesh.dp)};
    if (experts) {
      row.insert(row.end(), {std::to_string(plan.mesh.ep), std::to_string(plan.mesh.etp)});
    }
    row.insert(row.end(),
               {std::to_string(plan.batch.micro_batch_size), zero_text(plan),
                std::to_string(plan.batch.global_batch_size), std::to_string(plan.batch.seq_length),
                format_seconds(simulation.metrics.step_time_s),
                group_thousands(static_cast<std::int64_t>(simulation.metrics.tokens_per_s)),
                format_percent(simulation.metrics.mfu),
                format_bytes(simulator::peak_memory_bytes(simulation)),
                format_bytes(simulation.result.memory.front().capacity_bytes)});
    plans.add_row(row);
  }
  out += plans.render();
  if (prediction.phases.empty()) return out;
  out += "phases:\n";
  TextTable phases({"plan", "first step", "steps", "step", "phase time", "switch in"},
                   {false, true, true, true, true, true});
  for (const PhasePrediction& phase : prediction.phases) {
    phases.add_row(
        {phase.plan, group_thousands(phase.first_step),
         phase.steps ? group_thousands(*phase.steps) : "-", format_seconds(phase.step_time_s),
         phase.seconds ? format_seconds(*phase.seconds) : "-",
         phase.switch_in
             ? fmt::format("{} ({} out)", format_seconds(phase.switch_in->seconds),
                           format_bytes(static_cast<double>(phase.switch_in->most_sent_bytes)))
             : "-"});
  }
  out += phases.render();
  out += prediction.total_seconds
             ? fmt::format("predicted run: {} ({} of it switching layout)\n",
                           format_seconds(*prediction.total_seconds),
                           format_seconds(prediction.switch_seconds))
             : fmt::format(
                   "switches: {}; the set has no total_steps, so its last phase has no "
                   "length and the run no total\n",
                   format_seconds(prediction.switch_seconds));
  return out;
}

}  // namespace strata::tools
