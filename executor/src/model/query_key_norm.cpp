#include "strata/executor/model/query_key_norm.h"

#include <fmt/format.h>

#include "norm_dispatch.h"
#include "strata/executor/ops/column_block.h"

namespace strata::executor {
namespace {

void resize(Tensor& tensor, const Shape& shape, ScalarType type, Device device) {
  if (tensor.shape() != shape || tensor.scalar_type() != type || tensor.device() != device) {
    tensor = Tensor::zeros(shape, type, device);
  }
}

}  // namespace

QueryKeyNorm::QueryKeyNorm(const schemas::ModelConfig& model, std::int64_t layer,
                           ParameterStore& store, const AttentionShape& local)
    : model_(model), local_(local) {
  const auto entries = [&](const char* kind, std::int64_t first_column, std::int64_t count) {
    const std::string prefix = fmt::format("layers.{}.attention.{}_norm", layer, kind);
    return Heads{&store.entry(prefix + ".weight"),
                 store.contains(prefix + ".bias") ? &store.entry(prefix + ".bias") : nullptr,
                 first_column, count};
  };
  queries_ = entries("q", 0, local.num_heads);
  keys_ = entries("k", local.num_heads * local.head_dim, local.num_kv_heads);
}

void QueryKeyNorm::forward(const Heads& heads, Tensor& qkv, Tensor& saved, Tensor& mean,
                           Tensor& rstd) const {
  const std::int64_t rows = qkv.numel() / local_.qkv_width() * heads.count;
  resize(saved, {rows, local_.head_dim}, qkv.scalar_type(), qkv.device());
  resize(mean, {rows}, detail::statistics_type(qkv.scalar_type()), qkv.device());
  resize(rstd, {rows}, detail::statistics_type(qkv.scalar_type()), qkv.device());
  copy_column_block(qkv, local_.qkv_width(), heads.first_column, saved);
  Tensor normalised = Tensor::zeros(saved.shape(), saved.scalar_type(), saved.device());
  detail::norm_forward(model_.norm, saved, heads.weight->compute,
                       heads.bias ? &heads.bias->compute : nullptr, model_.norm_epsilon, normalised,
                       mean, rstd);
  write_column_block(normalised, local_.qkv_width(), heads.first_column, qkv);
}

void QueryKeyNorm::backward(const Heads& heads, Tensor& d_qkv, const Tensor& saved,
                            const Tensor& mean, const Tensor& rstd) const {
  Tensor d_normalised = Tensor::zeros(saved.shape(), saved.scalar_type(), saved.device());
  copy_column_block(d_qkv, local_.qkv_width(), heads.first_column, d_normalised);
  Tensor d_saved = Tensor::zeros(saved.shape(), saved.scalar_type(), saved.device());
  detail::norm_backward(model_.norm, d_normalised, saved, heads.weight->compute, mean, rstd,
                        d_saved, heads.weight->gradient,
                        heads.bias ? &heads.bias->gradient : nullptr);
  write_column_block(d_saved, local_.qkv_width(), heads.first_column, d_qkv);
}

void QueryKeyNorm::forward(Tensor& qkv, QueryKeyNormActivations& a) const {
  forward(queries_, qkv, a.queries, a.query_mean, a.query_rstd);
  forward(keys_, qkv, a.keys, a.key_mean, a.key_rstd);
}

void QueryKeyNorm::backward(Tensor& d_qkv, const QueryKeyNormActivations& a) const {
  backward(queries_, d_qkv, a.queries, a.query_mean, a.query_rstd);
  backward(keys_, d_qkv, a.keys, a.key_mean, a.key_rstd);
}

}  // namespace strata::executor
