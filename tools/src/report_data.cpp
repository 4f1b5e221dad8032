#include "report_data.h"

namespace strata::tools {

ReportedPlan simulate_for_report(std::string label, schemas::Plan plan,
                                 const std::filesystem::path& plan_directory, bool with_timeline,
                                 simulator::SimulationMode mode) {
  const simulator::SimulationOptions options{
      .mode = mode, .record_timeline = with_timeline, .timeline_rank_limit = kReportTimelineRanks};
  simulator::PlanSimulation simulation = simulator::simulate_plan(plan, plan_directory, options);
  return {std::move(label), std::move(plan), std::move(simulation)};
}

}  // namespace strata::tools
