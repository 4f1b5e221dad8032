// `strata plan --phases` (and the Python module's plan_phases): one plan per phase of a run (phases
// by step count, global batch and sequence length), chosen together so that the run's predicted
// time — every phase's steps at its plan's predicted step time, plus each switch's predicted
// transfer between consecutive phases' layouts — is least. A phase's fastest plan is not always the
// one to take: a slightly slower plan that keeps the previous phase's layout can save a transfer
// longer than the steps it loses.
//
// Each phase offers the `top_k` fastest plans its search ranks; the choice over phases is exact
// over those candidates (dynamic programming on phase boundaries: the cost of a phase's candidate
// depends only on the previous phase's choice).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "strata/planner/plan_search.h"
#include "strata/planner/switch_pricing.h"
#include "strata/schemas/plan_set.h"
#include "strata/schemas/training_phases.h"

namespace strata::planner {

struct PlannedPhase {
  schemas::TrainingPhase phase;
  std::int64_t first_step = 0;
  RankedPlan chosen;
  std::size_t candidate = 0;   // 0: the phase's fastest plan
  std::size_t candidates = 0;  // how many the search offered
  double steps_seconds = 0;    // phase.steps × the chosen plan's step time
  // The transfer from the previous phase's layout; absent for the first phase.
  std::optional<SwitchPrediction> switch_in;
};

struct PhasedPlan {
  std::vector<PlannedPhase> phases;
  double total_seconds = 0;   // steps and switches
  double switch_seconds = 0;  // of which switches
  // The run's time had every phase taken its own fastest plan, switches included.
  double each_fastest_seconds = 0;
  // Plans under the phases' names, the phases from their first steps, the predicted switch
  // between each pair of consecutive phases, total_steps.
  schemas::PlanSet set;
};

// The candidate of each phase (an index into phase_seconds[p], each non-empty) that makes
// Σ phase_seconds[p][c_p] + Σ switch_seconds(p, c_{p-1}, c_p) least, p > 0 in the second sum;
// ties go to the earlier candidates. Exact: the cost of a phase's candidate depends only on the
// previous phase's, so the least time to the end of each phase with each candidate suffices.
std::vector<std::size_t> least_time_choice(
    const std::vector<std::vector<double>>& phase_seconds,
    const std::function<double(std::size_t phase, std::size_t from, std::size_t to)>&
        switch_seconds);

// Plans `phases` (read from `source`, named in errors) for `model` on `cluster`; `search` gives
// everything but the batch and sequence, which each phase sets. A phase whose sequence is longer
// than the model's, or for which no plan fits or runs, throws schemas::InputError naming it.
// `progress`, if given, is called with (switches priced, pairs of candidates to price) as each
// pair of consecutive phases' candidates is priced: a large world's switch takes seconds.
PhasedPlan plan_phases(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
                       const schemas::TrainingPhases& phases, const std::string& source,
                       const SearchOptions& search,
                       const std::function<void(std::size_t, std::size_t)>& progress = {});

}  // namespace strata::planner
