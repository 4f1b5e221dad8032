// The search's evaluator: builds a candidate into a working plan with its best layer split,
// judging it by the plan rules, the executor's admission and lower bounds on its memory, and
// bounds its step from below. One per thread; it caches what candidates share — the layer costs
// of each distinct layer context and the placement of each distinct mesh.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "candidate.h"
#include "strata/costmodels/activation_memory.h"
#include "strata/costmodels/layer_costs.h"
#include "strata/costmodels/mesh_placement.h"
#include "strata/costmodels/model_state_memory.h"
#include "strata/costmodels/parameter_count.h"
#include "strata/costmodels/plan_costs.h"
#include "strata/planner/layer_split.h"
#include "strata/schemas/executor_admission.h"

namespace strata::planner::search {

class Evaluator {
 public:
  Evaluator(const schemas::ModelConfig& model, const schemas::ClusterConfig& cluster,
            const SearchOptions& options, const std::vector<MeshOrder>& orders, double capacity);

  // Sets the working plan to `knobs` with its best layer split. `peak_bytes` gets the memory
  // lower bound of the fullest rank when memory is what fails.
  Verdict build(const Knobs& knobs, double* peak_bytes);

  // A lower bound on the simulated step (see the header): every rank waits for its first input and
  // then computes all its passes one after another; 1F1B and GPipe also wait for the last
  // micro-batch's gradient to walk back to the first stage; TIED_GRAD and STEP come after.
  double lower_bound(const costmodels::PlanCosts& costs) const;

  schemas::Plan& plan() { return plan_; }

  // Where the working plan's groups sit on the network (set by build()).
  const costmodels::MeshPlacement& placement() const { return *placement_; }

  // Why the last candidate build() gave Verdict::executor was refused.
  const std::optional<schemas::ExecutorRefusal>& refusal() const { return refusal_; }

  // The working plan's layer costs, from the cache filled by build().
  const costmodels::LayerCostSet& current_layer_costs() const { return *current_; }

  // How cp attention communicates is the planner's to choose (schemas/plan.h): the all-gather
  // variant where a layer takes less with it — what it exposes against what the ring cannot hide
  // behind the attention, and the ring's extra additions of partial sums. A tie keeps the ring,
  // which holds 5 blocks of keys and values where the gather holds 2·cp + 2. Memory does not
  // enter the choice: a layout whose gather would not fit while its ring would is judged by the
  // gather (rare: the gap is a few K/V blocks of one layer).
  void choose_cp_comm(costmodels::LayerContext& context);

  // Layer costs depend only on the context (tp, cp, sequence parallelism, micro-batch,
  // recompute, and where the tp and cp groups sit on the network): computed once per distinct
  // context and reused by every candidate that shares it.
  const costmodels::LayerCostSet& layer_costs(const costmodels::LayerContext& context);

  void use_even_split();

 private:
  // Model-state bytes per layer, with the embedding and with the LM head, of a rank of the
  // working plan (see build()).
  struct StateBytes {
    double layer = 0, embedding = 0, head = 0, total = 0;
  };
  StateBytes state_bytes(const Knobs& knobs, const costmodels::LayerContext& context) const;
  // The layer split of a pipeline without interleaving: the fastest that fits.
  Verdict split_layers(const Knobs& knobs, const StateBytes& states,
                       const costmodels::PassCosts& layer,
                       const costmodels::LayerActivationBytes& activations,
                       const costmodels::LayerCostSet& costs, double* peak_bytes);
  // The even split of an interleaved pipeline, if its fullest rank fits.
  Verdict split_interleaved(const Knobs& knobs, const StateBytes& states,
                            const costmodels::LayerActivationBytes& activations,
                            double* peak_bytes);
  // Full recomputation of only as many layers per stage as memory needs: the rest keep their
  // activations and skip the extra forward. False when no layer needs it.
  bool fewest_recomputed_layers(const Knobs& knobs, const std::vector<StageShape>& shapes,
                                double state_per_layer, std::int64_t m);
  // One placement per distinct mesh (sizes, order, hybrid shards, expert mesh): what every
  // candidate of that mesh reads.
  const costmodels::MeshPlacement& placement_of(const Knobs& knobs);

  const std::vector<MeshOrder>& orders_;
  double capacity_;
  costmodels::ParameterBreakdown counts_;
  // What the model states are kept in (costmodels::model_state_dtypes).
  costmodels::ModelStateDtypes states_;
  std::optional<schemas::ExecutorRefusal> refusal_;  // the last Verdict::executor's reason
  schemas::Plan plan_;
  std::map<std::tuple<std::int32_t, std::int32_t, std::int32_t, std::int32_t, std::int16_t,
                      std::int32_t, std::int32_t, std::int32_t>,
           costmodels::MeshPlacement>
      placements_;
  const costmodels::MeshPlacement* placement_ = nullptr;
  // Layer costs by costmodels::layer_cost_key of their context (references stay valid as it
  // grows).
  std::unordered_map<costmodels::LayerContext, costmodels::LayerCostSet,
                     costmodels::LayerCostKeyHash>
      cache_;
  const costmodels::LayerCostSet* current_ = nullptr;
  // The layers the split balances (the MoE layers' of a mixture of experts), set by build().
  const costmodels::LayerActivationBytes* plain_activations_ = nullptr;
  const costmodels::LayerActivationBytes* recomputed_activations_ = nullptr;
  // A layer whose parameters stand for every layer's in the memory bounds: the first MoE layer of
  // a mixture of experts, else the first.
  std::int64_t representative_layer_ = 0;
};

}  // namespace strata::planner::search
