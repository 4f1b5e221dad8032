// `strata plan --strategies K`: K strong strategies for one phase that differ in their mesh —
// the fastest plan, then the fastest plan of each mesh (tp, cp, pp, dp, ep, etp) not yet taken —
// written as a plan set with the predicted switch between every ordered pair, so that a run can
// move between them by id (strata train --switch STEP:ID), as Hetu's multi-strategy graphs do.
// Plans that differ only in ZeRO stage, micro-batch or schedule are one strategy: switching
// between them would buy little that the fastest does not already have.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "strata/planner/plan_search.h"
#include "strata/schemas/plan_set.h"

namespace strata::planner {

// "tp2-pp2-dp2", "dp8-z1", "single": the plan's parallel axes above 1 and its ZeRO stage, an id
// for a plan set.
std::string layout_id(const schemas::Plan& plan);

// At most `count` of `ranked` (fastest first), each of a mesh none before it has.
std::vector<RankedPlan> diverse_strategies(const std::vector<RankedPlan>& ranked,
                                           std::size_t count);

// The strategies under their layout ids, no phases (the first throughout unless switched by
// hand), and the predicted switch between every ordered pair.
schemas::PlanSet strategy_set(const std::vector<RankedPlan>& strategies,
                              const std::string& description);

}  // namespace strata::planner
