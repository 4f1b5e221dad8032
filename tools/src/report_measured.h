// A training run beside its prediction, for `strata report --train-log`: each step's measured
// time and the time predicted for it, as a chart and a table, and their mean ratio.
#pragma once

#include <string>
#include <vector>

#include "strata/simulator/plan_simulation.h"
#include "train_log_reader.h"

namespace strata::tools {

// Mean over the steps of measured / predicted.
double mean_measured_over_predicted(const std::vector<MeasuredStep>& steps);

// The <section id="measured">. `simulation` is the report's plan: when the log's predictions
// differ from its step time, the section says so (the log may be of another plan).
std::string measured_section_html(const std::vector<MeasuredStep>& steps,
                                  const std::string& log_name,
                                  const simulator::PlanSimulation& simulation);

}  // namespace strata::tools
