#include "strata/schemas/plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "fixture_paths.h"
#include "input_error_message.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/presets.h"

namespace strata::schemas {
namespace {

using strata::testing::fixture;

using ::testing::HasSubstr;

std::string error_of(auto&& action) { return strata::testing::input_error_message(action); }

// A valid 4-rank plan for GPT-2 124M: tp=2 × pp=2 on cpu-local:4.
Plan gpt2_plan() {
  Plan plan;
  plan.model = model_preset("gpt2-124m");
  plan.cluster = cluster_preset("cpu-local:4");
  plan.mesh = Mesh{.tp = 2, .cp = 1, .dp = 1, .pp = 2};
  plan.batch = BatchConfig{
      .seq_length = 256, .micro_batch_size = 2, .global_batch_size = 8, .num_micro_batches = 4};
  plan.stages = even_pipeline_stages(12, 2);
  plan.precision = Dtype::fp32;
  return plan;
}

TEST(EvenPipelineStages, SplitsAsEvenlyAsPossibleWithTheExtraLayersFirst) {
  const std::vector<PipelineStage> stages = even_pipeline_stages(10, 4);
  ASSERT_EQ(stages.size(), 4u);
  EXPECT_EQ(stages[0], (PipelineStage{0, 3, true, false}));
  EXPECT_EQ(stages[1], (PipelineStage{3, 3, false, false}));
  EXPECT_EQ(stages[2], (PipelineStage{6, 2, false, false}));
  EXPECT_EQ(stages[3], (PipelineStage{8, 2, false, true}));
  EXPECT_EQ(even_pipeline_stages(5, 1)[0], (PipelineStage{0, 5, true, true}));
}

// Megatron's account-for-embedding/loss options: Llama 3.1 405B's 126 layers and the two ends make
// 128 slots. Over pp 16 × vp 4 = 64 chunks each holds two, the first the embedding and one layer,
// the last one layer and the LM head; over 128 chunks the ends hold nothing but the embedding
// and the head. With the embedding alone, 10 layers over 4 stages are 11 slots: 3, 3, 3, 2.
TEST(EvenPipelineStages, TheEmbeddingAndTheLossCanTakeALayersSlot) {
  const std::vector<PipelineStage> chunks = even_pipeline_stages(126, 64, true, true);
  ASSERT_EQ(chunks.size(), 64u);
  EXPECT_EQ(chunks[0], (PipelineStage{0, 1, true, false}));
  EXPECT_EQ(chunks[1], (PipelineStage{1, 2, false, false}));
  EXPECT_EQ(chunks[63], (PipelineStage{125, 1, false, true}));
  const std::vector<PipelineStage> ends = even_pipeline_stages(126, 128, true, true);
  EXPECT_EQ(ends[0], (PipelineStage{0, 0, true, false}));
  EXPECT_EQ(ends[1], (PipelineStage{0, 1, false, false}));
  EXPECT_EQ(ends[127], (PipelineStage{126, 0, false, true}));
  const std::vector<PipelineStage> embedding = even_pipeline_stages(10, 4, true, false);
  EXPECT_EQ(embedding[0], (PipelineStage{0, 2, true, false}));
  EXPECT_EQ(embedding[3], (PipelineStage{8, 2, false, true}));
}

TEST(Plan, ValidFixturesParseWithDerivedMicroBatches) {
  const Plan plan = load_plan_file(fixture("plan/valid/gpt3-175b-a100-interleaved.json"));
  EXPECT_EQ(plan.batch.num_micro_batches, 192) << "1536 / (1 × dp 8)";
  EXPECT_EQ(plan.mesh.vpp, 3);
  EXPECT_EQ(plan.stages.size(), 48u);
  EXPECT_EQ(plan.schedule.type, ScheduleType::interleaved_one_f_one_b);

  const Plan uneven = load_plan_file(fixture("plan/valid/llama70b-h100-uneven-predicted.json"));
  EXPECT_EQ(uneven.stages[0], (PipelineStage{0, 0, true, false})) << "embedding-only first stage";
  ASSERT_TRUE(uneven.predicted);
  EXPECT_EQ(uneven.predicted->peak_memory_bytes_per_pipeline_rank.size(), 8u);
  EXPECT_EQ(uneven.recompute.full_layers_per_stage[2], 3);

  const Plan custom = load_plan_file(fixture("plan/valid/llama8b-h100-cp-custom.json"));
  EXPECT_EQ(custom.mesh.order,
            (std::array{MeshAxis::tp, MeshAxis::cp, MeshAxis::pp, MeshAxis::dp}));
  EXPECT_EQ(custom.schedule.file, "llama8b-schedule.csv");
}

TEST(Plan, EveryValidFixtureRoundTripsWithItsContentHash) {
  for (const auto& entry : std::filesystem::directory_iterator(fixture("plan/valid"))) {
    if (entry.path().extension() != ".json") continue;
    const Plan plan = load_plan_file(entry.path());
    const nlohmann::json serialized = plan_to_json(plan);
    EXPECT_EQ(serialized.at("content_hash"), plan_content_hash(plan.model, plan.cluster));
    EXPECT_EQ(parse_plan(serialized, JsonLocation("again")), plan) << entry.path();
  }
}

TEST(Plan, ContentHashDetectsAnEditOfTheEmbeddedModel) {
  nlohmann::json document = plan_to_json(gpt2_plan());
  EXPECT_NO_THROW(parse_plan(document, JsonLocation("plan.json")));
  document["model"]["dropout"] = 0.2;
  EXPECT_EQ(error_of([&] {
              parse_plan(document, JsonLocation("plan.json"));
            }).find("plan.json: /content_hash: "),
            0u);
  document.erase("content_hash");
  EXPECT_NO_THROW(parse_plan(document, JsonLocation("plan.json")))
      << "without a hash an edit is accepted";
}

TEST(Plan, TpCommOverlapNeedsSequenceParallelismAndIsWrittenOnlyWhenOn) {
  Plan plan = gpt2_plan();
  EXPECT_FALSE(plan_to_json(plan).contains("tp_comm_overlap"));
  plan.tp_comm_overlap = true;
  EXPECT_EQ(error_of([&] { validate_plan(plan, JsonLocation("plan.json")); }),
            "plan.json: /tp_comm_overlap: needs sequence_parallel: the overlap pipelines its "
            "all-gathers and reduce-scatters with the GEMMs");
  plan.sequence_parallel = true;
  const nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document.at("tp_comm_overlap"), true);
  EXPECT_EQ(parse_plan(document, JsonLocation("again")), plan);
}

TEST(Plan, HybridShardingTilesDpNeedsZeroAndIsWrittenOnlyWhenPartial) {
  Plan plan = gpt2_plan();
  plan.mesh = Mesh{.tp = 1, .cp = 1, .dp = 4, .pp = 1};
  plan.stages = even_pipeline_stages(12, 1);
  plan.batch.num_micro_batches = 1;
  plan.zero_stage = 1;
  EXPECT_FALSE(plan_to_json(plan).at("mesh").contains("dp_shard"));
  plan.mesh.dp_shard = 3;
  EXPECT_EQ(error_of([&] { validate_plan(plan, JsonLocation("plan.json")); }),
            "plan.json: /mesh/dp_shard: 3 does not divide dp=4: the shard groups must tile dp");
  plan.mesh.dp_shard = 2;
  plan.zero_stage = 0;
  EXPECT_THAT(error_of([&] { validate_plan(plan, JsonLocation("plan.json")); }),
              HasSubstr("plan.json: /mesh/dp_shard: 2 < dp=4 shards model state, but ZeRO-0 "
                        "shards none"));
  plan.zero_stage = 3;
  const nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document.at("mesh").at("dp_shard"), 2);
  const Plan read = parse_plan(document, JsonLocation("again"));
  EXPECT_EQ(read, plan);
  EXPECT_EQ(read.mesh.zero_shard_dp(), 2);
  EXPECT_EQ(read.mesh.zero_replicas(), 2);
  // dp_shard = dp is full sharding, as if absent.
  plan.mesh.dp_shard = 4;
  EXPECT_FALSE(plan_to_json(plan).at("mesh").contains("dp_shard"));
  EXPECT_EQ(plan.mesh.zero_replicas(), 1);
}

TEST(Plan, CpCommIsWrittenOnlyWhenAllGatherAndNeedsCp) {
  Plan plan = gpt2_plan();
  EXPECT_FALSE(plan_to_json(plan).contains("cp_comm"));
  plan.cp_comm = ContextParallelComm::all_gather;
  EXPECT_EQ(error_of([&] { validate_plan(plan, JsonLocation("plan.json")); }),
            "plan.json: /cp_comm: all_gather needs context parallelism (cp = 1)");
  plan.mesh = Mesh{.tp = 1, .cp = 2, .dp = 1, .pp = 2};
  validate_plan(plan, JsonLocation("plan.json"));
  const nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document.at("cp_comm"), "all_gather");
  EXPECT_EQ(parse_plan(document, JsonLocation("again")), plan);
  nlohmann::json unknown = document;
  unknown["cp_comm"] = "p2p";
  EXPECT_THAT(error_of([&] { parse_plan(unknown, JsonLocation("plan.json")); }),
              HasSubstr("plan.json: /cp_comm:"));
}

TEST(Plan, FrameworkIsWrittenOnlyWhenNotStrataAndReadByName) {
  Plan plan = gpt2_plan();
  EXPECT_FALSE(plan_to_json(plan).contains("framework"));
  plan.framework = TrainingFramework::megatron_deepspeed;
  nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document.at("framework"), "megatron-deepspeed");
  EXPECT_EQ(parse_plan(document, JsonLocation("again")), plan);
  document["framework"] = "colossalai";
  const std::string error = error_of([&] { parse_plan(document, JsonLocation("plan.json")); });
  EXPECT_THAT(error, ::testing::StartsWith("plan.json: /framework: "));
  EXPECT_THAT(error, ::testing::HasSubstr("megatron-deepspeed"));
}

TEST(Plan, AttentionKernelIsWrittenOnlyWhenUnfused) {
  Plan plan = gpt2_plan();
  EXPECT_FALSE(plan_to_json(plan).contains("attention"));
  plan.attention = AttentionKernel::unfused;
  nlohmann::json document = plan_to_json(plan);
  EXPECT_EQ(document.at("attention"), "unfused");
  EXPECT_EQ(parse_plan(document, JsonLocation("again")), plan);
  document["attention"] = "sdpa";
  EXPECT_THAT(error_of([&] { parse_plan(document, JsonLocation("plan.json")); }),
              ::testing::StartsWith("plan.json: /attention: "));
}

TEST(Plan, TpBeyondKvHeadsReplicatesThem) {
  Plan plan = gpt2_plan();
  plan.model.num_kv_heads = 1;  // multi-query attention: tp=2 holds one kv head on each rank
  EXPECT_NO_THROW(validate_plan(plan, JsonLocation("plan.json")));
}

// Until plans carry expert parallelism and latent attention's costs, a plan of such a model is
// refused at the model's field rather than priced as a dense model.
// Mixture-of-experts plans carry the expert mesh and its options; written only when set, so a
// dense plan's file is unchanged, and read back equal.
TEST(Plan, ExpertMeshAndOptionsRoundTrip) {
  Plan moe = gpt2_plan();
  moe.model = model_preset("mixtral-8x7b");
  moe.sequence_parallel = true;
  moe.mesh.ep = 2;
  // Overlapped all-to-alls: a stack that has them, interleaved when pipelined.
  moe.framework = TrainingFramework::megatron_lm;
  moe.mesh.vpp = 2;
  moe.schedule = {ScheduleType::interleaved_one_f_one_b, {}};
  moe.stages = even_pipeline_stages(32, 2 * moe.mesh.pp);
  moe.ep_comm_overlap = true;
  moe.expert_load_imbalance = 1.25;
  EXPECT_NO_THROW(validate_plan(moe, JsonLocation("plan.json")));
  const nlohmann::json document = plan_to_json(moe);
  EXPECT_EQ(document["mesh"]["ep"], 2);
  EXPECT_FALSE(document["mesh"].contains("etp"));
  EXPECT_EQ(parse_plan(document, JsonLocation("plan.json")), moe);
  EXPECT_EQ(moe.mesh.expert_dp(), 1);  // tp 2 × dp 1 over ep 2
  const nlohmann::json dense = plan_to_json(gpt2_plan());
  EXPECT_FALSE(dense["mesh"].contains("ep"));
  EXPECT_FALSE(dense.contains("ep_comm_overlap"));
  EXPECT_FALSE(dense.contains("expert_load_imbalance"));
  // Latent attention alone plans like any dense model.
  Plan latent = gpt2_plan();
  latent.model = model_preset("deepseek-v3");
  latent.model.moe.reset();
  latent.stages = even_pipeline_stages(61, 2);
  EXPECT_NO_THROW(validate_plan(latent, JsonLocation("plan.json")));
}

// Megatron-Core's --recompute-modules: written only when named, each once, only with
// "selective", and only for parts the model has.
TEST(Plan, RecomputeModulesRoundTripAndNameThePartsOfTheModel) {
  Plan moe = gpt2_plan();
  moe.model = model_preset("mixtral-8x7b");
  moe.sequence_parallel = true;
  moe.stages = even_pipeline_stages(32, 2);
  EXPECT_FALSE(plan_to_json(moe)["recompute"].contains("modules"));
  moe.recompute = {RecomputeGranularity::selective, {}, {}};
  EXPECT_TRUE(recomputes_module(moe.recompute, RecomputeModule::core_attn));  // the default
  moe.recompute.modules = {RecomputeModule::layernorm, RecomputeModule::moe_act};
  EXPECT_FALSE(recomputes_module(moe.recompute, RecomputeModule::core_attn));
  EXPECT_TRUE(recomputes_module(moe.recompute, RecomputeModule::moe_act));
  const nlohmann::json document = plan_to_json(moe);
  EXPECT_EQ(document["recompute"]["modules"], nlohmann::json({"layernorm", "moe_act"}));
  EXPECT_EQ(parse_plan(document, JsonLocation("plan.json")), moe);

  nlohmann::json misspelt = document;
  misspelt["recompute"]["modules"][1] = "moe_acts";
  EXPECT_EQ(error_of([&] { parse_plan(misspelt, JsonLocation("plan.json")); }),
            "plan.json: /recompute/modules/1: \"moe_acts\" is not one of \"core_attn\", "
            "\"layernorm\", \"mlp\", \"moe_act\" or \"mla_up_proj\"; did you mean \"moe_act\"?");
  Plan twice = moe;
  twice.recompute.modules = {RecomputeModule::moe_act, RecomputeModule::moe_act};
  EXPECT_EQ(error_of([&] { validate_plan(twice, JsonLocation("plan.json")); }),
            "plan.json: /recompute/modules/1: \"moe_act\" is named twice");
  Plan full = moe;
  full.recompute.granularity = RecomputeGranularity::full;
  EXPECT_EQ(error_of([&] { validate_plan(full, JsonLocation("plan.json")); }),
            "plan.json: /recompute/modules: only granularity \"selective\" recomputes modules "
            "(granularity is \"full\")");
  Plan all_moe = moe;
  all_moe.recompute.modules = {RecomputeModule::mlp};
  EXPECT_THAT(error_of([&] { validate_plan(all_moe, JsonLocation("plan.json")); }),
              HasSubstr("/recompute/modules/0: \"mlp\" recomputes the dense layers' MLP"));
  Plan dense = gpt2_plan();
  dense.recompute = {RecomputeGranularity::selective, {}, {RecomputeModule::moe_act}};
  EXPECT_THAT(error_of([&] { validate_plan(dense, JsonLocation("plan.json")); }),
              HasSubstr("the model has no moe block"));
  dense.recompute.modules = {RecomputeModule::mla_up_proj};
  EXPECT_THAT(error_of([&] { validate_plan(dense, JsonLocation("plan.json")); }),
              HasSubstr("the model has no mla block"));
  dense.recompute.modules = {RecomputeModule::core_attn, RecomputeModule::mlp};
  EXPECT_NO_THROW(validate_plan(dense, JsonLocation("plan.json")));
}

// CUDA graph scopes: written only when named, a Megatron-Core stack, each once, parts the model
// has, and nothing a graph cannot hold.
TEST(Plan, CudaGraphScopesRoundTripAndCaptureOnlyWhatAGraphCanHold) {
  Plan moe = gpt2_plan();
  moe.model = model_preset("mixtral-8x7b");  // dropless
  moe.sequence_parallel = true;
  moe.stages = even_pipeline_stages(32, 2);
  moe.framework = TrainingFramework::nemo;
  EXPECT_FALSE(plan_to_json(moe).contains("cuda_graph_scope"));
  moe.cuda_graph_scope = {CudaGraphScope::attn, CudaGraphScope::moe_router,
                          CudaGraphScope::moe_preprocess};
  const nlohmann::json document = plan_to_json(moe);
  EXPECT_EQ(document["cuda_graph_scope"], nlohmann::json({"attn", "moe_router", "moe_preprocess"}));
  EXPECT_EQ(parse_plan(document, JsonLocation("plan.json")), moe);
  const auto error = [](Plan plan) {
    return error_of([&] { validate_plan(plan, JsonLocation("plan.json")); });
  };
  Plan whole = moe;
  whole.cuda_graph_scope = {CudaGraphScope::full_iteration};
  EXPECT_EQ(error(whole),
            "plan.json: /cuda_graph_scope/0: a dropless mixture of experts reads its token counts "
            "on the host every layer, which no whole-iteration graph can hold (set a "
            "capacity_factor)");
  Plan block = moe;
  block.cuda_graph_scope = {CudaGraphScope::moe};
  EXPECT_THAT(error(block), HasSubstr("/cuda_graph_scope/0: \"moe\" needs static shapes"));
  block.model.moe->capacity_factor = 1.0;
  EXPECT_NO_THROW(validate_plan(block, JsonLocation("plan.json")));
  block.cuda_graph_scope = {CudaGraphScope::moe, CudaGraphScope::moe_router};
  EXPECT_THAT(error(block), HasSubstr("/cuda_graph_scope/1: \"moe\" already holds"));
  Plan twice = moe;
  twice.cuda_graph_scope = {CudaGraphScope::attn, CudaGraphScope::attn};
  EXPECT_EQ(error(twice), "plan.json: /cuda_graph_scope/1: \"attn\" is named twice");
  Plan mixed = moe;
  mixed.model.moe->capacity_factor = 1.0;
  mixed.cuda_graph_scope = {CudaGraphScope::full_iteration, CudaGraphScope::attn};
  EXPECT_THAT(error(mixed), HasSubstr("holds every other scope: name it alone"));
  Plan all_moe = moe;
  all_moe.cuda_graph_scope = {CudaGraphScope::mlp};
  EXPECT_THAT(error(all_moe), HasSubstr("every layer of the model is a moe layer"));
  Plan dense = gpt2_plan();
  dense.framework = TrainingFramework::megatron_lm;
  dense.cuda_graph_scope = {CudaGraphScope::moe_router};
  EXPECT_THAT(error(dense), HasSubstr("the model has no moe block"));
  dense.cuda_graph_scope = {CudaGraphScope::full_iteration};
  EXPECT_NO_THROW(validate_plan(dense, JsonLocation("plan.json")));
  dense.framework = TrainingFramework::deepspeed;
  EXPECT_EQ(error(dense),
            "plan.json: /cuda_graph_scope: deepspeed does not capture CUDA graph scopes "
            "(Megatron-Core does: framework megatron-lm or nemo)");
}

TEST(Plan, StandaloneLmHeadStageIsAllowed) {
  Plan plan = gpt2_plan();
  plan.stages = {{0, 12, true, false}, {12, 0, false, true}};
  EXPECT_NO_THROW(validate_plan(plan, JsonLocation("plan.json")));
}

TEST(Plan, MeshProductIsComparedWithoutOverflow) {
  Plan plan = gpt2_plan();
  plan.mesh.dp = plan.mesh.cp = std::int64_t{1} << 26;
  plan.mesh.tp = 2;
  plan.mesh.pp = 1 << 12;
  EXPECT_EQ(error_of([&] { validate_plan(plan, JsonLocation("plan.json")); }),
            "plan.json: /mesh: tp × cp × dp × pp = 2 × 67108864 × 67108864 × 4096 = "
            "36893488147419103232 does not equal the cluster's 4 GPUs (4 nodes × 1)");
}

TEST(LoadPlanFile, CustomScheduleFileMustExistBesideThePlan) {
  const std::filesystem::path directory =
      std::filesystem::path(::testing::TempDir()) / ("custom_plan-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  nlohmann::json document = read_json_file(fixture("plan/valid/llama8b-h100-cp-custom.json"));
  document["schedule"]["file"] = "missing.csv";
  write_json_document(directory / "plan.json", document);
  EXPECT_EQ(error_of([&] { load_plan_file(directory / "plan.json"); }),
            (directory / "plan.json").string() +
                ": /schedule/file: \"missing.csv\" does not exist (looked for " +
                (directory / "missing.csv").string() + ")");
}

TEST(LoadPlanFile, RefusesAnotherKindOfFile) {
  EXPECT_EQ(error_of([] { load_plan_file(fixture("model/valid/gpt-minimal.json")); }),
            fixture("model/valid/gpt-minimal.json").string() +
                ": /kind: this is a model file, not a plan file");
}

}  // namespace
}  // namespace strata::schemas
