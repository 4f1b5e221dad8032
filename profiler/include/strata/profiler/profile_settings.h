// What a profile measures and how long it may take: the full profile (a few minutes) or the
// coarse one (--quick, about a minute), on which backend and in which precision, and where
// progress goes.
#pragma once

#include <functional>
#include <string>

#include "strata/executor/tensor/tensor.h"

namespace strata::profiler {

struct ProfileSettings {
  bool quick = false;
  // The backend whose ops are measured: the CPU (fp32 only) or the GPU (--device cuda), where
  // the activations and GEMMs run in `activation_type` (bf16 mixed precision or fp32) with fp32
  // statistics, parameter gradients and AdamW state, as a training step of that precision does.
  executor::Device device = executor::Device::cpu;
  executor::ScalarType activation_type = executor::ScalarType::float32;
  int repeats = 5;  // timed runs per measurement (3 with quick)
  // One line per stage ("GEMM 12/40: 1024×768×3072 ..."), for a terminal; may be empty.
  std::function<void(const std::string&)> progress;
  // Checked between measurements: true stops the profile with an error (an interrupt).
  std::function<bool()> interrupted;

  void report(const std::string& line) const {
    if (progress) progress(line);
  }
};

// Thrown when `interrupted` says so: the caller writes nothing.
struct ProfileInterrupted {};

}  // namespace strata::profiler
