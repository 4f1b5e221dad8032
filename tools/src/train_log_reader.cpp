#include "train_log_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::tools {
namespace {

// A step takes from a nanosecond to about 30 years: the log's times outside that are not times
// strata train wrote, and would overflow the ratios and the chart's coordinates drawn from them.
constexpr double kShortestStepSeconds = 1e-9;
constexpr double kLongestStepSeconds = 1e9;

bool plausible_step_time(double seconds) {
  return seconds >= kShortestStepSeconds && seconds <= kLongestStepSeconds;
}

// A JSON step record's number at `key`, which must be there, finite and, for times, positive.
double positive_number(const nlohmann::json& record, const char* key, const std::string& source) {
  const auto found = record.find(key);
  if (found == record.end() || !found->is_number()) {
    throw schemas::InputError(source, fmt::format("/{}", key),
                              "a step record needs this number (as strata train writes it)");
  }
  const double value = found->get<double>();
  if (!plausible_step_time(value)) {
    throw schemas::InputError(source, fmt::format("/{}", key),
                              fmt::format("must be a step time from {:g} to {:g} seconds, not {:g}",
                                          kShortestStepSeconds, kLongestStepSeconds, value));
  }
  return value;
}

MeasuredStep json_step(const nlohmann::json& record, const std::string& source) {
  MeasuredStep step;
  const nlohmann::json& number = record.at("step");
  if (!number.is_number_integer() || number.get<std::int64_t>() < 1) {
    throw schemas::InputError(source, "/step", "must be a step number from 1");
  }
  step.step = number.get<std::int64_t>();
  step.measured_s = positive_number(record, "step_time_s", source);
  step.predicted_s = positive_number(record, "predicted_step_time_s", source);
  return step;
}

}  // namespace

std::vector<MeasuredStep> read_train_log(const std::filesystem::path& path) {
  const std::string text = schemas::read_text_file(path);
  // The text log's step line (train_log.cpp print_step):
  //   step  3/20 | loss 5.12 | ... | 8353 tokens/s | 61.2 ms (predicted 61.3 ms, ×1.00) | ...
  static const std::regex kTextStep(
      R"(^step +([0-9]+)/[0-9]+ \|.* \| ([0-9.]+) ms \(predicted ([0-9.]+) ms, )");
  std::vector<MeasuredStep> steps;
  std::istringstream lines(text);
  std::string line;
  for (std::size_t number = 1; std::getline(lines, line); ++number) {
    const std::string source = fmt::format("{}: line {}", path.string(), number);
    if (!line.empty() && line.front() == '{') {
      const nlohmann::json record = schemas::parse_json_text(line, source);
      // Evaluations ("eval_step") and the summary have no "step".
      if (record.is_object() && record.contains("step")) steps.push_back(json_step(record, source));
      continue;
    }
    std::smatch match;
    if (!std::regex_search(line, match, kTextStep)) continue;
    MeasuredStep step;
    try {
      step = {std::stoll(match[1].str()), std::stod(match[2].str()) / 1e3,
              std::stod(match[3].str()) / 1e3};
    } catch (const std::logic_error&) {  // out of range, or "." alone
      throw schemas::InputError(source, "", "a step line's numbers do not read");
    }
    if (!plausible_step_time(step.measured_s) || !plausible_step_time(step.predicted_s)) {
      throw schemas::InputError(
          source, "",
          fmt::format("a step's measured and predicted times must be from {:g} to {:g} seconds",
                      kShortestStepSeconds, kLongestStepSeconds));
    }
    steps.push_back(step);
  }
  if (steps.empty()) {
    throw schemas::InputError(path.string(), "",
                              "no training steps in it (give a log strata train wrote, as text "
                              "or with --log-format json)");
  }
  return steps;
}

}  // namespace strata::tools
