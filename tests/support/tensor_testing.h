// Helpers for the executor's op tests: random tensors, weighted sums as scalar losses, and the
// central finite-difference check every op's backward is held to.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor::testing {

inline Tensor random_tensor(const Shape& shape, ScalarType type, std::uint32_t seed,
                            double scale = 1.0) {
  Tensor tensor = Tensor::zeros(shape, type);
  std::mt19937 generator(seed);
  std::normal_distribution<double> normal(0.0, scale);
  for (std::int64_t i = 0; i < tensor.numel(); ++i) {
    if (type == ScalarType::float64) {
      tensor.data<double>()[i] = normal(generator);
    } else {
      tensor.data<float>()[i] = static_cast<float>(normal(generator));
    }
  }
  return tensor;
}

// An int32 vector of token ids or targets.
inline Tensor int32_tensor(std::initializer_list<std::int32_t> values) {
  Tensor tensor = Tensor::zeros({static_cast<std::int64_t>(values.size())}, ScalarType::int32);
  std::int64_t i = 0;
  for (std::int32_t value : values) tensor.data<std::int32_t>()[i++] = value;
  return tensor;
}

inline double element(const Tensor& tensor, std::int64_t i) {
  return tensor.scalar_type() == ScalarType::float64 ? tensor.data<double>()[i]
                                                     : tensor.data<float>()[i];
}

inline Tensor to_float64(const Tensor& tensor) {
  Tensor result = Tensor::zeros(tensor.shape(), ScalarType::float64);
  for (std::int64_t i = 0; i < tensor.numel(); ++i) result.data<double>()[i] = element(tensor, i);
  return result;
}

// Σ weights·y: with dy = weights, backward must give this loss's gradient.
inline double weighted_sum(const Tensor& y, const Tensor& weights) {
  double sum = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) sum += element(y, i) * element(weights, i);
  return sum;
}

// Compares `analytic` (the gradient of loss() with respect to `input`, float64) with central
// differences (loss(x + h) − loss(x − h)) / 2h, h = 1e-6, element by element:
// |analytic − numeric| ≤ tolerance·(1 + |numeric|). Truncation error is O(h²) ≈ 1e-12 and
// rounding O(ε/h) ≈ 1e-10 relative, so 1e-6 leaves room and still catches any wrong term.
inline void expect_gradient_matches(Tensor& input, const Tensor& analytic,
                                    const std::function<double()>& loss, const char* what,
                                    double tolerance = 1e-6) {
  ASSERT_EQ(input.scalar_type(), ScalarType::float64);
  ASSERT_EQ(input.numel(), analytic.numel()) << what;
  constexpr double kStep = 1e-6;
  double* x = input.data<double>();
  for (std::int64_t i = 0; i < input.numel(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double above = loss();
    x[i] = saved - kStep;
    const double below = loss();
    x[i] = saved;
    const double numeric = (above - below) / (2 * kStep);
    const double got = analytic.data<double>()[i];
    ASSERT_LE(std::abs(got - numeric), tolerance * (1 + std::abs(numeric)))
        << what << " element " << i << ": analytic " << got << " numeric " << numeric;
  }
}

// max |a − b| / max(1, |b|) over elements.
inline double max_relative_difference(const Tensor& a, const Tensor& b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double reference = element(b, i);
    worst =
        std::max(worst, std::abs(element(a, i) - reference) / std::max(1.0, std::abs(reference)));
  }
  return worst;
}

}  // namespace strata::executor::testing
