// A training step of GPT-2 124M shapes (12 layers, hidden 768, 12 heads, vocabulary 50,257; 4
// sequences of 128 tokens a step, micro-batches of 2 — of 1 in the pipelines — float32) on one
// rank and on the parallel layouts of two ranks (dp, tp, sp, ZeRO-1, pp with 1F1B and
// interleaved), in one job on the same cores:
//
//   mpirun -np 2 --bind-to none build/test/bench/parallel_training_bench
//
// (as root, with OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 set; --bind-to
// none because Open MPI binds each of two ranks to one core, and one_rank's threads need both)
//
// one_rank runs on rank 0 with as many OpenMP threads as the job has ranks while the other ranks
// sleep (polling, not spinning a core); the parallel rows run one thread per rank. Each row trains
// 1 + kMeasuredSteps steps and reports the median of the measured ones (manual time: the slowest
// rank's step). Counters: comm_share (the longest any rank was blocked in communication, over
// the step), predicted_ms (the simulator on the plan's cpu-local cluster) and
// measured_over_predicted. Only rank 0 reports.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"
#include "strata/simulator/plan_simulation.h"

namespace strata::executor {
namespace {

constexpr std::int64_t kMeasuredSteps = 3;
constexpr int kIdleTag = 9001;

schemas::Plan gpt2_plan(std::int64_t tp, std::int64_t dp, bool sequence_parallel,
                        std::int64_t zero_stage, std::int64_t pp = 1, std::int64_t vpp = 1) {
  schemas::ModelConfig model = schemas::model_preset("gpt2-124m");
  model.dropout = 0.0;
  schemas::PlanKnobs knobs;
  knobs.mesh.tp = tp;
  knobs.mesh.dp = dp;
  knobs.mesh.pp = pp;
  knobs.mesh.vpp = vpp;
  knobs.schedule = vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                           : schemas::ScheduleType::one_f_one_b;
  knobs.seq_length = 128;
  knobs.global_batch_size = 4;
  // A pipeline fills with micro-batches of one sequence (4 per step); the other rows take two.
  knobs.micro_batch_size = pp > 1 ? 1 : 2;
  knobs.sequence_parallel = sequence_parallel;
  knobs.zero_stage = zero_stage;
  knobs.precision = schemas::Dtype::fp32;
  return schemas::build_plan(
      model, schemas::resolve_cluster("cpu-local:" + std::to_string(tp * dp * pp)), knobs,
      "bench");
}

TokenFile token_data() {
  TokenFile file{"pattern.bin", {}};
  std::uint32_t state = 12345;
  for (int i = 0; i < 100000; ++i) {
    state = state * 1664525u + 1013904223u;  // the same tokens on every rank
    file.tokens.push_back(static_cast<std::uint16_t>((state >> 8) % 50257));
  }
  return file;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Trains `plan` for 1 + kMeasuredSteps steps (on `world` when it has more than one rank) and
// reports the measured steps' medians.
void measure(benchmark::State& state, const schemas::Plan& plan, Communicator* world) {
  TrainingOptions options;
  options.steps = 1 + kMeasuredSteps;
  const TokenFile data = token_data();  // the trainer reads it by reference
  Trainer trainer(plan, "bench", data, options, world);
  std::vector<double> seconds, communication;
  trainer.run([&](const StepRecord& record) {
    if (record.step == 1) return;  // warm-up: first touches of the buffers
    seconds.push_back(record.step_time_s);
    communication.push_back(record.communication_s / record.step_time_s);
  });
  const double step = median(seconds);
  const double predicted = simulator::simulate_plan(plan, ".").metrics.step_time_s;
  state.SetIterationTime(step);
  state.counters["comm_share"] = median(communication);
  state.counters["predicted_ms"] = predicted * 1e3;
  state.counters["measured_over_predicted"] = step / predicted;
  state.counters["tokens_per_s"] =
      static_cast<double>(plan.batch.global_batch_size * plan.batch.seq_length) / step;
}

void BM_OneRank(benchmark::State& state) {
  Communicator& world = world_communicator();
  for (auto _ : state) {
    if (world.rank() == 0) {
      Eigen::setNbThreads(world.size());
      measure(state, gpt2_plan(1, 1, false, 0), nullptr);
      Eigen::setNbThreads(1);
      for (int peer = 1; peer < world.size(); ++peer) {
        Tensor done = Tensor::zeros({1}, ScalarType::float32);
        world.send_async(done, peer, kIdleTag).wait();
      }
    } else {
      // Idle without taking a core from rank 0's threads.
      Tensor done = Tensor::zeros({1}, ScalarType::float32);
      CommunicationRequest request = world.receive_async(done, 0, kIdleTag);
      while (!request.completed()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      state.SetIterationTime(1);
    }
  }
}
BENCHMARK(BM_OneRank)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_TwoRanks(benchmark::State& state) {
  Communicator& world = world_communicator();
  if (world.size() != 2) {
    state.SkipWithError("run under mpirun -np 2");
    return;
  }
  const std::int64_t tp = state.range(0), zero_stage = state.range(2);
  const bool sequence_parallel = state.range(1) != 0;
  Eigen::setNbThreads(1);
  for (auto _ : state) {
    measure(state, gpt2_plan(tp, 2 / tp, sequence_parallel, zero_stage), &world);
  }
}
// {tp, sequence parallel, ZeRO}: dp2, dp2 with ZeRO-1, tp2, tp2 with sequence parallelism.
BENCHMARK(BM_TwoRanks)
    ->Args({1, 0, 0})
    ->Args({1, 0, 1})
    ->Args({2, 0, 0})
    ->Args({2, 1, 0})
    ->ArgNames({"tp", "sp", "zero"})
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

void BM_TwoRankPipeline(benchmark::State& state) {
  Communicator& world = world_communicator();
  if (world.size() != 2) {
    state.SkipWithError("run under mpirun -np 2");
    return;
  }
  Eigen::setNbThreads(1);
  for (auto _ : state) measure(state, gpt2_plan(1, 1, false, 0, 2, state.range(0)), &world);
}
// pp2 with 1F1B (6 layers a stage) and interleaved 1F1B over two chunks a rank (3 layers each).
BENCHMARK(BM_TwoRankPipeline)
    ->Arg(1)
    ->Arg(2)
    ->ArgName("vpp")
    ->UseManualTime()
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond);

// Reports nothing: ranks other than 0 run every benchmark in step with rank 0 but print nothing.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}
};

}  // namespace
}  // namespace strata::executor

int main(int argc, char** argv) {
  strata::executor::Communicator& world = strata::executor::world_communicator();
  benchmark::Initialize(&argc, argv);
  if (world.rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    strata::executor::SilentReporter silent;
    benchmark::RunSpecifiedBenchmarks(&silent);
  }
  benchmark::Shutdown();
  return 0;
}
