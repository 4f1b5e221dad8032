#include "strata/executor/ops/rotary.h"

#include <cmath>
#include <vector>

#include "cuda/rotary.cuh"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

// direction +1 rotates forward, −1 applies the inverse (= transpose) rotation.
void rotate(const char* op, Tensor& x, std::int64_t num_heads, std::int64_t head_dim, double theta,
            int direction, std::int64_t first_position) {
  STRATA_CHECK(head_dim % 2 == 0 && x.dim() == 3 && num_heads * head_dim <= x.size(2),
               "{}: {} heads of {} in {}", op, num_heads, head_dim, shape_to_string(x.shape()));
  if (on_cuda(op, {&x})) {
    // Context parallelism (positions that start elsewhere) runs on the CPU backend only.
    STRATA_CHECK(first_position == 0, "{}: positions from {} on the GPU", op, first_position);
    const ScalarType type = check_cuda_types(op, {&x}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_rotary(x.raw(), x.size(0), x.size(1), x.size(2), num_heads, head_dim, theta,
                          direction, type);
    }
    return;
  }
  check_cpu_same_type(op, {&x});
  const std::int64_t seq = x.size(1);
  const std::int64_t width = x.size(2);
  const std::int64_t half = head_dim / 2;
  // Angles in float64, then rounded once to the tensor's type.
  std::vector<double> cosines(static_cast<std::size_t>(seq * half));
  std::vector<double> sines(cosines.size());
  for (std::int64_t t = 0; t < seq; ++t) {
    for (std::int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(first_position + t) *
          std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      cosines[static_cast<std::size_t>(t * half + i)] = std::cos(angle);
      sines[static_cast<std::size_t>(t * half + i)] = direction * std::sin(angle);
    }
  }
  dispatch_floating(x.scalar_type(), op, [&]<class T>() {
    T* data = x.data<T>();
    for (std::int64_t b = 0; b < x.size(0); ++b) {
      for (std::int64_t t = 0; t < seq; ++t) {
        T* row = data + (b * seq + t) * width;
        for (std::int64_t head = 0; head < num_heads; ++head) {
          T* first = row + head * head_dim;
          T* second = first + half;
          for (std::int64_t i = 0; i < half; ++i) {
            const T c = static_cast<T>(cosines[static_cast<std::size_t>(t * half + i)]);
            const T s = static_cast<T>(sines[static_cast<std::size_t>(t * half + i)]);
            const T a = first[i];
            const T b_value = second[i];
            first[i] = a * c - b_value * s;
            second[i] = b_value * c + a * s;
          }
        }
      }
    }
  });
}

}  // namespace

void rotary_forward(Tensor& x, std::int64_t num_heads, std::int64_t head_dim, double theta,
                    std::int64_t first_position) {
  rotate("rotary_forward", x, num_heads, head_dim, theta, +1, first_position);
}

void rotary_backward(Tensor& dx, std::int64_t num_heads, std::int64_t head_dim, double theta,
                     std::int64_t first_position) {
  rotate("rotary_backward", dx, num_heads, head_dim, theta, -1, first_position);
}

}  // namespace strata::executor
