// The report's words and escaping (tools/src/report_comparison.cpp, report_html.cpp): why a plan
// lost to the first, computed by hand from made-up breakdowns.
#include "report_comparison.h"

#include <gtest/gtest.h>

#include "report_html.h"

namespace strata::tools {
namespace {

simulator::StepMetrics metrics(double compute_s, double tp_s, double pp_s, double bubble_s) {
  simulator::StepMetrics step;
  step.breakdown.compute_s = compute_s;
  step.breakdown.tp_comm_s = tp_s;
  step.breakdown.pp_comm_s = pp_s;
  step.breakdown.bubble_s = bubble_s;
  step.step_time_s = step.breakdown.sum();
  return step;
}

TEST(ReportComparison, NamesTheLargestPartsOfTheDifference) {
  // +312 ms = bubble +280, tp +40, pp +12, compute −20. Bubble and tp explain 320 ms ≥ 90% of
  // 312, so pp is not named; compute offsets 20/312 = 6% < 10%, not named either.
  const simulator::StepMetrics first = metrics(8.0, 1.0, 0.0, 1.0);
  const simulator::StepMetrics other = metrics(7.98, 1.04, 0.012, 1.28);
  EXPECT_EQ(explain_step_difference(first, other),
            "+312 ms (+3.12%): pipeline bubble (idle) +280 ms, tp communication +40 ms");
}

TEST(ReportComparison, NamesWhatOffsetsTheDifference) {
  // −500 ms = compute −1 s (explains all of it), bubble +500 ms (offsets 100% of it).
  const simulator::StepMetrics first = metrics(8.0, 1.0, 0.0, 1.0);
  const simulator::StepMetrics other = metrics(7.0, 1.0, 0.0, 1.5);
  EXPECT_EQ(explain_step_difference(first, other),
            "\u2212500 ms (\u22125.00%): compute \u22121.00 s; offset by pipeline bubble (idle) "
            "+500 ms");
}

TEST(ReportComparison, SmallPartsAreLeftOutAndTiesSaidSo) {
  // +4 ms of which tp +3.99 ms; pp +0.01 ms is under 1% of the difference.
  const simulator::StepMetrics first = metrics(1.0, 0.1, 0.0, 0.0);
  const simulator::StepMetrics other = metrics(1.0, 0.10399, 0.00001, 0.0);
  EXPECT_EQ(explain_step_difference(first, other), "+4.00 ms (+0.36%): tp communication +3.99 ms");
  EXPECT_EQ(explain_step_difference(first, first), "the same predicted step time");
}

TEST(ReportHtml, EscapesMarkupAndQuotes) {
  EXPECT_EQ(html_escape("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  EXPECT_EQ(html_table({"<h>"}, {{"a&b"}}, {true}),
            "<table>\n<thead><tr><th class=\"num\">&lt;h&gt;</th></tr></thead>\n<tbody>\n"
            "<tr><td class=\"num\">a&amp;b</td></tr>\n</tbody>\n</table>\n");
}

TEST(ReportHtml, AxisTicksAreOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_EQ(axis_ticks(28), (std::vector<double>{0, 5, 10, 15, 20, 25}));
  EXPECT_EQ(axis_ticks(61.3), (std::vector<double>{0, 10, 20, 30, 40, 50, 60}));
  EXPECT_EQ(axis_ticks(2500), (std::vector<double>{0, 500, 1000, 1500, 2000, 2500}));
  EXPECT_EQ(svg_number(12.5), "12.5");
  EXPECT_EQ(svg_number(3.0), "3");
  EXPECT_EQ(svg_number(-0.001), "0");
}

}  // namespace
}  // namespace strata::tools
