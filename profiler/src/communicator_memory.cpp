#include "strata/profiler/communicator_memory.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "strata/executor/train/resident_memory.h"

namespace strata::profiler {
namespace {

using executor::Tensor;
using schemas::CommunicatorOperation;

// The peak resident set's growth over `run`, the largest over the group's members; −1 where a
// member could not measure it. Everything
// `run` touches of its own buffers is resident before it starts, so what grows is the
// communicator's.
double peak_growth_bytes(executor::Communicator& group, const std::function<void()>& run) {
  group.barrier();
  const bool restarted = executor::reset_peak_resident();
  const std::size_t before = executor::current_resident_bytes();
  run();
  const std::size_t peak = executor::peak_resident_since_reset_bytes();
  Tensor growth = Tensor::zeros({2}, executor::ScalarType::float64);
  growth.data<double>()[0] = peak > before ? static_cast<double>(peak - before) : 0.0;
  // 1 where this member could not restart or read its peak: the max tells every member.
  growth.data<double>()[1] = restarted && peak > 0 ? 0.0 : 1.0;
  group.all_reduce(growth, executor::ReduceOp::max);
  return growth.data<double>()[1] > 0 ? -1.0 : growth.data<double>()[0];
}

}  // namespace

std::optional<std::map<CommunicatorOperation, double>> measure_communicator_temporaries(
    executor::Communicator& group, double message_bytes) {
  const int n = group.size();
  const auto elements = static_cast<std::int64_t>(message_bytes / 4) / n * n;
  Tensor whole = Tensor::zeros({elements}, executor::ScalarType::float32);
  Tensor part = Tensor::zeros({elements / n}, executor::ScalarType::float32);
  // Fault the buffers in: zeros() maps them untouched, and their first touch is not the
  // communicator's memory.
  std::fill_n(whole.data<float>(), whole.numel(), 1.0f);
  std::fill_n(part.data<float>(), part.numel(), 1.0f);
  const int rank = group.rank();
  const int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
  const std::map<CommunicatorOperation, std::function<void()>> operations{
      {CommunicatorOperation::all_reduce,
       [&] { group.all_reduce(whole, executor::ReduceOp::sum); }},
      {CommunicatorOperation::all_reduce_non_blocking,
       [&] { group.all_reduce_async(whole, executor::ReduceOp::sum).wait(); }},
      {CommunicatorOperation::all_gather, [&] { group.all_gather(part, whole); }},
      {CommunicatorOperation::reduce_scatter, [&] { group.reduce_scatter(whole, part); }},
      {CommunicatorOperation::send_receive, [&] {
         if (peer >= n) return;
         if (rank % 2 == 0) {
           group.send_async(whole, peer, 7).wait();
         } else {
           group.receive_async(whole, peer, 7).wait();
         }
       }}};
  std::map<CommunicatorOperation, double> ratios;
  const double bytes = static_cast<double>(elements) * 4;
  for (const auto& [operation, run] : operations) {
    run();  // once before: connections and the communicator's lasting buffers are not per call
    const double growth = peak_growth_bytes(group, run);
    if (growth < 0) return std::nullopt;
    ratios[operation] = std::round(growth / bytes * 1000) / 1000;  // pages of noise aside
  }
  return ratios;
}

}  // namespace strata::profiler
