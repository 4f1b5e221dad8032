#include "strata/schedule/schedule_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "strata/schemas/input_error.h"

namespace strata::schedule {
namespace {

constexpr int kActionTypes = static_cast<int>(ActionType::optimizer_step) + 1;

// Which actions have run (or, before execution, how often each appears), indexed by
// (type, stage, micro-batch).
class ActionTable {
 public:
  ActionTable(int stages, int micro_batches)
      : stages_(stages),
        micro_batches_(micro_batches),
        counts_(static_cast<std::size_t>(kActionTypes) * stages * (micro_batches + 1), 0) {}

  int& at(ActionType type, int stage, int micro_batch) {
    const int column = micro_batch < 0 ? micro_batches_ : micro_batch;
    return counts_[(static_cast<std::size_t>(type) * stages_ + stage) * (micro_batches_ + 1) +
                   column];
  }
  bool done(ActionType type, int stage, int micro_batch) {
    return at(type, stage, micro_batch) > 0;
  }

 private:
  int stages_;
  int micro_batches_;
  std::vector<int> counts_;
};

class ScheduleRun {
 public:
  ScheduleRun(const PipelineSchedule& schedule, std::string source)
      : schedule_(schedule),
        source_(std::move(source)),
        stages_(schedule.num_stages()),
        last_stage_(stages_ - 1),
        m_(schedule.num_micro_batches),
        appearances_(stages_, m_),
        done_(stages_, m_),
        position_(schedule.ranks.size(), 0),
        in_flight_(schedule.ranks.size(), 0),
        peak_in_flight_(schedule.ranks.size(), 0) {}

  ScheduleStats run() {
    check_placement_and_count();
    check_completeness();
    execute();
    return {peak_in_flight_};
  }

 private:
  [[noreturn]] void fail(const std::string& reason) const {
    throw schemas::InputError(source_, "", reason);
  }

  void check_placement_and_count() {
    if (static_cast<int>(schedule_.ranks.size()) != schedule_.pp) {
      fail(fmt::format("{} rank rows for pp={}", schedule_.ranks.size(), schedule_.pp));
    }
    for (int rank = 0; rank < schedule_.pp; ++rank) {
      for (const Action& action : schedule_.ranks[rank]) {
        if (action.type == ActionType::optimizer_step) {
          ++steps_on_rank_[rank];
          continue;
        }
        if (action.stage < 0 || action.stage > last_stage_) {
          fail(fmt::format("rank {}: {}: stage {} does not exist (pp × vpp = {} stages)", rank,
                           to_string(action), action.stage, stages_));
        }
        if (schedule_.rank_of_stage(action.stage) != rank) {
          fail(fmt::format("rank {}: {}: stage {} runs on rank {} (stage mod pp), not rank {}",
                           rank, to_string(action), action.stage,
                           schedule_.rank_of_stage(action.stage), rank));
        }
        if (has_micro_batch(action.type) && (action.micro_batch < 0 || action.micro_batch >= m_)) {
          fail(fmt::format("rank {}: {}: micro-batch {} does not exist (there are {})", rank,
                           to_string(action), action.micro_batch, m_));
        }
        if (++appearances_.at(action.type, action.stage, action.micro_batch) > 1) {
          fail(fmt::format("rank {}: {} appears more than once", rank, to_string(action)));
        }
        has_communication_ =
            has_communication_ || (has_micro_batch(action.type) && !is_compute(action.type));
      }
    }
  }

  std::string missing(ActionType type, int stage, int micro_batch) {
    return fmt::format("rank {} has no {}", schedule_.rank_of_stage(stage),
                       to_string({type, stage, micro_batch}));
  }

  void check_completeness() {
    for (int stage = 0; stage < stages_; ++stage) {
      for (int mb = 0; mb < m_; ++mb) {
        if (!appearances_.at(ActionType::forward, stage, mb))
          fail(missing(ActionType::forward, stage, mb));
        const bool full = appearances_.at(ActionType::backward, stage, mb) > 0;
        const bool input = appearances_.at(ActionType::backward_input, stage, mb) > 0;
        const bool weight = appearances_.at(ActionType::backward_weight, stage, mb) > 0;
        if (full && (input || weight)) {
          fail(fmt::format("rank {} has both {} and a split backward of the same micro-batch",
                           schedule_.rank_of_stage(stage),
                           to_string({ActionType::backward, stage, mb})));
        }
        if (!full && !input) fail(missing(ActionType::backward, stage, mb));
        if (input != weight)
          fail(
              missing(input ? ActionType::backward_weight : ActionType::backward_input, stage, mb));
        if (!has_communication_) continue;
        if (stage > 0) {
          require_present(ActionType::recv_forward, stage, mb);
          require_present(ActionType::send_backward, stage, mb);
        }
        if (stage < last_stage_) {
          require_present(ActionType::send_forward, stage, mb);
          require_present(ActionType::recv_backward, stage, mb);
        }
      }
    }
    for (int rank = 0; rank < schedule_.pp; ++rank) {
      if (steps_on_rank_[rank] > 1) fail(fmt::format("rank {}: STEP appears more than once", rank));
    }
    // The tied-embedding all-reduce needs both of its ends.
    const bool first_end = appearances_.at(ActionType::tied_embedding_grad, 0, -1) > 0;
    const bool last_end = appearances_.at(ActionType::tied_embedding_grad, last_stage_, -1) > 0;
    if (first_end != last_end) {
      fail(missing(ActionType::tied_embedding_grad, first_end ? last_stage_ : 0, -1) +
           ", the other end of the tied-embedding all-reduce");
    }
  }

  void require_present(ActionType type, int stage, int mb) {
    if (!appearances_.at(type, stage, mb)) fail(missing(type, stage, mb));
  }

  // The action that `action` waits for, when it is not ready yet.
  std::optional<Action> blocker(int rank, const Action& action) {
    const int s = action.stage;
    const int mb = action.micro_batch;
    auto need = [&](ActionType type, int stage, int micro_batch) -> std::optional<Action> {
      if (done_.done(type, stage, micro_batch)) return std::nullopt;
      return Action{type, stage, micro_batch};
    };
    auto backward_of = [&](int stage, int micro_batch) {
      return appearances_.at(ActionType::backward, stage, micro_batch) ? ActionType::backward
                                                                       : ActionType::backward_input;
    };
    switch (action.type) {
      case ActionType::forward:
        if (s == 0) return std::nullopt;
        return has_communication_ ? need(ActionType::recv_forward, s, mb)
                                  : need(ActionType::forward, s - 1, mb);
      case ActionType::backward:
      case ActionType::backward_input:
        if (auto own = need(ActionType::forward, s, mb)) return own;
        if (s == last_stage_) return std::nullopt;
        return has_communication_ ? need(ActionType::recv_backward, s, mb)
                                  : need(backward_of(s + 1, mb), s + 1, mb);
      case ActionType::backward_weight:
        return need(ActionType::backward_input, s, mb);
      case ActionType::send_forward:
        return need(ActionType::forward, s, mb);
      case ActionType::recv_forward:
        return need(ActionType::send_forward, s - 1, mb);
      case ActionType::send_backward:
        return need(backward_of(s, mb), s, mb);
      case ActionType::recv_backward:
        return need(ActionType::send_backward, s + 1, mb);
      case ActionType::unshard:
        return std::nullopt;
      case ActionType::reduce_grad:
      case ActionType::reshard:
        for (int micro_batch = 0; micro_batch < m_; ++micro_batch) {
          const ActionType gradient = backward_of(s, micro_batch) == ActionType::backward
                                          ? ActionType::backward
                                          : ActionType::backward_weight;
          if (auto pending = need(gradient, s, micro_batch)) return pending;
        }
        return std::nullopt;
      case ActionType::tied_embedding_grad: {
        const int other_stage = s == 0 ? last_stage_ : 0;
        const Action partner{ActionType::tied_embedding_grad, other_stage, -1};
        if (!arrived(schedule_.rank_of_stage(other_stage), partner)) return partner;
        return std::nullopt;
      }
      case ActionType::optimizer_step:
        for (int other = 0; other < schedule_.pp; ++other) {
          if (other != rank && !arrived(other, action))
            return Action{ActionType::optimizer_step, -1, -1};
        }
        return std::nullopt;
    }
    return std::nullopt;
  }

  // Whether `rank` is at `action` or past it (the other side of a rendezvous).
  bool arrived(int rank, const Action& action) {
    const std::vector<Action>& actions = schedule_.ranks[rank];
    const auto found = std::find(actions.begin(), actions.end(), action);
    if (found == actions.end()) return true;  // not a participant: it never waits there
    return static_cast<std::size_t>(found - actions.begin()) <= position_[rank];
  }

  void execute() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int rank = 0; rank < schedule_.pp; ++rank) {
        const std::vector<Action>& actions = schedule_.ranks[rank];
        while (position_[rank] < actions.size()) {
          const Action& action = actions[position_[rank]];
          if (blocker(rank, action)) break;
          complete(rank, action);
          ++position_[rank];
          progress = true;
        }
      }
    }
    std::string waiting;
    for (int rank = 0; rank < schedule_.pp; ++rank) {
      const std::vector<Action>& actions = schedule_.ranks[rank];
      if (position_[rank] == actions.size()) continue;
      const Action& action = actions[position_[rank]];
      const std::optional<Action> cause = blocker(rank, action);
      waiting += fmt::format("{}rank {} waits at {} for {}", waiting.empty() ? "" : "; ", rank,
                             to_string(action), cause ? to_string(*cause) : "?");
    }
    if (!waiting.empty()) fail("deadlock: " + waiting);
  }

  void complete(int rank, const Action& action) {
    if (action.type != ActionType::optimizer_step)
      ++done_.at(action.type, action.stage, action.micro_batch);
    if (action.type == ActionType::forward) {
      peak_in_flight_[rank] = std::max(peak_in_flight_[rank], ++in_flight_[rank]);
    } else if (is_backward(action.type)) {
      --in_flight_[rank];
    }
  }

  const PipelineSchedule& schedule_;
  std::string source_;
  int stages_;
  int last_stage_;
  int m_;
  ActionTable appearances_;
  ActionTable done_;
  bool has_communication_ = false;
  std::vector<std::size_t> position_;
  std::vector<int> in_flight_;
  std::vector<int> peak_in_flight_;
  std::map<int, int> steps_on_rank_;
};

}  // namespace

ScheduleStats check_schedule(const PipelineSchedule& schedule, const std::string& source) {
  return ScheduleRun(schedule, source).run();
}

}  // namespace strata::schedule
