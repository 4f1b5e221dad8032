// Every layout computes the one-device numbers: under mpirun, each case trains a plan's layout —
// tensor, sequence and data parallelism, ZeRO 1-3, dropout, recomputation, and pipelines run by
// the schedule IR (1F1B, GPipe, interleaved, ZB-H1, a custom CSV; uneven, embedding-only and
// head-only stages; tied embeddings across stages) — for 10 steps, and
// rank 0 holds it against the same plan trained on one rank in this process: per-step losses
// within 1e-5 relative, and the final parameters (gathered from every rank's slices and shards)
// within 1e-5 in norm, per parameter. Also: a checkpointed run resumes bit-identically.
//
// The program runs the cases of the world size mpirun gives it (CTest starts it at 2, 4 and 8
// ranks); rank 0 reports, other ranks print only their own failures, and the job fails when any
// rank's case fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "executor_models.h"
#include "parallel_training_cases.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"
#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

namespace fs = std::filesystem;

using namespace parallel_cases;  // the layouts, plans and runs every case trains

class ParallelTraining : public ::testing::TestWithParam<Layout> {};

TEST_P(ParallelTraining, ComputesTheOneDeviceNumbers) {
  const Layout& layout = GetParam();
  Communicator& world = world_communicator();
  const schemas::ModelConfig model = model_named(layout.model, layout.dropout);
  const TokenFile data = token_data();
  const TokenFile validation = validation_data();
  TrainingOptions options = training_options();

  // The one-device run, on rank 0 (the others wait for it in the parallel trainer's setup).
  RunRecord single;
  ParameterStore single_values(transformer_parameters(model), ScalarType::float32);
  if (world.rank() == 0) {
    if (layout.schedule == schemas::ScheduleType::custom) {
      std::FILE* file = std::fopen(custom_schedule_file().c_str(), "w");
      ASSERT_NE(file, nullptr);
      std::fputs(kCustomSchedule, file);
      std::fclose(file);
    }
    const schemas::Plan one = one_device_plan(model);
    Trainer trainer(one, "one device", data, options);
    trainer.set_validation_data(validation);
    single = train(trainer);
    trainer.gather_parameters(single_values);
  }

  const schemas::Plan plan = plan_of(model, layout);
  Trainer trainer(plan, layout.name, data, options, &world);
  ASSERT_EQ(trainer.groups().world().size(), plan.mesh.world_size());
  trainer.set_validation_data(validation);
  const RunRecord parallel = train(trainer);
  ParameterStore gathered(transformer_parameters(model), ScalarType::float32);
  trainer.gather_parameters(gathered);
  if (world.rank() != 0) return;

  ASSERT_EQ(parallel.losses.size(), single.losses.size());
  for (std::size_t step = 0; step < single.losses.size(); ++step) {
    EXPECT_NEAR(parallel.losses[step], single.losses[step], kTolerance * single.losses[step])
        << "loss of step " << step + 1;
    EXPECT_NEAR(parallel.norms[step], single.norms[step], 1e-4 * single.norms[step])
        << "gradient norm of step " << step + 1;
  }
  // Validation (no dropout, the pipeline's forward-only program) agrees too, at steps 0, 5, 10.
  ASSERT_EQ(single.validation_losses.size(), 3u);
  ASSERT_EQ(parallel.validation_losses.size(), single.validation_losses.size());
  for (std::size_t i = 0; i < single.validation_losses.size(); ++i) {
    EXPECT_NEAR(parallel.validation_losses[i], single.validation_losses[i],
                kTolerance * single.validation_losses[i])
        << "validation loss at step " << 5 * i;
  }
  for (const ParameterEntry& entry : single_values.entries()) {
    const Tensor& value = gathered.entry(entry.spec.name).value;
    EXPECT_LE(largest_difference(value, entry.value), kTolerance) << entry.spec.name;
    // And no tensor off as a whole: biases that started at zero are the sensitive ones.
    EXPECT_LE(relative_norm_difference(value, entry.value), 10 * kTolerance) << entry.spec.name;
    if (std::getenv("STRATA_PRINT_DIFFERENCES")) {
      std::printf("%s %s: largest %.3g relative %.3g\n", layout.name.c_str(),
                  entry.spec.name.c_str(), largest_difference(value, entry.value),
                  relative_norm_difference(value, entry.value));
    }
  }
  // The run changed the parameters: the comparison is of trained values, not of the init.
  ParameterStore initial(transformer_parameters(model), ScalarType::float32);
  initial.initialize(options.seed);
  EXPECT_GT(relative_norm_difference(gathered.entry("embedding.word").value,
                                     initial.entry("embedding.word").value),
            1e-3);
}

INSTANTIATE_TEST_SUITE_P(Layouts, ParallelTraining, ::testing::ValuesIn(layouts_for_this_job()),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return info.param.name;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ParallelTraining);

// Every rank reports its own failed assertions; rank 0 also the progress.
class FailuresOfOneRank : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOfOneRank(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (result.failed()) {
      std::fprintf(stderr, "rank %d: %s:%d: %s\n", rank_, result.file_name(), result.line_number(),
                   result.summary());
    }
  }

 private:
  int rank_;
};

// The runtime holds no more activation sets per model chunk than the schedule has micro-batches
// of that chunk in flight — from its forward until its backward ran and its gradient went
// upstream. A set whose SEND_B had not completed once stayed out of use until it had, and the
// last stage of 1F1B then held two micro-batches' activations for one in flight.
TEST(PipelineActivations, NoMoreSetsThanMicroBatchesInFlight) {
  Communicator& world = world_communicator();
  if (world.size() > 4) GTEST_SKIP() << "a pipeline over the whole job, up to 4 ranks";
  using schemas::ScheduleType;
  const int pp = world.size();
  std::vector<Layout> layouts{
      pipeline("OneFOneB", "gpt-tiny", 1, 1, pp, 1, ScheduleType::one_f_one_b),
      pipeline("ZeroBubble", "gpt-tiny", 1, 1, pp, 1, ScheduleType::zb_h1)};
  if (pp == 2) {  // gpt-tiny's 4 layers: 2 chunks of 1 per rank
    layouts.push_back(
        pipeline("Interleaved", "gpt-tiny", 1, 1, pp, 2, ScheduleType::interleaved_one_f_one_b));
  }
  for (const Layout& layout : layouts) {
    const schemas::ModelConfig model = model_named(layout.model, 0);
    TrainingOptions options = training_options();
    options.steps = 2;
    options.eval_every = 0;
    const TokenFile data = token_data();  // the trainer reads it, it does not copy it
    Trainer trainer(plan_of(model, layout), layout.name, data, options, &world);
    train(trainer);
    const schedule::PipelineSchedule& schedule = trainer.pipeline_schedule();
    // This rank's actions (a pipeline over the whole job: world rank = pipeline rank).
    std::vector<int> in_flight(static_cast<std::size_t>(schedule.vpp), 0);
    std::vector<int> most(in_flight.size(), 0);
    std::map<std::pair<int, int>, int> waiting;  // (stage, micro-batch): events before retiring
    for (const schedule::Action& action : schedule.ranks[static_cast<std::size_t>(world.rank())]) {
      const auto chunk = static_cast<std::size_t>(action.stage / pp);
      const std::pair<int, int> key{action.stage, action.micro_batch};
      switch (action.type) {
        case schedule::ActionType::forward:
          waiting[key] = action.stage == 0 ? 1 : 2;  // the backward, then SEND_B past stage 0
          most[chunk] = std::max(most[chunk], ++in_flight[chunk]);
          continue;
        case schedule::ActionType::backward:
        case schedule::ActionType::backward_weight:
        case schedule::ActionType::send_backward:
          if (--waiting[key] == 0) --in_flight[chunk];
          continue;
        default:
          continue;
      }
    }
    for (const int left : in_flight)
      EXPECT_EQ(left, 0) << layout.name << ": a micro-batch never retired";
    const std::vector<std::size_t> sets = trainer.pipeline_activation_sets();
    ASSERT_EQ(sets.size(), most.size()) << layout.name;
    for (std::size_t chunk = 0; chunk < sets.size(); ++chunk) {
      EXPECT_GE(sets[chunk], 1u) << layout.name << " chunk " << chunk;
      EXPECT_LE(sets[chunk], static_cast<std::size_t>(most[chunk]))
          << layout.name << " chunk " << chunk << " on rank " << world.rank();
    }
  }
}

}  // namespace
// MPI_Alltoallv behind Communicator::all_to_all: member i sends member j a block of i + j + 1
// elements whose values name both (1000·i + 10·j + k), so a block delivered to the wrong member,
// from the wrong member or at the wrong place shows; one member sends nothing to itself.
TEST(Communicator, AllToAllDeliversEachBlockToItsMemberInRankOrder) {
  Communicator& world = world_communicator();
  const int members = world.size(), me = world.rank();
  const auto count = [](int from, int to) -> std::int64_t {
    return from == to && from == 1 ? 0 : from + to + 1;
  };
  std::vector<std::int64_t> send_counts, receive_counts;
  std::vector<float> sent;
  for (int to = 0; to < members; ++to) {
    send_counts.push_back(count(me, to));
    receive_counts.push_back(count(to, me));
    for (std::int64_t k = 0; k < count(me, to); ++k) {
      sent.push_back(static_cast<float>(1000 * me + 10 * to + k));
    }
  }
  Tensor send = Tensor::zeros({static_cast<std::int64_t>(sent.size())}, ScalarType::float32);
  std::copy(sent.begin(), sent.end(), send.data<float>());
  std::int64_t total = 0;
  for (std::int64_t c : receive_counts) total += c;
  Tensor receive = Tensor::zeros({total + 3}, ScalarType::float32);  // longer than needed
  world.all_to_all(send, send_counts, receive, receive_counts);
  std::int64_t at = 0;
  for (int from = 0; from < members; ++from) {
    for (std::int64_t k = 0; k < count(from, me); ++k) {
      EXPECT_EQ(receive.data<float>()[at++], static_cast<float>(1000 * from + 10 * me + k))
          << "from " << from << " element " << k;
    }
  }
  EXPECT_EQ(receive.data<float>()[total], 0.0f) << "wrote past its blocks";
}

// bfloat16 moves as 16-bit words (the CUDA ranks' activations, staged through host memory, use
// it): every bit pattern arrives as sent, the largest finite and the smallest subnormal too. MPI
// has no bfloat16 sum, so a reduction of host bfloat16 is refused (staging widens device bfloat16
// to float32 before it reduces).
TEST(Communicator, MovesBfloat16BitForBitAndRefusesItsReductions) {
  Communicator& world = world_communicator();
  const int members = world.size(), me = world.rank();
  const auto bits_of = [](int member, std::int64_t k) {
    constexpr std::uint16_t kPatterns[] = {0x7f7f, 0x0001, 0x8000, 0x3f80, 0xc2f7};
    return static_cast<std::uint16_t>(kPatterns[k % 5] ^ (member << 4));
  };
  constexpr std::int64_t kPart = 7;
  Tensor part = Tensor::zeros({kPart}, ScalarType::bfloat16);
  for (std::int64_t k = 0; k < kPart; ++k) part.data<BFloat16>()[k].bits = bits_of(me, k);
  Tensor whole = Tensor::zeros({kPart * members}, ScalarType::bfloat16);
  world.all_gather(part, whole);
  for (int member = 0; member < members; ++member) {
    for (std::int64_t k = 0; k < kPart; ++k) {
      EXPECT_EQ(whole.data<BFloat16>()[member * kPart + k].bits, bits_of(member, k))
          << "member " << member << " element " << k;
    }
  }
  Tensor broadcast = part.to(Device::cpu);
  world.broadcast(broadcast, 0);
  for (std::int64_t k = 0; k < kPart; ++k) {
    EXPECT_EQ(broadcast.data<BFloat16>()[k].bits, bits_of(0, k)) << "element " << k;
  }
  if (members > 1) {
    EXPECT_THROW(world.all_reduce(part, ReduceOp::sum), InvariantError);
  }
}

}  // namespace strata::executor

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  strata::executor::Communicator& world = strata::executor::world_communicator();
  if (world.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new strata::executor::FailuresOfOneRank(world.rank()));
  }
  const int result = RUN_ALL_TESTS();
  // The job fails when any rank's cases failed.
  strata::executor::Tensor any =
      strata::executor::Tensor::zeros({1}, strata::executor::ScalarType::float64);
  any.data<double>()[0] = result;
  world.all_reduce(any, strata::executor::ReduceOp::max);
  return any.data<double>()[0] != 0 ? 1 : 0;
}
