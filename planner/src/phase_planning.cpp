#include "strata/planner/phase_planning.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <utility>

#include "strata/layout/state_layout.h"
#include "strata/schemas/input_error.h"

namespace strata::planner {
namespace {

// Switches priced once per pair of placements: the transfer depends only on where each element
// lives (the checkpoint layout block), not on the batch or sequence a phase trains with.
class SwitchPrices {
 public:
  const SwitchPrediction& between(const schemas::Plan& from, const schemas::Plan& to) {
    std::pair<std::string, std::string> key{layout::to_json(layout::state_layout_of(from)).dump(),
                                            layout::to_json(layout::state_layout_of(to)).dump()};
    auto found = prices_.find(key);
    if (found == prices_.end()) {
      found = prices_.emplace(std::move(key), predict_switch(from, to)).first;
    }
    return found->second;
  }

 private:
  std::map<std::pair<std::string, std::string>, SwitchPrediction> prices_;
};

}  // namespace

std::vector<std::size_t> least_time_choice(
    const std::vector<std::vector<double>>& phase_seconds,
    const std::function<double(std::size_t phase, std::size_t from, std::size_t to)>&
        switch_seconds) {
  // best[p][c]: the least time to the end of phase p with candidate c in it; from[p][c]: the
  // previous phase's candidate on that path.
  const std::size_t phases = phase_seconds.size();
  std::vector<std::vector<double>> best(phases);
  std::vector<std::vector<std::size_t>> from(phases);
  for (std::size_t p = 0; p < phases; ++p) {
    best[p].assign(phase_seconds[p].size(), std::numeric_limits<double>::infinity());
    from[p].assign(phase_seconds[p].size(), 0);
    for (std::size_t c = 0; c < phase_seconds[p].size(); ++c) {
      if (p == 0) {
        best[p][c] = phase_seconds[p][c];
        continue;
      }
      for (std::size_t b = 0; b < phase_seconds[p - 1].size(); ++b) {
        const double time = best[p - 1][b] + switch_seconds(p, b, c) + phase_seconds[p][c];
        if (time < best[p][c]) {
          best[p][c] = time;
          from[p][c] = b;
        }
      }
    }
  }
  std::vector<std::size_t> chosen(phases, 0);
  if (phases == 0) return chosen;
  for (std::size_t c = 1; c < best.back().size(); ++c) {
    if (best.back()[c] < best.back()[chosen.back()]) chosen.back() = c;
  }
  for (std::size_t p = phases - 1; p > 0; --p) chosen[p - 1] = from[p][chosen[p]];
  return chosen;
}

PhasedPlan plan_phases(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                       const schemas::TrainingPhases& phases, const std::string& source,
                       const SearchOptions& search,
                       const std::function<void(std::size_t, std::size_t)>& progress) {
  // Each phase's candidates, fastest first.
  std::vector<std::vector<RankedPlan>> candidates;
  for (std::size_t p = 0; p < phases.phases.size(); ++p) {
    const schemas::TrainingPhase& phase = phases.phases[p];
    const std::string where = fmt::format("/phases/{}", p);
    if (phase.seq_length > model.max_seq_length) {
      throw schemas::InputError(source, where + "/seq_length",
                                fmt::format("{} is more than {}'s max_seq_length={}",
                                            phase.seq_length, model.name, model.max_seq_length));
    }
    SearchOptions phase_search = search;
    phase_search.global_batch_size = phase.global_batch_size;
    phase_search.seq_length = phase.seq_length;
    const SearchResult result = search_plans(model, cluster, phase_search);
    if (result.best.empty()) {
      throw schemas::InputError(
          source, where,
          fmt::format("phase \"{}\" ({} × {} tokens): no plan {}: {}", phase.name,
                      phase.global_batch_size, phase.seq_length,
                      result.executor_refuses_all ? "runs" : "fits", result.binding_constraint));
    }
    candidates.push_back(result.best);
  }

  SwitchPrices prices;
  const auto steps_seconds = [&](std::size_t p, std::size_t c) {
    return static_cast<double>(phases.phases[p].steps) * candidates[p][c].metrics.step_time_s;
  };
  std::vector<std::vector<double>> phase_seconds(candidates.size());
  std::size_t pairs = 0, priced = 0;
  for (std::size_t p = 0; p < candidates.size(); ++p) {
    for (std::size_t c = 0; c < candidates[p].size(); ++c) {
      phase_seconds[p].push_back(steps_seconds(p, c));
    }
    if (p > 0) pairs += candidates[p - 1].size() * candidates[p].size();
  }
  const std::vector<std::size_t> chosen =
      least_time_choice(phase_seconds, [&](std::size_t p, std::size_t b, std::size_t c) {
        const double seconds =
            prices.between(candidates[p - 1][b].plan, candidates[p][c].plan).seconds;
        if (progress) progress(++priced, pairs);
        return seconds;
      });

  PhasedPlan planned;
  std::int64_t first_step = 0;
  for (std::size_t p = 0; p < candidates.size(); ++p) {
    PlannedPhase phase{phases.phases[p], first_step,           candidates[p][chosen[p]],
                       chosen[p],        candidates[p].size(), steps_seconds(p, chosen[p]),
                       std::nullopt};
    planned.total_seconds += phase.steps_seconds;
    planned.each_fastest_seconds += steps_seconds(p, 0);
    if (p > 0) {
      phase.switch_in = prices.between(candidates[p - 1][chosen[p - 1]].plan, phase.chosen.plan);
      planned.switch_seconds += phase.switch_in->seconds;
      planned.total_seconds += phase.switch_in->seconds;
      planned.each_fastest_seconds +=
          prices.between(candidates[p - 1][0].plan, candidates[p][0].plan).seconds;
    }
    first_step += phase.phase.steps;
    planned.phases.push_back(std::move(phase));
  }

  schemas::PlanSet& set = planned.set;
  set.description = fmt::format(
      "{} on {} × {}: {} phases planned by strata plan --phases {}; predicted {:.6g} s "
      "({:.6g} s of switches)",
      model.name, cluster.world_size(), cluster.gpu.name, planned.phases.size(), source,
      planned.total_seconds, planned.switch_seconds);
  for (std::size_t p = 0; p < planned.phases.size(); ++p) {
    const PlannedPhase& phase = planned.phases[p];
    set.plans.push_back({phase.phase.name, phase.chosen.plan});
    set.phases.push_back({phase.first_step, phase.phase.name});
    if (phase.switch_in) {
      set.switches.push_back(
          switch_cost(planned.phases[p - 1].phase.name, phase.phase.name, *phase.switch_in));
    }
  }
  set.total_steps = first_step;
  return planned;
}

}  // namespace strata::planner
