// The GEMM model (kernel_time.h) against 384 bf16 GEMMs measured on an H100: the transformer
// layer's four GEMMs at hidden 1,024–4,096, tp 1–8 and 512–16,384 tokens, each replayed from a
// CUDA graph so that the small ones are timed on the device, not the host
// (bench/gpu/small_kernel_probe.py, 2026-11-28; bench/gpu/results/). Issue 37 asks for GEMM
// efficiency from the shape rather than from a curve indexed by FLOPs: the bounds below are what
// the model reaches today, per group of shapes, so that a change to it shows where it gains or
// loses against measurement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/costmodels/kernel_time.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

struct MeasuredGemm {
  double m = 0, n = 0, k = 0;
  double measured_s = 0;
  double predicted_s = 0;
  // log(predicted / measured): symmetric in over- and under-prediction.
  double log_ratio() const { return std::log(predicted_s / measured_s); }
};

std::vector<MeasuredGemm> measured_gemms() {
  std::ifstream in(std::string(STRATA_SOURCE_DIR) +
                   "/bench/gpu/results/h100_small_kernel_probe_2026-11-28.json");
  const nlohmann::json probe = nlohmann::json::parse(in);
  const schemas::GpuProfile gpu = schemas::cluster_preset("dgx-h100").gpu;
  std::vector<MeasuredGemm> gemms;
  for (const nlohmann::json& row : probe.at("gemm")) {
    MeasuredGemm gemm{.m = row.at("m").get<double>(),
                      .n = row.at("n").get<double>(),
                      .k = row.at("k").get<double>(),
                      .measured_s = row.at("device_us").get<double>() * 1e-6};
    gemm.predicted_s = gemm_time_s(gpu, schemas::Dtype::bf16, gemm.m, gemm.n, gemm.k);
    gemms.push_back(gemm);
  }
  return gemms;
}

// exp(mean |log(predicted / measured)|) − 1: the typical factor by which a prediction is off.
double typical_error(const std::vector<MeasuredGemm>& gemms) {
  double sum = 0;
  for (const MeasuredGemm& gemm : gemms) sum += std::abs(gemm.log_ratio());
  return std::exp(sum / static_cast<double>(gemms.size())) - 1;
}

double mean_bias(const std::vector<MeasuredGemm>& gemms) {
  double sum = 0;
  for (const MeasuredGemm& gemm : gemms) sum += gemm.log_ratio();
  return std::exp(sum / static_cast<double>(gemms.size())) - 1;
}

TEST(GemmShapes, TheModelAgainstGemmsMeasuredOnAnH100) {
  const std::vector<MeasuredGemm> gemms = measured_gemms();
  ASSERT_EQ(gemms.size(), 384u);
  std::map<std::string, std::vector<MeasuredGemm>> groups;
  for (const MeasuredGemm& gemm : gemms) {
    const double flops = 2 * gemm.m * gemm.n * gemm.k;
    groups[flops < 1e10   ? "a: under 1e10 FLOPs"
           : flops < 1e11 ? "b: 1e10-1e11 FLOPs"
                          : "c: 1e11 FLOPs and more"]
        .push_back(gemm);
    groups[gemm.k <= 512 ? "d: k <= 512" : "e: k > 512"].push_back(gemm);
  }
  std::printf("%-26s %6s %14s %12s\n", "shapes", "count", "typical error", "mean bias");
  std::printf("%-26s %6zu %13.1f%% %+11.1f%%\n", "all", gemms.size(), 100 * typical_error(gemms),
              100 * mean_bias(gemms));
  for (const auto& [name, members] : groups) {
    std::printf("%-26s %6zu %13.1f%% %+11.1f%%\n", name.c_str(), members.size(),
                100 * typical_error(members), 100 * mean_bias(members));
  }
  // Today's model: bounds a little above what it reaches (see BENCHMARKS.md, "GEMM shapes").
  EXPECT_LE(typical_error(gemms), 0.60);
  EXPECT_LE(typical_error(groups.at("c: 1e11 FLOPs and more")), 0.20);
}

}  // namespace
}  // namespace strata::costmodels
