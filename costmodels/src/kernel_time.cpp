#include "strata/costmodels/kernel_time.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace strata::costmodels {
namespace {

constexpr double kTileRows = 128;
constexpr double kTileColumns = 128;

}  // namespace

double interpolate_efficiency(const std::vector<schemas::EfficiencyPoint>& curve, double size) {
  if (curve.empty()) return 1.0;
  if (size <= curve.front().size) return curve.front().fraction;
  if (size >= curve.back().size) return curve.back().fraction;
  const auto above = std::upper_bound(
      curve.begin(), curve.end(), size,
      [](double value, const schemas::EfficiencyPoint& point) { return value < point.size; });
  const auto below = above - 1;
  const double position = std::log(size / below->size) / std::log(above->size / below->size);
  return below->fraction + position * (above->fraction - below->fraction);
}

double peak_tflops(const schemas::GpuProfile& gpu, schemas::Dtype dtype) {
  using schemas::Dtype;
  if (auto found = gpu.peak_dense_tflops.find(dtype); found != gpu.peak_dense_tflops.end()) {
    return found->second;
  }
  for (Dtype fallback : {Dtype::bf16, Dtype::fp16, Dtype::tf32, Dtype::fp32}) {
    if (auto found = gpu.peak_dense_tflops.find(fallback); found != gpu.peak_dense_tflops.end()) {
      return found->second;
    }
  }
  return 0;
}

double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

bool gemm_dimensions_aligned(schemas::Dtype dtype, double m, double n, double k) {
  const double elements = 128.0 / schemas::dtype_bits(dtype);  // 16 bytes of elements
  return std::fmod(m, elements) == 0 && std::fmod(n, elements) == 0 && std::fmod(k, elements) == 0;
}

namespace {

// The tile model's compute time (kernel_time.h): the better orientation of the tiles, their waves
// over the SMs, each tile's FLOPs with its prologue and epilogue at the SM's share of the peak.
double tiled_gemm_compute_s(const schemas::GpuProfile& gpu, const schemas::GemmTileModel& tiles,
                            double rate_per_s, double m, double n, double k) {
  const double sms = static_cast<double>(*gpu.streaming_multiprocessors);
  const double tile_s =
      2 * tiles.rows * tiles.columns * (k + tiles.k_overhead) / (rate_per_s / sms);
  double best_waves = 0;
  for (const auto& [along_m, along_n] :
       {std::pair{tiles.rows, tiles.columns}, std::pair{tiles.columns, tiles.rows}}) {
    const double waves = std::ceil(std::ceil(m / along_m) * std::ceil(n / along_n) / sms);
    best_waves = best_waves == 0 ? waves : std::min(best_waves, waves);
  }
  return tiles.fixed_us * 1e-6 + best_waves * tile_s;
}

}  // namespace

double gemm_time_s(const schemas::GpuProfile& gpu, schemas::Dtype dtype, double m, double n,
                   double k) {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const double alignment = gpu.unaligned_gemm_efficiency && !gemm_dimensions_aligned(dtype, m, n, k)
                               ? *gpu.unaligned_gemm_efficiency
                               : 1.0;
  const auto dtype_factor = gpu.gemm_dtype_efficiency.find(dtype);
  const double dtype_efficiency =
      dtype_factor == gpu.gemm_dtype_efficiency.end() ? 1.0 : dtype_factor->second;
  // The peak this GEMM can reach before the shape (tiles, waves, the curve) is accounted for.
  const double rate_per_s = peak_tflops(gpu, dtype) * 1e12 * dtype_efficiency * alignment;
  double compute_s = 0;
  if (gpu.gemm_tiles && gpu.streaming_multiprocessors) {
    compute_s = tiled_gemm_compute_s(gpu, *gpu.gemm_tiles, rate_per_s * gpu.gemm_tiles->efficiency,
                                     m, n, k);
  } else {
    const double flops = gemm_flops(m, n, k);
    double wave_utilisation = 1.0;
    if (gpu.streaming_multiprocessors) {
      const double tiles = std::ceil(m / kTileRows) * std::ceil(n / kTileColumns);
      const double sms = static_cast<double>(*gpu.streaming_multiprocessors);
      wave_utilisation = tiles / (std::ceil(tiles / sms) * sms);
    }
    compute_s = flops / (rate_per_s * interpolate_efficiency(gpu.gemm_efficiency_by_flops, flops) *
                         wave_utilisation);
  }
  const double bytes = (m * k + k * n + m * n) * schemas::dtype_bytes(dtype);
  return std::max({compute_s, memory_bound_time_s(gpu, bytes, 0), kernel_launch_s(gpu)});
}

double cast_transpose_bytes_per_element(schemas::Dtype dtype) {
  return 2.0 + 2.0 * schemas::dtype_bytes(dtype);
}

double kernel_launch_s(const schemas::GpuProfile& gpu, double kernels) {
  return gpu.kernel_launch_us ? kernels * *gpu.kernel_launch_us * 1e-6 : 0.0;
}

double memory_bound_time_s(const schemas::GpuProfile& gpu, double bytes, double kernels) {
  if (bytes <= 0) return 0;
  return std::max(bytes / (gpu.hbm_bandwidth_gb_per_s * 1e9 *
                           interpolate_efficiency(gpu.hbm_efficiency_by_bytes, bytes)),
                  kernel_launch_s(gpu, kernels));
}

double elementwise_time_s(const schemas::GpuProfile& gpu, double bytes, double special_functions,
                          double kernels) {
  const double evaluations_s = gpu.special_function_tops && special_functions > 0
                                   ? special_functions / (*gpu.special_function_tops * 1e12)
                                   : 0.0;
  return std::max(memory_bound_time_s(gpu, bytes, kernels), evaluations_s);
}

double random_number_time_s(const schemas::GpuProfile& gpu, double numbers) {
  if (!gpu.random_number_tops || numbers <= 0) return 0;
  return numbers / (*gpu.random_number_tops * 1e12);
}

}  // namespace strata::costmodels
