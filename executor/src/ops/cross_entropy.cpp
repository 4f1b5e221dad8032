#include "strata/executor/ops/cross_entropy.h"

#include <cmath>

#include "cuda/cross_entropy.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check_shapes(const char* op, const Tensor& logits, const Tensor& targets,
                  std::initializer_list<const Tensor*> per_row) {
  const std::int64_t columns = logits.size(-1);
  STRATA_CHECK(targets.scalar_type() == ScalarType::int32, "{}: targets must be int32", op);
  STRATA_CHECK(logits.numel() == targets.numel() * columns, "{}: logits {} for {} targets", op,
               shape_to_string(logits.shape()), targets.numel());
  for (const Tensor* tensor : per_row) {
    STRATA_CHECK(tensor->numel() == targets.numel(), "{}: {} values for {} rows", op,
                 tensor->numel(), targets.numel());
  }
}

// On the CPU: targets are vocabulary indices, below `vocabulary` when the op sees all of it
// (a shard's op does not know the whole vocabulary's size: 0).
void check_targets(const char* op, const Tensor& targets, std::int64_t vocabulary) {
  const std::int32_t* target = targets.data<std::int32_t>();
  for (std::int64_t n = 0; n < targets.numel(); ++n) {
    STRATA_CHECK(target[n] >= 0 && (vocabulary == 0 || target[n] < vocabulary),
                 "{}: target {} outside vocabulary {}", op, target[n], vocabulary);
  }
}

template <class T, class Row>
void row_statistics(const Row& row, T& row_max, T& row_sum_exp) {
  row_max = row.maxCoeff();
  row_sum_exp = (row.array() - row_max).exp().sum();
}

}  // namespace

void cross_entropy_forward(const Tensor& logits, const Tensor& targets, Tensor& losses,
                           Tensor& log_sum_exp) {
  check_shapes("cross_entropy_forward", logits, targets, {&losses, &log_sum_exp});
  const std::int64_t vocab = logits.size(-1);
  if (on_cuda("cross_entropy_forward", {&logits, &targets, &losses, &log_sum_exp})) {
    const ScalarType type =
        check_cuda_types("cross_entropy_forward", {&logits}, {&losses, &log_sum_exp});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_cross_entropy_forward(logits.raw(), targets.data<std::int32_t>(),
                                         losses.data<float>(), log_sum_exp.data<float>(),
                                         targets.numel(), vocab, type);
    }
    return;
  }
  check_cpu_same_type("cross_entropy_forward", {&logits, &losses, &log_sum_exp});
  check_targets("cross_entropy_forward", targets, vocab);
  dispatch_floating(logits.scalar_type(), "cross_entropy_forward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(logits, vocab);
    const std::int32_t* target = targets.data<std::int32_t>();
    T* loss = losses.data<T>();
    T* lse = log_sum_exp.data<T>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      T row_max, row_sum_exp;
      row_statistics<T>(rows.row(n), row_max, row_sum_exp);
      lse[n] = row_max + std::log(row_sum_exp);
      loss[n] = lse[n] - rows(n, target[n]);
    }
  });
}

void cross_entropy_shard_statistics(const Tensor& logits, const Tensor& targets,
                                    std::int64_t vocab_start, Tensor& row_max, Tensor& row_sum_exp,
                                    Tensor& target_logit) {
  check_shapes("cross_entropy_shard_statistics", logits, targets,
               {&row_max, &row_sum_exp, &target_logit});
  const std::int64_t columns = logits.size(-1);
  if (on_cuda("cross_entropy_shard_statistics",
              {&logits, &targets, &row_max, &row_sum_exp, &target_logit})) {
    const ScalarType type = check_cuda_types("cross_entropy_shard_statistics", {&logits},
                                             {&row_max, &row_sum_exp, &target_logit});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_cross_entropy_shard_statistics(
          logits.raw(), targets.data<std::int32_t>(), vocab_start, row_max.data<float>(),
          row_sum_exp.data<float>(), target_logit.data<float>(), targets.numel(), columns, type);
    }
    return;
  }
  check_cpu_same_type("cross_entropy_shard_statistics",
                      {&logits, &row_max, &row_sum_exp, &target_logit});
  check_targets("cross_entropy_shard_statistics", targets, 0);
  dispatch_floating(logits.scalar_type(), "cross_entropy_shard_statistics", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(logits, columns);
    const std::int32_t* target = targets.data<std::int32_t>();
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      row_statistics<T>(rows.row(n), row_max.data<T>()[n], row_sum_exp.data<T>()[n]);
      const std::int64_t local = target[n] - vocab_start;
      target_logit.data<T>()[n] = local >= 0 && local < columns ? rows(n, local) : T(0);
    }
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& targets, const Tensor& log_sum_exp,
                            double loss_scale, Tensor& dlogits, std::int64_t vocab_start) {
  check_shapes("cross_entropy_backward", logits, targets, {&log_sum_exp});
  check_same_numel("cross_entropy_backward", logits, dlogits);
  const std::int64_t columns = logits.size(-1);
  if (on_cuda("cross_entropy_backward", {&logits, &targets, &log_sum_exp, &dlogits})) {
    const ScalarType type =
        check_cuda_types("cross_entropy_backward", {&logits, &dlogits}, {&log_sum_exp});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_cross_entropy_backward(logits.raw(), targets.data<std::int32_t>(),
                                          log_sum_exp.data<float>(), loss_scale, dlogits.raw(),
                                          vocab_start, targets.numel(), columns, type);
    }
    return;
  }
  check_cpu_same_type("cross_entropy_backward", {&logits, &log_sum_exp, &dlogits});
  check_targets("cross_entropy_backward", targets, 0);
  dispatch_floating(logits.scalar_type(), "cross_entropy_backward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(logits, columns);
    auto grad = cpu::as_matrix<T>(dlogits, columns);
    const std::int32_t* target = targets.data<std::int32_t>();
    const T* lse = log_sum_exp.data<T>();
    const T scale = static_cast<T>(loss_scale);
    for (std::int64_t n = 0; n < rows.rows(); ++n) {
      grad.row(n).array() = scale * (rows.row(n).array() - lse[n]).exp();
      const std::int64_t local = target[n] - vocab_start;
      if (local >= 0 && local < columns) grad(n, local) -= scale;
    }
  });
}

void cross_entropy_rescale_shard_sums(const Tensor& row_max, const Tensor& global_max,
                                      Tensor& row_sum_exp) {
  check_same_numel("cross_entropy_rescale_shard_sums", row_max, global_max);
  check_same_numel("cross_entropy_rescale_shard_sums", row_max, row_sum_exp);
  if (on_cuda("cross_entropy_rescale_shard_sums", {&row_max, &global_max, &row_sum_exp})) {
    check_cuda_types("cross_entropy_rescale_shard_sums", {&row_max},
                     {&row_max, &global_max, &row_sum_exp});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_cross_entropy_rescale_shard_sums(row_max.data<float>(), global_max.data<float>(),
                                                    row_sum_exp.data<float>(), row_max.numel());
    }
    return;
  }
  check_cpu_same_type("cross_entropy_rescale_shard_sums", {&row_max, &global_max, &row_sum_exp});
  dispatch_floating(row_max.scalar_type(), "cross_entropy_rescale_shard_sums", [&]<class T>() {
    cpu::as_vector<T>(row_sum_exp).array() *=
        (cpu::as_vector<T>(row_max).array() - cpu::as_vector<T>(global_max).array()).exp();
  });
}

void cross_entropy_shard_losses(const Tensor& global_max, const Tensor& sum_exp,
                                const Tensor& target_logit, Tensor& losses, Tensor& log_sum_exp) {
  for (const Tensor* tensor : {&sum_exp, &target_logit, static_cast<const Tensor*>(&losses),
                               static_cast<const Tensor*>(&log_sum_exp)}) {
    check_same_numel("cross_entropy_shard_losses", global_max, *tensor);
  }
  if (on_cuda("cross_entropy_shard_losses",
              {&global_max, &sum_exp, &target_logit, &losses, &log_sum_exp})) {
    check_cuda_types("cross_entropy_shard_losses", {&global_max},
                     {&global_max, &sum_exp, &target_logit, &losses, &log_sum_exp});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_cross_entropy_shard_losses(global_max.data<float>(), sum_exp.data<float>(),
                                              target_logit.data<float>(), losses.data<float>(),
                                              log_sum_exp.data<float>(), global_max.numel());
    }
    return;
  }
  check_cpu_same_type("cross_entropy_shard_losses",
                      {&global_max, &sum_exp, &target_logit, &losses, &log_sum_exp});
  dispatch_floating(global_max.scalar_type(), "cross_entropy_shard_losses", [&]<class T>() {
    auto lse = cpu::as_vector<T>(log_sum_exp);
    lse.array() = cpu::as_vector<T>(global_max).array() + cpu::as_vector<T>(sum_exp).array().log();
    cpu::as_vector<T>(losses) = lse - cpu::as_vector<T>(target_logit);
  });
}

}  // namespace strata::executor
