#include "strata/planner/strategy_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <set>
#include <tuple>

#include "strata/planner/switch_pricing.h"

namespace strata::planner {
namespace {

std::array<std::int64_t, 6> mesh_axes(const schemas::Plan& plan) {
  const schemas::Mesh& mesh = plan.mesh;
  return {mesh.tp, mesh.cp, mesh.pp, mesh.dp, mesh.ep, mesh.etp};
}

}  // namespace

std::string layout_id(const schemas::Plan& plan) {
  static constexpr std::array<const char*, 6> kNames{"tp", "cp", "pp", "dp", "ep", "etp"};
  const std::array<std::int64_t, 6> axes = mesh_axes(plan);
  std::string id;
  for (std::size_t axis = 0; axis < axes.size(); ++axis) {
    if (axes[axis] > 1)
      id += fmt::format("{}{}{}", id.empty() ? "" : "-", kNames[axis], axes[axis]);
  }
  if (id.empty()) id = "single";
  if (plan.zero_stage > 0) id += fmt::format("-z{}", plan.zero_stage);
  return id;
}

std::vector<RankedPlan> diverse_strategies(const std::vector<RankedPlan>& ranked,
                                           std::size_t count) {
  std::vector<RankedPlan> chosen;
  std::set<std::array<std::int64_t, 6>> meshes;
  for (const RankedPlan& plan : ranked) {
    if (chosen.size() == count) break;
    if (meshes.insert(mesh_axes(plan.plan)).second) chosen.push_back(plan);
  }
  return chosen;
}

schemas::PlanSet strategy_set(const std::vector<RankedPlan>& strategies,
                              const std::string& description) {
  schemas::PlanSet set;
  set.description = description;
  for (const RankedPlan& strategy : strategies) {
    set.plans.push_back({layout_id(strategy.plan), strategy.plan});
  }
  for (const schemas::PlanSetEntry& from : set.plans) {
    for (const schemas::PlanSetEntry& to : set.plans) {
      if (&from == &to) continue;
      set.switches.push_back(switch_cost(from.id, to.id, predict_switch(from.plan, to.plan)));
    }
  }
  return set;
}

}  // namespace strata::planner
