#include "train_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "strata/schemas/json_file.h"
#include "strata/schemas/mesh_ranks.h"
#include "strata/simulator/chrome_trace.h"
#include "strata/simulator/plan_simulation.h"
#include "text_format.h"

namespace strata::tools {
namespace {

using schedule::ActionType;

simulator::Stream stream_of(ActionType type) {
  switch (type) {
    case ActionType::send_forward:
    case ActionType::send_backward:
    case ActionType::recv_forward:
    case ActionType::recv_backward:
      return simulator::Stream::pipeline;
    case ActionType::reduce_grad:
    case ActionType::tied_embedding_grad:
    case ActionType::unshard:
    case ActionType::reshard:
      return simulator::Stream::data_parallel;
    default:
      return simulator::Stream::compute;
  }
}

// The action type a predicted slice stands for: its name is an action ("2F3", "STEP") or a
// collective of one ("REDUCE_GRAD 1 bucket 0", "UNSHARD 2").
std::optional<ActionType> type_of_slice(const std::string& name) {
  if (const std::optional<schedule::Action> action = schedule::parse_action(name)) {
    return action->type;
  }
  const std::string first = name.substr(0, name.find(' '));
  for (const ActionType type : {ActionType::reduce_grad, ActionType::unshard}) {
    if (first == schedule::action_type_token(type)) return type;
  }
  return std::nullopt;
}

}  // namespace

TrainTrace write_train_trace(const std::filesystem::path& file, const schemas::Plan& plan,
                             const std::filesystem::path& plan_directory,
                             const std::vector<std::vector<executor::ExecutedAction>>& measured,
                             const std::vector<executor::SwitchRecord>& switches) {
  simulator::SimulationOptions options;
  options.record_timeline = true;
  const simulator::PlanSimulation prediction =
      simulator::simulate_plan(plan, plan_directory, options);
  simulator::Timeline timeline;
  const auto world = static_cast<std::int64_t>(measured.size());
  for (std::int64_t rank = 0; rank < world; ++rank) {
    const schemas::MeshCoordinates at = schemas::mesh_coordinates(plan.mesh, rank);
    timeline.rank_names.push_back(
        fmt::format("measured: rank {} (tp {}, dp {}, pp {})", rank, at[0], at[2], at[3]));
    for (const executor::ExecutedAction& executed : measured[static_cast<std::size_t>(rank)]) {
      timeline.slices.push_back({rank, stream_of(executed.action.type),
                                 schedule::to_string(executed.action), executed.start_s,
                                 executed.end_s - executed.start_s});
    }
  }
  // The prediction's ranks follow the measured ones, each slice and memory sample moved along.
  const simulator::Timeline& predicted = prediction.result.timeline;
  for (const std::string& name : predicted.rank_names) {
    timeline.rank_names.push_back("predicted: " + name);
  }
  for (simulator::TimelineSlice slice : predicted.slices) {
    slice.rank += world;
    timeline.slices.push_back(std::move(slice));
  }
  for (simulator::MemorySample sample : predicted.memory) {
    sample.rank += world;
    timeline.memory.push_back(sample);
  }
  const std::size_t step_processes = timeline.rank_names.size();
  // The switches follow the step on the measured ranks, a millisecond apart, with their
  // predictions in a process of their own.
  if (!switches.empty()) {
    double at = 0;
    for (const simulator::TimelineSlice& slice : timeline.slices) {
      at = std::max(at, slice.start_s + slice.duration_s);
    }
    const auto predicted_switches = static_cast<std::int64_t>(timeline.rank_names.size());
    timeline.rank_names.push_back("predicted: layout switches");
    for (const executor::SwitchRecord& record : switches) {
      at += 1e-3;
      const std::string name =
          fmt::format("SWITCH {} -> {} after step {} ({} out)", record.from, record.to, record.step,
                      format_bytes(static_cast<double>(record.most_sent_bytes)));
      for (std::int64_t rank = 0; rank < world; ++rank) {
        timeline.slices.push_back(
            {rank, simulator::Stream::data_parallel, name, at, record.seconds, -1, -1});
      }
      if (record.predicted_transfer_s >= 0) {
        timeline.slices.push_back({predicted_switches, simulator::Stream::data_parallel, name, at,
                                   record.predicted_transfer_s, -1, -1});
      }
      at += std::max(record.seconds, std::max(record.predicted_transfer_s, 0.0));
    }
  }
  schemas::write_file_atomically(file, simulator::chrome_trace(timeline).dump() + "\n");

  // Per action type: rank 0's measured actions against the first predicted rank's slices.
  std::map<ActionType, ActionTypeComparison> by_type;
  TrainTrace trace;
  for (const executor::ExecutedAction& executed : measured.front()) {
    ActionTypeComparison& entry = by_type[executed.action.type];
    entry.measured_count += 1;
    entry.measured_mean_s += executed.end_s - executed.start_s;
    trace.measured_step_s = std::max(trace.measured_step_s, executed.end_s);
  }
  std::set<std::string> reduced_stages;  // the prediction reduces bucket by bucket
  for (const simulator::TimelineSlice& slice : predicted.slices) {
    if (slice.rank != 0) continue;
    const std::optional<ActionType> type = type_of_slice(slice.name);
    if (!type) continue;
    ActionTypeComparison& entry = by_type[*type];
    const bool new_action =
        *type != ActionType::reduce_grad ||
        reduced_stages.insert(slice.name.substr(0, slice.name.find(" bucket"))).second;
    entry.predicted_count += new_action ? 1 : 0;
    entry.predicted_mean_s += slice.duration_s;
  }
  for (auto& [type, entry] : by_type) {
    entry.type = std::string(schedule::action_type_token(type));
    if (entry.measured_count > 0) entry.measured_mean_s /= entry.measured_count;
    if (entry.predicted_count > 0) entry.predicted_mean_s /= entry.predicted_count;
    trace.by_type.push_back(entry);
  }
  trace.predicted_step_s = prediction.metrics.step_time_s;
  // Bubbles from the compute streams of both timelines, computed alike.
  std::vector<double> busy(step_processes, 0), end(step_processes, 0);
  for (const simulator::TimelineSlice& slice : timeline.slices) {
    const auto rank = static_cast<std::size_t>(slice.rank);
    if (rank >= step_processes || slice.name.starts_with("SWITCH ")) continue;
    end[rank] = std::max(end[rank], slice.start_s + slice.duration_s);
    if (slice.stream == simulator::Stream::compute) busy[rank] += slice.duration_s;
  }
  const auto mean_idle = [&](std::size_t first, std::size_t last, double step) {
    double idle = 0;
    for (std::size_t rank = first; rank < last; ++rank) idle += 1 - busy[rank] / step;
    return last > first ? idle / static_cast<double>(last - first) : 0.0;
  };
  const auto measured_ranks = static_cast<std::size_t>(world);
  const double measured_step = *std::max_element(end.begin(), end.begin() + world);
  trace.measured_bubble = mean_idle(0, measured_ranks, measured_step);
  double predicted_step = 0;
  for (std::size_t rank = measured_ranks; rank < end.size(); ++rank) {
    predicted_step = std::max(predicted_step, end[rank]);
  }
  trace.predicted_bubble = mean_idle(measured_ranks, end.size(), predicted_step);
  return trace;
}

}  // namespace strata::tools
