// The parameter table against the cost models' independent count of every preset's parameters
// (costmodels/parameter_count.h, written from the models' papers and configs): the same total,
// dense and latent attention, query/key and embedding norms, routers with an expert bias and
// shared-expert gates alike; and each rank's slices, over every tp, ep and etp split a preset
// allows, adding up to the whole table.
#include "strata/layout/parameter_table.h"

#include <gtest/gtest.h>

#include <string>

#include "strata/costmodels/parameter_count.h"
#include "strata/layout/gradient_buckets.h"
#include "strata/schemas/presets.h"

namespace strata::layout {
namespace {

std::int64_t elements_of(const Shape& shape) {
  std::int64_t elements = 1;
  for (const std::int64_t extent : shape) elements *= extent;
  return elements;
}

TEST(ParameterTable, EveryPresetHoldsTheParametersTheCostModelsCount) {
  for (const std::string_view name : schemas::model_preset_names()) {
    const schemas::ModelConfig model = schemas::model_preset(std::string(name));
    std::int64_t total = 0, routed = 0;
    for (const ParameterSpec& spec : transformer_parameters(model)) {
      total += elements_of(spec.shape);
      if (spec.routed_expert()) routed += elements_of(spec.shape);
    }
    const costmodels::ParameterBreakdown counts = costmodels::count_parameters(model);
    EXPECT_EQ(total, counts.total()) << name;
    // The MTP modules' layers are of the last layer's kind (DeepSeek-V3's: MoE).
    const std::int64_t moe_layers =
        counts.num_moe_layers + (counts.mtp_layer_moe ? counts.num_mtp_modules : 0);
    EXPECT_EQ(routed, moe_layers * counts.routed_experts_per_moe_layer()) << name;
  }
}

// Every rank's held elements, summed over the ranks of one tp (or ep × etp) group, are the whole
// parameter — once for split tensors, `size` times for replicated ones.
TEST(ParameterTable, RankSlicesOfEverySplitAddUpToTheWholeTable) {
  for (const char* name : {"gpt-tiny", "llama-tiny", "moe-tiny", "llama3.1-8b", "mixtral-8x7b"}) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    const std::vector<ParameterSpec> specs = transformer_parameters(model);
    for (const std::int64_t tp : {1, 2, 4}) {
      for (const std::int64_t ep : {1, 2}) {
        std::vector<std::int64_t> summed(specs.size(), 0);
        for (std::int64_t tp_rank = 0; tp_rank < tp; ++tp_rank) {
          for (std::int64_t ep_rank = 0; ep_rank < ep; ++ep_rank) {
            const RankCoordinates rank{.tp_rank = tp_rank, .tp = tp, .ep_rank = ep_rank, .ep = ep};
            for (const HeldParameter& held : held_parameters(model, specs, rank)) {
              summed[held.spec] += held.elements;
            }
          }
        }
        for (std::size_t i = 0; i < specs.size(); ++i) {
          const std::int64_t whole = elements_of(specs[i].shape);
          const bool split_by_tp = specs[i].tensor_parallel.kind == PlacementKind::shard;
          // A replicated kv head is held by several tp ranks: at least the whole, never less.
          const std::int64_t copies = (specs[i].routed_expert() ? 1 : (split_by_tp ? 1 : tp)) *
                                      (specs[i].routed_expert() ? tp : ep);
          if (split_by_tp && model.num_kv_heads < tp) {
            EXPECT_GE(summed[i], whole * copies) << name << " " << specs[i].name;
          } else {
            EXPECT_EQ(summed[i], whole * copies)
                << name << " " << specs[i].name << " tp " << tp << " ep " << ep;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace strata::layout
