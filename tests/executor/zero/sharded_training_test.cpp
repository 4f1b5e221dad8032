// Process groups, the sharded optimizer and the trainer's one program in one process: ranks are
// threads over a shared-memory communicator (threaded_communicator.h), so each ZeRO stage, padded
// buckets, tensor and pipeline parallelism are checked against the one-device run without
// mpirun — here and under the sanitizers. (tests/executor/distributed/ runs the same program
// across processes under MPI.)
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "executor_models.h"
#include "strata/executor/distributed/process_groups.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/mesh_ranks.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "threaded_communicator.h"

namespace strata::executor {
namespace {

using testing::run_on_threads;

schemas::Plan plan_of(const schemas::ModelConfig& model, const schemas::Mesh& mesh,
                      std::int64_t zero_stage, bool sequence_parallel = false) {
  schemas::PlanKnobs knobs;
  knobs.mesh = mesh;
  knobs.seq_length = 16;
  knobs.global_batch_size = 12;
  knobs.micro_batch_size = mesh.pp > 1 ? 2 : 12 / mesh.dp / 2;
  knobs.zero_stage = zero_stage;
  knobs.sequence_parallel = sequence_parallel;
  if (mesh.vpp > 1) knobs.schedule = schemas::ScheduleType::interleaved_one_f_one_b;
  knobs.recompute = schemas::RecomputeGranularity::none;
  knobs.precision = schemas::Dtype::fp32;
  knobs.gradient_bucket_elements = 3000;  // several buckets, each padded
  return schemas::build_plan(
      model, schemas::resolve_cluster(fmt::format("cpu-local:{}", mesh.world_size())), knobs,
      "test");
}

TokenFile token_data() {
  TokenFile file{"pattern.bin", {}};
  std::uint32_t state = 4242;
  for (int i = 0; i < 8000; ++i) {
    state = state * 1664525u + 1013904223u;
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 16) % 256));
  }
  return file;
}

TrainingOptions options() {
  TrainingOptions training;
  training.steps = 3;
  training.seed = 7;
  training.learning_rate = 1e-3;
  training.max_gradient_norm = 0.5;  // clipping: the norm must sum every element exactly once
  training.adamw.epsilon = 1e-6;
  return training;
}

struct Run {
  std::vector<double> losses, norms;
  std::vector<float> values;  // the whole model after the last step
};

Run train_on(const schemas::Plan& plan, const TokenFile& data, Communicator* world) {
  Run run;
  Trainer trainer(plan, "test", data, options(), world);
  trainer.run([&](const StepRecord& record) {
    run.losses.push_back(record.loss);
    run.norms.push_back(record.gradient_norm);
  });
  ParameterStore whole(transformer_parameters(plan.model), ScalarType::float32);
  trainer.gather_parameters(whole);
  run.values.assign(whole.values().data<float>(),
                    whole.values().data<float>() + whole.values().numel());
  return run;
}

void expect_one_device_numbers(const schemas::Plan& plan) {
  const TokenFile data = token_data();
  const Run one = train_on(plan_of(plan.model, {}, 0), data, nullptr);
  std::mutex guard;
  std::vector<Run> ranks(static_cast<std::size_t>(plan.mesh.world_size()));
  run_on_threads(static_cast<int>(plan.mesh.world_size()), [&](Communicator& world) {
    Run run = train_on(plan, data, &world);
    const std::lock_guard<std::mutex> lock(guard);
    ranks[static_cast<std::size_t>(world.rank())] = std::move(run);
  });
  for (std::size_t rank = 0; rank < ranks.size(); ++rank) {
    const Run& run = ranks[rank];
    ASSERT_EQ(run.losses.size(), one.losses.size());
    for (std::size_t step = 0; step < one.losses.size(); ++step) {
      EXPECT_NEAR(run.losses[step], one.losses[step], 1e-5 * one.losses[step])
          << "rank " << rank << ", step " << step + 1;
      EXPECT_NEAR(run.norms[step], one.norms[step], 1e-4 * one.norms[step])
          << "rank " << rank << ", step " << step + 1;
    }
  }
  ASSERT_EQ(ranks[0].values.size(), one.values.size());
  double largest = 0;
  for (std::size_t i = 0; i < one.values.size(); ++i) {
    largest = std::max(largest, std::abs(static_cast<double>(ranks[0].values[i] - one.values[i])));
  }
  EXPECT_LT(largest, 1e-5);
}

TEST(ShardedTraining, EveryZeroStageOverPaddedBucketsComputesTheOneDeviceNumbers) {
  for (std::int64_t zero_stage = 0; zero_stage <= 3; ++zero_stage) {
    SCOPED_TRACE("dp 2, ZeRO-" + std::to_string(zero_stage));
    expect_one_device_numbers(
        plan_of(testing::odd_gpt(), {.tp = 1, .cp = 1, .dp = 2, .pp = 1}, zero_stage));
  }
  SCOPED_TRACE("dp 3, ZeRO-1");  // three-way shards of odd buckets
  expect_one_device_numbers(plan_of(testing::odd_gpt(), {.tp = 1, .cp = 1, .dp = 3, .pp = 1}, 1));
}

TEST(ShardedTraining, TensorAndPipelineParallelismComputeTheOneDeviceNumbers) {
  {
    SCOPED_TRACE("tp 2 · dp 2, sequence parallel, ZeRO-2");
    expect_one_device_numbers(plan_of(schemas::model_preset("llama-tiny"),
                                      {.tp = 2, .cp = 1, .dp = 2, .pp = 1}, 2, true));
  }
  SCOPED_TRACE("dp 2 · pp 2, ZeRO-3");
  expect_one_device_numbers(
      plan_of(schemas::model_preset("gpt-tiny"), {.tp = 1, .cp = 1, .dp = 2, .pp = 2}, 3));
}

TEST(ContextParallelTraining, AttentionOverSequenceChunksComputesTheOneDeviceNumbers) {
  // gpt: learned positions and dropout at every site, keyed by global token; llama: GQA and RoPE.
  // Both ways cp attention communicates (the ring's cp 4 and llama alone run in the MPI suite,
  // tests/executor/distributed/parallel_training_test.cpp).
  schemas::ModelConfig gpt = testing::odd_gpt();
  gpt.dropout = 0.1;
  {
    SCOPED_TRACE("gpt, cp 2, ring");
    expect_one_device_numbers(plan_of(gpt, {.tp = 1, .cp = 2, .dp = 1, .pp = 1}, 0));
  }
  {
    SCOPED_TRACE("gpt, cp 4, all-gather");
    schemas::Plan gathered = plan_of(gpt, {.tp = 1, .cp = 4, .dp = 1, .pp = 1}, 0);
    gathered.cp_comm = schemas::ContextParallelComm::all_gather;
    expect_one_device_numbers(gathered);
  }
  const schemas::ModelConfig llama = schemas::model_preset("llama-tiny");
  {
    SCOPED_TRACE("llama, cp 2 · tp 2, sequence parallel");
    expect_one_device_numbers(plan_of(llama, {.tp = 2, .cp = 2, .dp = 1, .pp = 1}, 1, true));
  }
}

TEST(ContextParallelTraining, CpComposesWithPipelinesAndShardsZeroOverDpTimesCp) {
  schemas::ModelConfig gpt = testing::odd_gpt(4);
  gpt.dropout = 0.1;
  {
    SCOPED_TRACE("gpt, cp 2 · pp 2, interleaved");
    schemas::Plan plan = plan_of(gpt, {.tp = 1, .cp = 2, .dp = 1, .pp = 2, .vpp = 2}, 0);
    expect_one_device_numbers(plan);
  }
  SCOPED_TRACE("gpt, cp 2 · dp 2, ZeRO-3");
  expect_one_device_numbers(plan_of(gpt, {.tp = 1, .cp = 2, .dp = 2, .pp = 1}, 3));
}

// Hybrid sharding's groups on cp 2 · dp 4 in shards of 2 (rank = cp + 2·dp): a shard group is
// two consecutive dp ranks with both cp ranks; a replica group, the same place in every block.
TEST(ProcessGroups, ZeroShardAndReplicaGroupsTileDpTimesCp) {
  const schemas::Mesh mesh{.tp = 1, .cp = 2, .dp = 4, .pp = 1, .dp_shard = 2};
  const std::vector<std::vector<std::int64_t>> shard_groups{{0, 1, 2, 3}, {4, 5, 6, 7}};
  const std::vector<std::vector<std::int64_t>> replica_groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}};
  std::mutex guard;
  std::vector<std::string> failures;
  run_on_threads(8, [&](Communicator& world) {
    ProcessGroups groups(world, mesh);
    const auto members_of = [&](Communicator& group) {
      Tensor mine = Tensor::zeros({1}, ScalarType::int32);
      mine.data<std::int32_t>()[0] = world.rank();
      Tensor all = Tensor::zeros({group.size()}, ScalarType::int32);
      group.all_gather(mine, all);
      return std::vector<std::int64_t>(all.data<std::int32_t>(),
                                       all.data<std::int32_t>() + group.size());
    };
    const std::int64_t rank = world.rank();
    const std::vector<std::int64_t> shard = members_of(groups.zero_shard());
    const std::vector<std::int64_t> replica = members_of(groups.zero_replica());
    const std::lock_guard<std::mutex> lock(guard);
    if (shard != shard_groups[static_cast<std::size_t>(rank / 4)] ||
        shard != schemas::zero_shard_group_of(mesh, rank)) {
      failures.push_back(fmt::format("rank {}: shard group {}", rank, fmt::join(shard, ",")));
    }
    if (replica != replica_groups[static_cast<std::size_t>(rank % 4)] ||
        replica != schemas::zero_replica_group_of(mesh, rank)) {
      failures.push_back(fmt::format("rank {}: replica group {}", rank, fmt::join(replica, ",")));
    }
    if (groups.zero_shard().rank() != schemas::zero_shard_rank(mesh, rank) ||
        groups.zero_replica().rank() != schemas::zero_replica_rank(mesh, rank)) {
      failures.push_back(fmt::format("rank {}: its places differ from the mesh's", rank));
    }
  });
  EXPECT_THAT(failures, ::testing::IsEmpty());
}

TEST(HybridShardedTraining, ShardsWithinGroupsAndAllReducesAcrossThemAsOneDevice) {
  // Shard 2 × replicate 2: reduce-scatter over the shard group, all-reduce over the replicas.
  for (std::int64_t zero_stage : {1, 3}) {
    SCOPED_TRACE("dp 4 in shards of 2, ZeRO-" + std::to_string(zero_stage));
    expect_one_device_numbers(plan_of(
        testing::odd_gpt(), {.tp = 1, .cp = 1, .dp = 4, .pp = 1, .dp_shard = 2}, zero_stage));
  }
  {
    SCOPED_TRACE("tp 2 · dp 4 in shards of 2, sequence parallel, ZeRO-2");
    schemas::ModelConfig llama = schemas::model_preset("llama-tiny");
    llama.num_layers = 1;  // eight threads: one layer holds every kind of parameter
    expect_one_device_numbers(
        plan_of(llama, {.tp = 2, .cp = 1, .dp = 4, .pp = 1, .dp_shard = 2}, 2, true));
  }
  SCOPED_TRACE("cp 2 · dp 2 in shards of 1 (one dp rank × cp), ZeRO-1");
  expect_one_device_numbers(
      plan_of(testing::odd_gpt(), {.tp = 1, .cp = 2, .dp = 2, .pp = 1, .dp_shard = 1}, 1));
}

// Each rank's groups hold exactly the world ranks schemas::mesh_groups says, in its order.
TEST(ProcessGroups, EachGroupHoldsTheRanksTheMeshNames) {
  const schemas::Mesh mesh{.tp = 2, .cp = 1, .dp = 2, .pp = 2};
  std::mutex guard;
  std::vector<std::string> failures;
  run_on_threads(8, [&](Communicator& world) {
    ProcessGroups groups(world, mesh);
    const auto members_of = [&](Communicator& group) {
      const std::vector<std::int32_t> ranks = [&] {
        Tensor mine = Tensor::zeros({1}, ScalarType::int32);
        mine.data<std::int32_t>()[0] = world.rank();
        Tensor all = Tensor::zeros({group.size()}, ScalarType::int32);
        group.all_gather(mine, all);
        return std::vector<std::int32_t>(all.data<std::int32_t>(),
                                         all.data<std::int32_t>() + group.size());
      }();
      return std::vector<std::int64_t>(ranks.begin(), ranks.end());
    };
    struct Check {
      const char* name;
      std::vector<schemas::MeshAxis> axes;
      Communicator* group;
    };
    using schemas::MeshAxis;
    const std::vector<Check> checks = {
        {"tp", {MeshAxis::tp}, &groups.tensor_parallel()},
        {"dp", {MeshAxis::dp}, &groups.data_parallel()},
        {"pp", {MeshAxis::pp}, &groups.pipeline_parallel()},
        {"tp·pp", {MeshAxis::tp, MeshAxis::pp}, &groups.model_parallel()},
        {"dp·cp", {MeshAxis::dp, MeshAxis::cp}, &groups.gradient_reduction()},
    };
    for (const Check& check : checks) {
      const std::vector<std::int64_t> got = members_of(*check.group);
      const std::vector<std::int64_t> expected =
          schemas::mesh_group_of(mesh, std::span<const MeshAxis>(check.axes), world.rank());
      if (got != expected) {
        const std::lock_guard<std::mutex> lock(guard);
        failures.push_back(fmt::format("rank {}: {} group {} but the mesh says {}", world.rank(),
                                       check.name, fmt::join(got, ","), fmt::join(expected, ",")));
      }
    }
  });
  EXPECT_THAT(failures, ::testing::IsEmpty());
}

}  // namespace
}  // namespace strata::executor
