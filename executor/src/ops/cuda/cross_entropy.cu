#include "../../cuda/device_math.cuh"
#include "cross_entropy.cuh"

namespace strata::executor::cuda {
namespace {

constexpr int kThreads = 512;

// Folds x into a running (max, Σ exp(· − max)) pair.
__device__ __forceinline__ void online_add(float x, float& running_max, float& running_sum) {
  if (x > running_max) {
    running_sum = running_sum * __expf(running_max - x) + 1.0f;
    running_max = x;
  } else {
    running_sum += __expf(x - running_max);
  }
}

// Per row: max, Σ exp(x − max) and the target's logit (0 outside the shard). When `losses` is not
// null (the whole vocabulary), writes loss and log-sum-exp instead of the three statistics.
template <class T, int Width>
__global__ void cross_entropy_statistics_kernel(const T* logits, const std::int32_t* targets,
                                                std::int64_t vocab_start, std::int64_t columns,
                                                float* row_max_out, float* row_sum_out,
                                                float* target_out, float* losses,
                                                float* log_sum_exp) {
  __shared__ float scratch[32];
  const std::int64_t row = blockIdx.x;
  const T* values = logits + row * columns;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (std::int64_t c = threadIdx.x * Width; c < columns; c += kThreads * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(values + c);
#pragma unroll
    for (int k = 0; k < Width; ++k) online_add(to_float(v.value[k]), running_max, running_sum);
  }
  const float row_max = block_max(running_max, scratch);
  const float scaled =
      running_max == -INFINITY ? 0.0f : running_sum * __expf(running_max - row_max);
  const float row_sum = block_sum(scaled, scratch);
  if (threadIdx.x != 0) return;
  const std::int64_t local = targets[row] - vocab_start;
  const float target = local >= 0 && local < columns ? to_float(values[local]) : 0.0f;
  if (losses != nullptr) {
    const float lse = row_max + logf(row_sum);
    log_sum_exp[row] = lse;
    losses[row] = lse - target;
  } else {
    row_max_out[row] = row_max;
    row_sum_out[row] = row_sum;
    target_out[row] = target;
  }
}

template <class T, int Width>
__global__ void cross_entropy_backward_kernel(const T* logits, const std::int32_t* targets,
                                              const float* log_sum_exp, float scale, T* dlogits,
                                              std::int64_t vocab_start, std::int64_t columns) {
  const std::int64_t row = blockIdx.x;
  const T* values = logits + row * columns;
  T* gradients = dlogits + row * columns;
  const float lse = log_sum_exp[row];
  const std::int64_t local = targets[row] - vocab_start;
  for (std::int64_t c = threadIdx.x * Width; c < columns; c += kThreads * Width) {
    const Vector<T, Width> v = load_vector<T, Width>(values + c);
    Vector<T, Width> out;
#pragma unroll
    for (int k = 0; k < Width; ++k) {
      const float one_hot = c + k == local ? 1.0f : 0.0f;
      out.value[k] = from_float<T>(scale * (__expf(to_float(v.value[k]) - lse) - one_hot));
    }
    store_vector(gradients + c, out);
  }
}

template <class T, class Launch>
void launch_rows(std::int64_t columns, std::initializer_list<const void*> pointers,
                 const Launch& launch) {
  if (rows_vectorizable<T>(columns, pointers)) {
    launch.template operator()<kVectorWidth<T>>();
  } else {
    launch.template operator()<1>();
  }
  STRATA_CUDA_CHECK_LAUNCH();
}

void launch_statistics(const void* logits, const std::int32_t* targets, std::int64_t vocab_start,
                       float* row_max, float* row_sum, float* target, float* losses,
                       float* log_sum_exp, std::int64_t rows, std::int64_t columns,
                       ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "cross_entropy", [&]<class T>() {
    launch_rows<T>(columns, {logits}, [&]<int Width>() {
      cross_entropy_statistics_kernel<T, Width>
          <<<static_cast<unsigned>(rows), kThreads, 0, current_stream()>>>(
              static_cast<const T*>(logits), targets, vocab_start, columns, row_max, row_sum,
              target, losses, log_sum_exp);
    });
  });
}

__global__ void rescale_shard_sums_kernel(const float* row_max, const float* global_max,
                                          float* row_sum_exp, std::int64_t rows) {
  for (std::int64_t n = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; n < rows;
       n += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    row_sum_exp[n] *= expf(row_max[n] - global_max[n]);
  }
}

__global__ void shard_losses_kernel(const float* global_max, const float* sum_exp,
                                    const float* target_logit, float* losses, float* log_sum_exp,
                                    std::int64_t rows) {
  for (std::int64_t n = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; n < rows;
       n += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float lse = global_max[n] + logf(sum_exp[n]);
    log_sum_exp[n] = lse;
    losses[n] = lse - target_logit[n];
  }
}

}  // namespace

void launch_cross_entropy_forward(const void* logits, const std::int32_t* targets, float* losses,
                                  float* log_sum_exp, std::int64_t rows, std::int64_t vocab,
                                  ScalarType type) {
  launch_statistics(logits, targets, 0, nullptr, nullptr, nullptr, losses, log_sum_exp, rows, vocab,
                    type);
}

void launch_cross_entropy_shard_statistics(const void* logits, const std::int32_t* targets,
                                           std::int64_t vocab_start, float* row_max,
                                           float* row_sum_exp, float* target_logit,
                                           std::int64_t rows, std::int64_t columns,
                                           ScalarType type) {
  launch_statistics(logits, targets, vocab_start, row_max, row_sum_exp, target_logit, nullptr,
                    nullptr, rows, columns, type);
}

void launch_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                   const float* log_sum_exp, double loss_scale, void* dlogits,
                                   std::int64_t vocab_start, std::int64_t rows,
                                   std::int64_t columns, ScalarType type) {
  if (rows == 0) return;
  dispatch_cuda_type(type, "cross_entropy_backward", [&]<class T>() {
    launch_rows<T>(columns, {logits, dlogits}, [&]<int Width>() {
      cross_entropy_backward_kernel<T, Width>
          <<<static_cast<unsigned>(rows), kThreads, 0, current_stream()>>>(
              static_cast<const T*>(logits), targets, log_sum_exp, static_cast<float>(loss_scale),
              static_cast<T*>(dlogits), vocab_start, columns);
    });
  });
}

void launch_cross_entropy_rescale_shard_sums(const float* row_max, const float* global_max,
                                             float* row_sum_exp, std::int64_t rows) {
  if (rows == 0) return;
  rescale_shard_sums_kernel<<<grid_blocks(rows, 256), 256, 0, current_stream()>>>(
      row_max, global_max, row_sum_exp, rows);
  STRATA_CUDA_CHECK_LAUNCH();
}

void launch_cross_entropy_shard_losses(const float* global_max, const float* sum_exp,
                                       const float* target_logit, float* losses, float* log_sum_exp,
                                       std::int64_t rows) {
  if (rows == 0) return;
  shard_losses_kernel<<<grid_blocks(rows, 256), 256, 0, current_stream()>>>(
      global_max, sum_exp, target_logit, losses, log_sum_exp, rows);
  STRATA_CUDA_CHECK_LAUNCH();
}

}  // namespace strata::executor::cuda
