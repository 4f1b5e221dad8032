#include "strata/schedule/schedule_csv.h"

#include <fmt/format.h>

#include <sstream>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::schedule {
namespace {

std::string trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t\r");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace

PipelineSchedule read_schedule_csv(const std::filesystem::path& path, int pp, int vpp,
                                   int num_micro_batches) {
  const std::string text = schemas::read_text_file(path);
  PipelineSchedule schedule{pp, vpp, num_micro_batches, {}};
  std::istringstream lines(text);
  std::string line;
  int line_number = 0;
  while (std::getline(lines, line)) {
    ++line_number;
    if (trim(line).empty()) continue;
    std::vector<Action> actions;
    std::size_t start = 0;
    int column = 1;
    while (start <= line.size()) {
      const std::size_t comma = std::min(line.find(',', start), line.size());
      const std::string cell = trim(std::string_view(line).substr(start, comma - start));
      if (!cell.empty()) {
        const std::optional<Action> action = parse_action(cell);
        if (!action) {
          throw schemas::InputError(
              path.string(), fmt::format("line {}, cell {}", line_number, column),
              fmt::format("\"{}\" is not an action (e.g. 0F1, 1I0, 0W1, 2SEND_F3, 1RECV_B0, "
                          "0REDUCE_GRAD, STEP)",
                          cell));
        }
        actions.push_back(*action);
      }
      start = comma + 1;
      ++column;
    }
    schedule.ranks.push_back(std::move(actions));
  }
  if (static_cast<int>(schedule.ranks.size()) != pp) {
    throw schemas::InputError(
        path.string(), "",
        fmt::format("{} non-empty rows for pp={}; give one row per pipeline rank",
                    schedule.ranks.size(), pp));
  }
  return schedule;
}

std::string schedule_to_csv(const PipelineSchedule& schedule) {
  std::string text;
  for (const std::vector<Action>& actions : schedule.ranks) {
    for (std::size_t i = 0; i < actions.size(); ++i) {
      if (i > 0) text += ',';
      text += to_string(actions[i]);
    }
    text += '\n';
  }
  return text;
}

}  // namespace strata::schedule
