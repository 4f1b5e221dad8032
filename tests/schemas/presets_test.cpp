#include "strata/schemas/presets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "input_error_message.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::schemas {
namespace {

using ::testing::Contains;

std::string error_of(auto&& load) { return strata::testing::input_error_message(load); }

TEST(Presets, ListTheModelsAndClustersTheIssueNames) {
  const std::vector<std::string_view> models = model_preset_names();
  for (std::string_view name :
       {"gpt2-124m",   "gpt2-350m",    "gpt2-774m",     "gpt2-1.5b", "gpt3-1.7b",  "gpt3-3.6b",
        "gpt3-7.5b",   "gpt3-18b",     "gpt3-39b",      "gpt3-76b",  "gpt3-145b",  "gpt3-310b",
        "gpt3-530b",   "gpt3-1t",      "gpt3-175b",     "llama2-7b", "llama2-13b", "llama2-70b",
        "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "bloom-176b"}) {
    EXPECT_THAT(models, Contains(name));
  }
  const std::vector<std::string_view> clusters = cluster_preset_names();
  for (std::string_view name :
       {"dgx-a100-40gb", "dgx-a100-80gb", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72",
        "amd-mi300x", "amd-mi355x", "cpu-local"}) {
    EXPECT_THAT(clusters, Contains(name));
  }
}

TEST(Presets, EveryPresetRoundTripsAndItsNameMatchesItsFile) {
  for (std::string_view name : model_preset_names()) {
    const ModelConfig model = model_preset(name);
    EXPECT_EQ(model.name, name);
    EXPECT_EQ(parse_model(model_to_json(model), JsonLocation("again")), model) << name;
  }
  for (std::string_view name : cluster_preset_names()) {
    const ClusterConfig cluster = cluster_preset(name);
    EXPECT_EQ(cluster.name, name);
    EXPECT_EQ(parse_cluster(cluster_to_json(cluster), JsonLocation("again")), cluster) << name;
  }
}

TEST(Presets, NodeCountStretchesTheOutermostTier) {
  const ClusterConfig one = cluster_preset("dgx-h100");
  EXPECT_EQ(one.nodes, 1);
  const ClusterConfig many = cluster_preset("dgx-h100:128");
  EXPECT_EQ(many.nodes, 128);
  EXPECT_EQ(many.world_size(), 1024);
  EXPECT_EQ(many.network_tiers.front().scope_gpus, 8) << "NVLink stays one node wide";
  EXPECT_EQ(many.network_tiers.back().scope_gpus, 1024);
  EXPECT_EQ(cluster_preset("cpu-local:4").world_size(), 4);
}

TEST(Presets, PartOfEachNode) {
  // Two GPUs of one DGX A100: NVLink among the two at the same per-GPU bandwidth.
  const ClusterConfig pair = cluster_preset("dgx-a100-80gb:1x2");
  const ClusterConfig node = cluster_preset("dgx-a100-80gb");
  EXPECT_EQ(pair.nodes, 1);
  EXPECT_EQ(pair.gpus_per_node, 2);
  EXPECT_EQ(pair.world_size(), 2);
  EXPECT_EQ(pair.network_tiers.front().scope_gpus, 2);
  EXPECT_EQ(pair.network_tiers.front().bandwidth_gb_per_s,
            node.network_tiers.front().bandwidth_gb_per_s);
  // Four GPUs on each of four nodes: the fabric spans the four nodes' 16 GPUs.
  const ClusterConfig quarter = cluster_preset("dgx-h100:4x4");
  EXPECT_EQ(quarter.world_size(), 16);
  EXPECT_EQ(quarter.network_tiers.front().scope_gpus, 4);
  EXPECT_EQ(quarter.network_tiers.back().scope_gpus, 16);
  // A spec naming the whole node is the whole node.
  EXPECT_EQ(cluster_preset("dgx-h100:2x8"), cluster_preset("dgx-h100:2"));
  EXPECT_EQ(error_of([] { cluster_preset("dgx-h100:1x16"); }),
            "cluster preset: \"dgx-h100:1x16\": the GPUs per node after 'x' (a dgx-h100 node has "
            "8) must be an integer from 1 to 8");
  EXPECT_EQ(error_of([] { cluster_preset("dgx-h100:1x"); }),
            "cluster preset: \"dgx-h100:1x\": the GPUs per node after 'x' (a dgx-h100 node has "
            "8) must be an integer from 1 to 8");
}

TEST(Presets, UnknownNamesAndBadNodeCountsAreExplained) {
  EXPECT_EQ(error_of([] { model_preset("llama3-8b"); }),
            "model preset: no model preset named \"llama3-8b\"; did you mean \"llama3.1-8b\"?");
  EXPECT_EQ(error_of([] { cluster_preset("dgx-h100:0"); }),
            "cluster preset: \"dgx-h100:0\": the node count after ':' must be an integer from 1 to "
            "65536");
  EXPECT_EQ(error_of([] { cluster_preset("dgx-h100:two"); }),
            "cluster preset: \"dgx-h100:two\": the node count after ':' must be an integer from 1 "
            "to 65536");
  EXPECT_EQ(error_of([] { cluster_preset("dgx-b300"); }),
            "cluster preset: no cluster preset named \"dgx-b300\"; did you mean \"dgx-b200\"?");
}

}  // namespace
}  // namespace strata::schemas
