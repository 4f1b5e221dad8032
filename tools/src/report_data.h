// What `strata report` shows: the plans, each with its simulation, and a training run's measured
// steps. Filled by the report command and by `strata plan --report`; read by every section.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "strata/schemas/plan.h"
#include "strata/simulator/plan_simulation.h"
#include "train_log_reader.h"

namespace strata::tools {

struct ReportedPlan {
  std::string label;  // where it came from: a file name, a plan set's id, "#2"
  schemas::Plan plan;
  simulator::PlanSimulation simulation;
};

struct Report {
  // The first is drawn in full (its simulation recorded a timeline); with more than one, all are
  // compared, each after the first against it.
  std::vector<ReportedPlan> plans;
  std::vector<MeasuredStep> measured;  // empty: no training log
  std::string measured_source;         // the log's file name
};

// The most ranks the timeline draws in full mode: a row each, every pipeline rank of the first
// replicas; a step of thousands of ranks would otherwise be a page of hundreds of megabytes.
inline constexpr std::int64_t kReportTimelineRanks = 64;

// Simulates `plan` for the report; `with_timeline` records what the timeline section draws.
ReportedPlan simulate_for_report(std::string label, schemas::Plan plan,
                                 const std::filesystem::path& plan_directory, bool with_timeline,
                                 simulator::SimulationMode mode);

}  // namespace strata::tools
