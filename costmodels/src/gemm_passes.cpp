#include "strata/costmodels/gemm_passes.h"

#include <algorithm>

#include "strata/costmodels/kernel_time.h"
#include "strata/costmodels/model_state_memory.h"

namespace strata::costmodels {
namespace {

// Bytes per weight that a weight-gradient GEMM's epilogue moves beyond what the calibrated GEMM
// curve already covers. The GEMM adds into the gradient accumulator (Megatron's gradient
// accumulation fusion): it reads and writes one accumulator element per weight every
// micro-batch. The curve was fitted to fp16 runs, whose accumulator has the GEMM output's width;
// fp32 main gradients under bf16 and fp8 read and write 2 more bytes each way, and in the
// epilogue no tensor-core work hides them. (4 bytes on every weight per micro-batch: with 4,096
// tokens the weight GEMM does 8,192 FLOPs per weight, so about 7% of it on an A100.)
double wide_accumulator_bytes_per_weight(const LayerContext& context) {
  const double accumulator = static_cast<double>(
      adam_model_state_bytes(context.precision, context.gradient_dtype_of()).gradients);
  return 2 * std::max(0.0, accumulator - context.activation_bytes());
}

}  // namespace

GemmPassTimes gemm_pass_times(const LayerContext& context, schemas::Dtype dtype,
                              const std::vector<GemmShape>& shapes) {
  const schemas::GpuProfile& gpu = context.cluster->gpu;
  const double accumulator_bytes = wide_accumulator_bytes_per_weight(context);
  GemmPassTimes times;
  for (const GemmShape& shape : shapes) {
    // Y[m×n] = X[m×k]·W[k×n];  dX[m×k] = dY·Wᵀ;  dW[k×n] = Xᵀ·dY.
    times.forward_each_s.push_back(gemm_time_s(gpu, dtype, shape.m, shape.n, shape.k));
    times.input_each_s.push_back(gemm_time_s(gpu, dtype, shape.m, shape.k, shape.n));
    times.forward_s += times.forward_each_s.back();
    times.input_s += times.input_each_s.back();
    times.weight_s += gemm_time_s(gpu, dtype, shape.k, shape.n, shape.m) +
                      memory_bound_time_s(gpu, accumulator_bytes * shape.k * shape.n, 0);
    times.forward_flops += gemm_flops(shape.m, shape.n, shape.k);
  }
  return times;
}

}  // namespace strata::costmodels
