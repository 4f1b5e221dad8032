// The top-K plans side by side in `strata report`, and for each plan after the first a sentence
// saying why it is slower than the first, computed from their time breakdowns.
#pragma once

#include <string>
#include <vector>

#include "report_data.h"
#include "strata/simulator/plan_simulation.h"

namespace strata::tools {

// "+312 ms (+1.07%): pipeline bubble +280 ms, tp communication +40 ms; offset by compute −20 ms":
// the step-time difference of `other` over `first`, then the parts of the breakdown that moved
// most in its direction (up to three, until they account for 90% of it, none under 1%), and the
// largest part that moved the other way where it is at least 10% of the difference.
std::string explain_step_difference(const simulator::StepMetrics& first,
                                    const simulator::StepMetrics& other);

// A time difference with its sign: "+312 ms", "−1.25 s", "+0.42 ms".
std::string signed_duration(double seconds);

// The <section id="comparison">: a table of the plans, their breakdowns as bars on one scale.
std::string comparison_section_html(const std::vector<ReportedPlan>& plans);

}  // namespace strata::tools
