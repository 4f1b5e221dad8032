#include "strata/executor/model/multi_token_prediction.h"

#include <fmt/format.h>

#include <algorithm>

#include "norm_dispatch.h"
#include "strata/executor/check.h"
#include "strata/executor/ops/column_block.h"
#include "strata/executor/ops/linear.h"

namespace strata::executor {

void stack_future_labels(const Tensor& targets, std::int64_t depths, Tensor& labels) {
  STRATA_CHECK(targets.dim() == 2 && targets.scalar_type() == ScalarType::int32 &&
                   targets.device() == Device::cpu,
               "targets {} must be int32 [batch, seq] in host memory",
               shape_to_string(targets.shape()));
  const std::int64_t batch = targets.size(0), seq = targets.size(1);
  STRATA_CHECK(labels.shape() == Shape({(1 + depths) * batch, seq}) &&
                   labels.scalar_type() == ScalarType::int32 && labels.device() == Device::cpu,
               "labels {} for {} depths of targets {}", shape_to_string(labels.shape()), depths,
               shape_to_string(targets.shape()));
  const std::int32_t* from = targets.data<std::int32_t>();
  std::int32_t* to = labels.data<std::int32_t>();
  for (std::int64_t depth = 0; depth <= depths; ++depth) {
    for (std::int64_t b = 0; b < batch; ++b) {
      std::int32_t* row = to + (depth * batch + b) * seq;
      const std::int32_t* source = from + b * seq;
      for (std::int64_t i = 0; i < seq; ++i) row[i] = i + depth < seq ? source[i + depth] : 0;
    }
  }
}

std::vector<RowRange> unlabelled_rows(const ContextParallelism& cp, std::int64_t batch,
                                      std::int64_t local_seq, std::int64_t depth) {
  std::vector<RowRange> rows;
  if (depth == 0) return rows;
  const std::int64_t limit = local_seq * cp.size() - depth;  // first position without a label
  for (const TokenRun& run : cp.token_runs(0, batch * local_seq, local_seq)) {
    const std::int64_t first = std::max(run.position, limit);
    const std::int64_t end = run.position + run.count;
    if (first < end) rows.push_back({run.row + (first - run.position), end - first});
  }
  return rows;
}

namespace {

ParameterEntry* optional_entry(ParameterStore& store, const std::string& name) {
  return store.contains(name) ? &store.entry(name) : nullptr;
}

}  // namespace

MtpModule::MtpModule(const schemas::ModelConfig& model, std::int64_t module, ParameterStore& store)
    : model_(model), layer_(model.num_layers + module - 1), unit_(model.num_layers + 1 + module) {
  const auto name = [&](const char* part) { return fmt::format("layers.{}.{}", layer_, part); };
  enorm_weight_ = &store.entry(name("enorm.weight"));
  enorm_bias_ = optional_entry(store, name("enorm.bias"));
  hnorm_weight_ = &store.entry(name("hnorm.weight"));
  hnorm_bias_ = optional_entry(store, name("hnorm.bias"));
  eh_proj_ = &store.entry(name("eh_proj.weight"));
  final_norm_weight_ = &store.entry(name("final_norm.weight"));
  final_norm_bias_ = optional_entry(store, name("final_norm.bias"));
}

void MtpModule::input_forward(const Tensor& embedded, const Tensor& hidden, MtpInputActivations& a,
                              Tensor& x) const {
  const std::int64_t tokens = embedded.size(0), width = model_.hidden_size;
  const ScalarType statistics = detail::statistics_type(embedded.scalar_type());
  if (a.combined.numel() != 2 * tokens * width) {
    a.embedded_norm = Tensor::zeros({tokens, width}, embedded.scalar_type(), embedded.device());
    a.hidden_norm = Tensor::zeros({tokens, width}, embedded.scalar_type(), embedded.device());
    a.combined = Tensor::zeros({tokens, 2 * width}, embedded.scalar_type(), embedded.device());
    for (Tensor* statistic : {&a.embedded_mean, &a.embedded_rstd, &a.hidden_mean, &a.hidden_rstd}) {
      *statistic = Tensor::zeros({tokens}, statistics, embedded.device());
    }
  }
  detail::norm_forward(model_.norm, embedded, enorm_weight_->compute,
                       enorm_bias_ ? &enorm_bias_->compute : nullptr, model_.norm_epsilon,
                       a.embedded_norm, a.embedded_mean, a.embedded_rstd);
  detail::norm_forward(model_.norm, hidden, hnorm_weight_->compute,
                       hnorm_bias_ ? &hnorm_bias_->compute : nullptr, model_.norm_epsilon,
                       a.hidden_norm, a.hidden_mean, a.hidden_rstd);
  write_column_block(a.embedded_norm, 2 * width, 0, a.combined);
  write_column_block(a.hidden_norm, 2 * width, width, a.combined);
  linear_forward(a.combined, eh_proj_->compute, nullptr, x);
}

void MtpModule::input_backward(const Tensor& dx, const Tensor& embedded, const Tensor& hidden,
                               const MtpInputActivations& a, Tensor& d_combined, Tensor& d_norm,
                               Tensor& d_embedded, Tensor& d_hidden) const {
  const std::int64_t width = model_.hidden_size;
  d_combined.fill_zero();
  linear_backward(dx, a.combined, eh_proj_->compute, &d_combined, eh_proj_->gradient, nullptr);
  // The norms' output gradients: the two column blocks of d_combined, one after the other.
  copy_column_block(d_combined, 2 * width, 0, d_norm);
  detail::norm_backward(model_.norm, d_norm, embedded, enorm_weight_->compute, a.embedded_mean,
                        a.embedded_rstd, d_embedded, enorm_weight_->gradient,
                        enorm_bias_ ? &enorm_bias_->gradient : nullptr);
  copy_column_block(d_combined, 2 * width, width, d_norm);
  detail::norm_backward(model_.norm, d_norm, hidden, hnorm_weight_->compute, a.hidden_mean,
                        a.hidden_rstd, d_hidden, hnorm_weight_->gradient,
                        hnorm_bias_ ? &hnorm_bias_->gradient : nullptr);
}

}  // namespace strata::executor
