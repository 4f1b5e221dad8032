#include "strata/executor/ops/cross_entropy.h"

#include <cmath>

#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check_targets(const char* op, const Tensor& logits, const Tensor& targets) {
  const std::int64_t vocab = logits.size(-1);
  STRATA_CHECK(logits.numel() == targets.numel() * vocab, "{}: logits {} for {} targets", op,
               shape_to_string(logits.shape()), targets.numel());
  const std::int32_t* target = targets.data<std::int32_t>();
  for (std::int64_t n = 0; n < targets.numel(); ++n) {
    STRATA_CHECK(target[n] >= 0 && target[n] < vocab, "{}: target {} outside vocabulary {}", op,
                 target[n], vocab);
  }
}

template <class T, class Row>
T log_sum_exp(const Row& row) {
  const T row_max = row.maxCoeff();
  return row_max + std::log((row.array() - row_max).exp().sum());
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses) {
  check_cpu_same_type("cross_entropy_forward", {&logits, &losses});
  check_targets("cross_entropy_forward", logits, targets);
  const std::int64_t vocab = logits.size(-1);
  dispatch_floating(logits.scalar_type(), "cross_entropy_forward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(logits, vocab);
    const std::int32_t* target = targets.data<std::int32_t>();
    T* loss = losses.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      loss[n] = log_sum_exp<T>(rows.row(n)) - rows(n, target[n]);
    }
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, double loss_scale,
                            Tensor& dlogits) {
  check_cpu_same_type("cross_entropy_backward", {&logits, &dlogits});
  check_targets("cross_entropy_backward", logits, targets);
  check_same_numel("cross_entropy_backward", logits, dlogits);
  const std::int64_t vocab = logits.size(-1);
  dispatch_floating(logits.scalar_type(), "cross_entropy_backward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(logits, vocab);
    auto grad = cpu::as_matrix<T>(dlogits, vocab);
    const std::int32_t* target = targets.data<std::int32_t>();
    const T scale = static_cast<T>(loss_scale);
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      const T lse = log_sum_exp<T>(rows.row(n));
      grad.row(n).array() += scale * (rows.row(n).array() - lse).exp();
      grad(n, target[n]) -= scale;
    }
  });
}

}  // namespace strata::executor
