#include "strata/planner/plan_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>

#include "strata/planner/megatron_arguments.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/presets.h"

namespace strata::planner {
namespace {

SearchOptions options_for(std::int64_t global_batch, std::int64_t seq_length) {
  SearchOptions options;
  options.global_batch_size = global_batch;
  options.seq_length = seq_length;
  options.top_k = 5;
  return options;
}

std::vector<nlohmann::json> plans_of(const SearchResult& result) {
  std::vector<nlohmann::json> plans;
  for (const RankedPlan& ranked : result.best) plans.push_back(schemas::plan_to_json(ranked.plan));
  return plans;
}

// A tight case on 8 A100-40GB: GPT-3 7.5B at 2,048 tokens, where memory rules out many layouts.
// Simulating every candidate (no memory pruning, no bound) must give the same top 5: the pruning
// drops nothing feasible and the bound reorders nothing.
TEST(PlanSearch, PruningAndBoundKeepExactlyTheExhaustiveTopK) {
  const schemas::ModelConfig model = schemas::model_preset("gpt3-7.5b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-a100-40gb");
  SearchOptions options = options_for(16, 2048);
  options.schedules = {schemas::ScheduleType::one_f_one_b, schemas::ScheduleType::zb_h1,
                       schemas::ScheduleType::interleaved_one_f_one_b};
  const SearchResult pruned = search_plans(model, cluster, options);
  options.exhaustive = true;
  const SearchResult exhaustive = search_plans(model, cluster, options);
  ASSERT_EQ(pruned.best.size(), 5u);
  EXPECT_GT(pruned.statistics.pruned_by_model_states + pruned.statistics.pruned_by_activations, 0);
  EXPECT_LT(pruned.statistics.simulated, exhaustive.statistics.simulated / 4);
  ASSERT_EQ(exhaustive.best.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_DOUBLE_EQ(pruned.best[i].metrics.step_time_s, exhaustive.best[i].metrics.step_time_s)
        << "rank " << i;
    EXPECT_LE(pruned.best[i].lower_bound_s, pruned.best[i].metrics.step_time_s);
  }
}

// Llama 3.1 8B at 32K tokens on two DGX H100: its best layouts split the sequence (cp 4 · dp 4)
// and many layouts of one mesh (orders that keep the groups on the same tiers, interleavings,
// micro-batches) come close. The default top five are five different meshes, each the fastest of
// its layouts — the first five meshes in the order of every layout ranked on its own — with the
// others counted; simulating everything gives the same rows.
TEST(PlanSearch, RowsAreDistinctMeshesEachShownByItsFastestLayout) {
  const schemas::ModelConfig model = schemas::model_preset("llama3.1-8b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:2");
  SearchOptions options = options_for(32, 32768);
  options.all_variants = true;
  options.top_k = 400;
  const SearchResult every = search_plans(model, cluster, options);
  const auto sizes = [](const RankedPlan& ranked) {
    const schemas::Mesh& mesh = ranked.plan.mesh;
    return std::array<std::int64_t, 6>{mesh.tp, mesh.cp, mesh.pp, mesh.dp, mesh.ep, mesh.etp};
  };
  std::vector<const RankedPlan*> first_of_mesh;  // every's first (fastest) layout of each mesh
  for (const RankedPlan& ranked : every.best) {
    if (std::none_of(first_of_mesh.begin(), first_of_mesh.end(),
                     [&](const RankedPlan* seen) { return sizes(*seen) == sizes(ranked); })) {
      first_of_mesh.push_back(&ranked);
    }
  }
  ASSERT_GE(first_of_mesh.size(), 5u) << "the case needs five meshes among its 400 layouts";
  ASSERT_EQ(sizes(every.best[0]), sizes(every.best[1]))
      << "the case needs one mesh at the top twice";

  options.all_variants = false;
  options.top_k = 5;
  const SearchResult distinct = search_plans(model, cluster, options);
  ASSERT_EQ(distinct.best.size(), 5u);
  for (std::size_t i = 0; i < distinct.best.size(); ++i) {
    const RankedPlan& row = distinct.best[i];
    EXPECT_EQ(sizes(row), sizes(*first_of_mesh[i])) << "row " << i + 1;
    EXPECT_DOUBLE_EQ(row.metrics.step_time_s, first_of_mesh[i]->metrics.step_time_s)
        << "row " << i + 1 << " is its mesh's fastest layout";
    const std::int64_t listed =
        std::count_if(every.best.begin(), every.best.end(),
                      [&](const RankedPlan& ranked) { return sizes(ranked) == sizes(row); });
    EXPECT_GE(row.variants + 1, listed) << "row " << i + 1 << ": every listed layout counted";
  }
  EXPECT_GT(distinct.best[0].variants, 0);
  options.exhaustive = true;
  const SearchResult exhaustive = search_plans(model, cluster, options);
  EXPECT_EQ(plans_of(exhaustive), plans_of(distinct));
}

TEST(PlanSearch, SameAnswerOnOneThreadOrTwo) {
  const schemas::ModelConfig model = schemas::model_preset("gpt3-3.6b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:2");
  SearchOptions options = options_for(64, 2048);
  options.threads = 1;
  const SearchResult one = search_plans(model, cluster, options);
  options.threads = 2;
  const SearchResult two = search_plans(model, cluster, options);
  EXPECT_EQ(plans_of(one), plans_of(two));
  EXPECT_EQ(one.statistics.estimated, two.statistics.estimated);
  EXPECT_EQ(one.statistics.simulated, two.statistics.simulated);
}

// The strata framework's search space is what its executor admits (schemas/executor_admission.h):
// plans it does not run (here: fp8, which it does not train in) get none, and say why; another
// stack's plans of the same model are ranked, for simulation.
TEST(PlanSearch, TheStrataFrameworkRanksOnlyWhatItsExecutorRuns) {
  const schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100");
  SearchOptions fp8 = options_for(64, 1024);
  fp8.precision = schemas::Dtype::fp8;
  const SearchResult strata = search_plans(model, cluster, fp8);
  EXPECT_TRUE(strata.best.empty());
  EXPECT_TRUE(strata.executor_refuses_all);
  EXPECT_EQ(strata.statistics.pruned_by_executor,
            strata.statistics.enumerated - strata.statistics.pruned_by_rules);
  ASSERT_TRUE(strata.executor_refusal.has_value());
  EXPECT_EQ(strata.executor_refusal->json_path, "/precision");
  EXPECT_NE(strata.binding_constraint.find("/precision"), std::string::npos);

  SearchOptions megatron = fp8;
  megatron.framework = schemas::TrainingFramework::megatron_lm;
  const SearchResult other_stack = search_plans(model, cluster, megatron);
  EXPECT_FALSE(other_stack.best.empty());
  EXPECT_EQ(other_stack.statistics.pruned_by_executor, 0);
  EXPECT_FALSE(other_stack.executor_refusal.has_value());

  const SearchResult admitted =
      search_plans(schemas::model_preset("gpt2-124m"), cluster, options_for(64, 1024));
  EXPECT_FALSE(admitted.best.empty());
  EXPECT_EQ(admitted.statistics.pruned_by_executor, 0);
}

// How cp attention communicates is chosen per layout by what a layer takes with each: on a cluster
// whose point-to-point transfers are slow (its send_receive curve at 0.2 %: the ring's) the cp
// plans all-gather; on the preset, whose NVLink hides the ring behind the attention (all but the
// gradients' last hop, and the ring adds its partial sums), they do not.
TEST(PlanSearch, ContextParallelPlansAllGatherWhereTheRingWouldShow) {
  const schemas::ModelConfig model = schemas::model_preset("llama3.1-8b");
  SearchOptions options = options_for(16, 65536);
  options.top_k = 20;
  const auto cp_plans = [&](const schemas::ClusterConfig& cluster) {
    std::vector<schemas::Plan> plans;
    for (const RankedPlan& ranked : search_plans(model, cluster, options).best) {
      if (ranked.plan.mesh.cp > 1) plans.push_back(ranked.plan);
    }
    return plans;
  };
  const schemas::ClusterConfig preset = schemas::cluster_preset("dgx-h100:2");
  schemas::ClusterConfig slow_sends = preset;
  for (schemas::NetworkTier& tier : slow_sends.network_tiers) {
    tier.efficiency_by_collective[schemas::TierCollective::send_receive] = {{1, 0.002}};
  }
  const std::vector<schemas::Plan> gathering = cp_plans(slow_sends);
  ASSERT_FALSE(gathering.empty());
  for (const schemas::Plan& plan : gathering) {
    EXPECT_EQ(plan.cp_comm, schemas::ContextParallelComm::all_gather) << plan.mesh.cp;
  }
  const std::vector<schemas::Plan> ringing = cp_plans(preset);
  ASSERT_FALSE(ringing.empty());
  for (const schemas::Plan& plan : ringing) {
    EXPECT_EQ(plan.cp_comm, schemas::ContextParallelComm::ring) << plan.mesh.cp;
  }
}

// A small model on one node at a modest batch: replicate it, no model parallelism.
TEST(PlanSearch, Gpt2SmallOnOneNodeIsPureDataParallel) {
  const SearchResult result =
      search_plans(schemas::model_preset("gpt2-124m"), schemas::cluster_preset("dgx-h100"),
                   options_for(64, 1024));
  ASSERT_FALSE(result.best.empty());
  const schemas::Mesh& mesh = result.best.front().plan.mesh;
  EXPECT_EQ(mesh.tp * mesh.cp * mesh.pp, 1);
  EXPECT_EQ(mesh.dp, 8);
}

TEST(PlanSearch, NothingFitsNamesTheBindingConstraintAndTheNearest) {
  const SearchResult result = search_plans(
      schemas::model_preset("gpt3-1t"), schemas::cluster_preset("dgx-h100"), options_for(64, 2048));
  EXPECT_TRUE(result.best.empty());
  EXPECT_NE(result.binding_constraint.find("model states"), std::string::npos);
  ASSERT_FALSE(result.nearest.empty());
  EXPECT_GT(result.nearest.front().peak_bytes, result.nearest.front().capacity_bytes);
}

TEST(PlanSearch, EmittedPlansAreCompleteValidAndFit) {
  const SearchResult result =
      search_plans(schemas::model_preset("llama3.1-8b"), schemas::cluster_preset("dgx-h100:2"),
                   options_for(64, 8192));
  ASSERT_FALSE(result.best.empty());
  for (const RankedPlan& ranked : result.best) {
    EXPECT_NO_THROW(schemas::validate_plan(ranked.plan, schemas::JsonLocation("test")));
    ASSERT_TRUE(ranked.plan.predicted);
    for (const simulator::RankMemory& memory : ranked.memory) EXPECT_TRUE(memory.fits());
    EXPECT_FALSE(ranked.bottleneck.empty());
  }
  for (std::size_t i = 1; i < result.best.size(); ++i) {
    EXPECT_LE(result.best[i - 1].metrics.step_time_s, result.best[i].metrics.step_time_s);
  }
}

// Hybrid sharding is part of the search: on 4 nodes, ZeRO sharded within each node (and
// replicated across the 4) competes with sharding over all 32 ranks, its model state 4× larger.
TEST(PlanSearch, HybridShardingWithinANodeIsSearched) {
  SearchOptions options = options_for(32, 8192);
  options.top_k = 20;
  const SearchResult result = search_plans(schemas::model_preset("llama3.1-8b"),
                                           schemas::cluster_preset("dgx-h100:4"), options);
  std::size_t hybrid = 0;
  for (const RankedPlan& ranked : result.best) {
    const schemas::Mesh& mesh = ranked.plan.mesh;
    if (mesh.zero_replicas() == 1) continue;
    ++hybrid;
    EXPECT_GE(ranked.plan.zero_stage, 1);
    // A shard group is one node: tp · cp · dp_shard = 8 consecutive ranks.
    EXPECT_EQ(mesh.tp * mesh.cp * mesh.zero_shard_dp(), 8);
    EXPECT_NO_THROW(schemas::validate_plan(ranked.plan, schemas::JsonLocation("best")));
  }
  EXPECT_GT(hybrid, 0u);
}

// A mixture of experts searches the expert mesh too. With every layer a MoE layer (Qwen3-30B-A3B)
// the layers are identical, so the pruning and the bound stay exact: simulating every candidate
// gives the same top answers.
TEST(PlanSearch, ExpertMeshPruningAndBoundKeepTheExhaustiveTopK) {
  const schemas::ModelConfig model = schemas::model_preset("qwen3-30b-a3b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100");
  SearchOptions options = options_for(16, 2048);
  options.framework = schemas::TrainingFramework::megatron_lm;
  options.schedules = {schemas::ScheduleType::one_f_one_b};
  options.top_k = 3;
  const SearchResult pruned = search_plans(model, cluster, options);
  ASSERT_EQ(pruned.best.size(), 3u) << pruned.binding_constraint;
  options.exhaustive = true;
  const SearchResult exhaustive = search_plans(model, cluster, options);
  EXPECT_EQ(plans_of(pruned), plans_of(exhaustive));
  EXPECT_LT(pruned.statistics.simulated, exhaustive.statistics.simulated);
  for (const RankedPlan& ranked : pruned.best) {
    EXPECT_NO_THROW(schemas::validate_plan(ranked.plan, schemas::JsonLocation("planned")));
    EXPECT_LE(peak_memory_bytes(ranked), ranked.memory.front().capacity_bytes);
    // Whole experts on every rank need ZeRO-3's gathers of 30.5 B parameters each step; splitting
    // the 128 experts over the node (ep 8) is faster, so every answer comes from the expert mesh.
    EXPECT_GT(ranked.plan.mesh.ep, 1);
  }
}

// Mixtral 8×7B: on one DGX H100 its 46.7 B parameters' Adam states (16 bytes each, 747 GB) exceed
// the 8 GPUs, and the search names that; on two, plans fit by simulation with the expert mesh
// within the rules. For the strata framework, the plans are the ones its executor runs.
TEST(PlanSearch, MixtralNeedsTwoNodesAndFitsWithItsExpertsSplit) {
  const schemas::ModelConfig model = schemas::model_preset("mixtral-8x7b");
  SearchOptions options = options_for(64, 4096);
  options.framework = schemas::TrainingFramework::megatron_lm;
  const SearchResult one_node = search_plans(model, schemas::cluster_preset("dgx-h100"), options);
  EXPECT_TRUE(one_node.best.empty());
  EXPECT_NE(one_node.binding_constraint.find("memory for model states"), std::string::npos)
      << one_node.binding_constraint;
  const SearchResult result = search_plans(model, schemas::cluster_preset("dgx-h100:2"), options);
  ASSERT_FALSE(result.best.empty()) << result.binding_constraint;
  bool experts_split = false;
  for (const RankedPlan& ranked : result.best) {
    const schemas::Mesh& mesh = ranked.plan.mesh;
    EXPECT_EQ(8 % mesh.ep, 0);
    EXPECT_EQ(mesh.tp * mesh.cp * mesh.dp % (mesh.ep * mesh.etp), 0);
    EXPECT_TRUE(mesh.tp == 1 || ranked.plan.sequence_parallel);
    EXPECT_LE(peak_memory_bytes(ranked), ranked.memory.front().capacity_bytes);
    experts_split = experts_split || mesh.ep > 1;
  }
  EXPECT_TRUE(experts_split);
  // Strata's executor runs MoE layers on every mesh: its plans are the ones it admits.
  options.framework = schemas::TrainingFramework::strata;
  const SearchResult strata = search_plans(model, schemas::cluster_preset("dgx-h100:2"), options);
  ASSERT_FALSE(strata.best.empty()) << strata.binding_constraint;
  for (const RankedPlan& ranked : strata.best) {
    const schemas::Mesh& mesh = ranked.plan.mesh;
    EXPECT_TRUE(mesh.tp == 1 || ranked.plan.sequence_parallel);
    EXPECT_FALSE(schemas::executor_refusal(ranked.plan).has_value());
  }
}

// Where the stack can (Megatron-Core's combined 1F1B), the expert all-to-alls of an interleaved
// pipeline run beside another micro-batch's compute; the plans say so and stay valid. A stack
// without it (DeepSpeed) gets plans with the all-to-alls on the critical path, predicted slower.
TEST(PlanSearch, ExpertAllToAllsOverlapWhereTheStackCan) {
  const schemas::ModelConfig model = schemas::model_preset("qwen3-30b-a3b");
  const schemas::ClusterConfig cluster = schemas::cluster_preset("dgx-h100:2");
  SearchOptions options = options_for(512, 4096);
  options.schedules = {schemas::ScheduleType::one_f_one_b,
                       schemas::ScheduleType::interleaved_one_f_one_b};
  options.top_k = 3;
  options.framework = schemas::TrainingFramework::megatron_lm;
  const SearchResult megatron = search_plans(model, cluster, options);
  ASSERT_FALSE(megatron.best.empty()) << megatron.binding_constraint;
  for (const RankedPlan& ranked : megatron.best) {
    const schemas::Plan& plan = ranked.plan;
    EXPECT_NO_THROW(schemas::validate_plan(plan, schemas::JsonLocation("planned")));
    EXPECT_EQ(plan.ep_comm_overlap,
              plan.mesh.ep * plan.mesh.etp > 1 && plan.mesh.pp > 1 && plan.mesh.vpp > 1 &&
                  plan.recompute.granularity != schemas::RecomputeGranularity::full);
  }
  EXPECT_TRUE(megatron.best.front().plan.ep_comm_overlap);
  options.framework = schemas::TrainingFramework::deepspeed;
  const SearchResult deepspeed = search_plans(model, cluster, options);
  ASSERT_FALSE(deepspeed.best.empty()) << deepspeed.binding_constraint;
  for (const RankedPlan& ranked : deepspeed.best) EXPECT_FALSE(ranked.plan.ep_comm_overlap);
}

TEST(MegatronArguments, UnevenSplitsAndOptimizerFlags) {
  schemas::Plan plan;
  plan.model = schemas::model_preset("llama3.1-8b");
  plan.cluster = schemas::cluster_preset("dgx-h100:2");
  plan.mesh = {.tp = 4, .cp = 1, .dp = 1, .pp = 4, .vpp = 1};
  plan.batch = {8192, 1, 64, 64};
  plan.sequence_parallel = true;
  plan.zero_stage = 1;
  plan.recompute = {schemas::RecomputeGranularity::full, {2, 1, 0, 0}, {}};
  plan.stages = {
      {0, 9, true, false}, {9, 8, false, false}, {17, 8, false, false}, {25, 7, false, true}};
  const std::string flags = megatron_arguments(plan);
  EXPECT_NE(flags.find("--tensor-model-parallel-size 4 \\\n"), std::string::npos);
  EXPECT_NE(flags.find("--decoder-first-pipeline-num-layers 9"), std::string::npos);
  EXPECT_NE(flags.find("--decoder-last-pipeline-num-layers 7"), std::string::npos);
  EXPECT_NE(flags.find("--use-distributed-optimizer"), std::string::npos);
  EXPECT_NE(flags.find("--sequence-parallel"), std::string::npos);
  EXPECT_NE(flags.find("--recompute-num-layers 2"), std::string::npos);
  EXPECT_NE(flags.find("--group-query-attention"), std::string::npos);
  EXPECT_EQ(flags.back(), '\n');
  // dp = 1 has no gradients to reduce; with dp > 1 the plan's overlap choice becomes flags.
  EXPECT_EQ(flags.find("--overlap-grad-reduce"), std::string::npos);
  plan.mesh.dp = 2;
  EXPECT_NE(megatron_arguments(plan).find("--overlap-grad-reduce"), std::string::npos);
  EXPECT_NE(megatron_arguments(plan).find("--overlap-param-gather"), std::string::npos);
  plan.overlap_grad_reduce = false;
  EXPECT_EQ(megatron_arguments(plan).find("--overlap-"), std::string::npos);
  // bf16 gradients are Megatron-LM's --grad-reduce-in-bf16; its bf16 default (fp32) needs no flag.
  EXPECT_EQ(megatron_arguments(plan).find("--grad-reduce-in-bf16"), std::string::npos);
  plan.precision = schemas::Dtype::bf16;
  plan.gradient_dtype = schemas::Dtype::bf16;
  EXPECT_NE(megatron_arguments(plan).find("--grad-reduce-in-bf16"), std::string::npos);
  plan.gradient_dtype = std::nullopt;
  // Selective recomputation names its modules only when the plan does (Megatron's default).
  plan.recompute = {schemas::RecomputeGranularity::selective, {}, {}};
  EXPECT_NE(megatron_arguments(plan).find("--recompute-granularity selective"), std::string::npos);
  EXPECT_EQ(megatron_arguments(plan).find("--recompute-modules"), std::string::npos);
  plan.recompute.modules = {schemas::RecomputeModule::core_attn, schemas::RecomputeModule::mlp};
  EXPECT_NE(megatron_arguments(plan).find("--recompute-modules core_attn mlp"), std::string::npos);
  // CUDA graphs: Transformer Engine's per-layer scopes, or Megatron-Core's whole iteration.
  EXPECT_EQ(megatron_arguments(plan).find("--cuda-graph"), std::string::npos);
  plan.cuda_graph_scope = {schemas::CudaGraphScope::attn, schemas::CudaGraphScope::mlp};
  EXPECT_NE(megatron_arguments(plan).find("--cuda-graph-impl transformer_engine"),
            std::string::npos);
  EXPECT_NE(megatron_arguments(plan).find("--cuda-graph-scope attn mlp"), std::string::npos);
  plan.cuda_graph_scope = {schemas::CudaGraphScope::full_iteration};
  EXPECT_NE(megatron_arguments(plan).find("--cuda-graph-impl local"), std::string::npos);
  plan.cuda_graph_scope.clear();
  plan.mesh.dp = 1;
  plan.stages = {
      {0, 0, true, false}, {0, 11, false, false}, {11, 11, false, false}, {22, 10, false, true}};
  plan.recompute = {};
  EXPECT_NE(megatron_arguments(plan).find("--pipeline-model-parallel-layout \"E|t*11|t*11|t*10L\""),
            std::string::npos);
}

// Context parallelism exports its size and how its attention communicates (--cp-comm-type).
TEST(MegatronArguments, ContextParallelCommunicationIsCpCommType) {
  schemas::Plan plan;
  plan.model = schemas::model_preset("llama3.1-8b");
  plan.cluster = schemas::cluster_preset("dgx-h100");
  plan.mesh = {.tp = 1, .cp = 4, .dp = 2, .pp = 1};
  plan.batch = {8192, 1, 2, 1};
  plan.stages = schemas::even_pipeline_stages(32, 1);
  EXPECT_NE(megatron_arguments(plan).find("--context-parallel-size 4"), std::string::npos);
  EXPECT_NE(megatron_arguments(plan).find("--cp-comm-type p2p"), std::string::npos);
  plan.cp_comm = schemas::ContextParallelComm::all_gather;
  EXPECT_NE(megatron_arguments(plan).find("--cp-comm-type allgather"), std::string::npos);
  plan.mesh = {.tp = 1, .cp = 1, .dp = 8, .pp = 1};
  plan.cp_comm = schemas::ContextParallelComm::ring;
  EXPECT_EQ(megatron_arguments(plan).find("--cp-comm-type"), std::string::npos);
}

// A mixture of experts exports its experts, router, dense-layer pattern and expert mesh; latent
// attention its ranks and head widths. DeepSeek-V3: 3 dense layers, then 58 MoE layers.
TEST(MegatronArguments, MixtureOfExpertsAndLatentAttentionFlags) {
  schemas::Plan plan;
  plan.model = schemas::model_preset("deepseek-v3");
  plan.cluster = schemas::cluster_preset("dgx-h100:8");
  plan.mesh = {.tp = 2, .cp = 1, .dp = 4, .pp = 8, .ep = 8};
  plan.batch = {4096, 1, 64, 16};
  plan.sequence_parallel = true;
  plan.ep_comm_overlap = true;
  plan.stages = schemas::even_pipeline_stages(61, 8);
  const std::string flags = megatron_arguments(plan);
  for (const char* expected : {"--num-experts 256",
                               "--moe-router-topk 8",
                               "--moe-ffn-hidden-size 2048",
                               "--moe-shared-expert-intermediate-size 2048",
                               "--moe-layer-freq \"([0]*3+[1]*58)\"",
                               "--moe-router-score-function sigmoid",
                               "--moe-router-enable-expert-bias",
                               "--moe-router-num-groups 8",
                               "--moe-router-group-topk 4",
                               "--moe-router-topk-scaling-factor 2.5",
                               "--expert-model-parallel-size 8",
                               "--expert-tensor-parallel-size 1",
                               "--moe-grouped-gemm",
                               "--moe-token-dispatcher-type alltoall",
                               "--overlap-moe-expert-parallel-comm",
                               "--multi-latent-attention",
                               "--q-lora-rank 1536",
                               "--kv-lora-rank 512",
                               "--qk-head-dim 128",
                               "--qk-pos-emb-head-dim 64",
                               "--v-head-dim 128",
                               "--mtp-num-layers 1",
                               "--mtp-loss-scaling-factor 0.1"}) {
    EXPECT_NE(flags.find(expected), std::string::npos) << expected;
  }
  // Mixtral: every layer a MoE layer, Megatron's default pattern.
  plan.model = schemas::model_preset("mixtral-8x7b");
  plan.stages = schemas::even_pipeline_stages(32, 8);
  EXPECT_EQ(megatron_arguments(plan).find("--moe-layer-freq"), std::string::npos);
  EXPECT_EQ(megatron_arguments(plan).find("--multi-latent-attention"), std::string::npos);
  EXPECT_EQ(megatron_arguments(plan).find("--window-size"), std::string::npos);
  EXPECT_EQ(megatron_arguments(plan).find("--mtp-num-layers"), std::string::npos);
  // GPT-OSS: windows of 128 keys (Megatron's left 127) with every 2nd layer full, learnable sinks,
  // the clamped quick-GELU unit.
  plan.model = schemas::model_preset("gpt-oss-120b");
  plan.stages = schemas::even_pipeline_stages(36, 8);
  const std::string gpt_oss = megatron_arguments(plan);
  for (const char* expected :
       {"--window-size 127,0", "--window-attn-skip-freq 2", "--softmax-type learnable",
        "--quick-geglu", "--activation-func-clamp-value 7", "--glu-linear-offset 1.0"}) {
    EXPECT_NE(gpt_oss.find(expected), std::string::npos) << expected;
  }
  EXPECT_EQ(gpt_oss.find("--swiglu"), std::string::npos);
}

// Hybrid sharding exports as Megatron's distributed-optimizer instances; its FSDP2 path has no
// hybrid form, so a hybrid ZeRO-3 plan is refused rather than exported as full sharding.
TEST(MegatronArguments, HybridShardingIsDistributedOptimizerInstances) {
  schemas::Plan plan;
  plan.model = schemas::model_preset("llama3.1-8b");
  plan.cluster = schemas::cluster_preset("dgx-h100:4");
  plan.mesh = {.tp = 2, .cp = 1, .dp = 16, .pp = 1, .dp_shard = 4};
  plan.batch = {8192, 1, 64, 4};
  plan.stages = schemas::even_pipeline_stages(32, 1);
  plan.zero_stage = 1;
  EXPECT_NE(megatron_arguments(plan).find("--num-distributed-optimizer-instances 4"),
            std::string::npos);
  plan.zero_stage = 3;
  EXPECT_THROW(megatron_arguments(plan), schemas::InputError);
  plan.mesh.dp_shard = 0;
  EXPECT_EQ(megatron_arguments(plan).find("--num-distributed-optimizer-instances"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::planner
