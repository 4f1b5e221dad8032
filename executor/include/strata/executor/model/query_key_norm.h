// QueryKeyNorm: the query/key norm of Qwen3 and OLMo 2 (Dehghani et al. 2023; Wortsman et al.
// 2023) — each head's query and key normalised over head_dim, the model's norm kind, with one gain
// (and bias) for all query heads and one for all key heads — applied in place to the fused qkv
// projection's rows after its bias and before rotary positions, as Hugging Face's Qwen3Attention
// does. Under tensor parallelism each rank normalises its own heads with the whole gains, so their
// gradients are partial sums over the tp group (the table marks them
// ParameterSpec::partial_over_tensor_parallel; the optimizer completes the sum). Used by
// TransformerLayer.
#pragma once

#include <cstdint>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/ops/causal_attention.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// What the norm's backward needs, per micro-batch: the heads before the norm, [tokens · heads,
// head_dim], and their statistics.
struct QueryKeyNormActivations {
  Tensor queries, query_mean, query_rstd;
  Tensor keys, key_mean, key_rstd;
};

class QueryKeyNorm {
 public:
  // `local`: this rank's heads of layer `layer`, whose gains `store` holds.
  QueryKeyNorm(const schemas::ModelConfig& model, std::int64_t layer, ParameterStore& store,
               const AttentionShape& local);

  // qkv [tokens, qkv_width]: its query and key columns normalised in place.
  void forward(Tensor& qkv, QueryKeyNormActivations& a) const;
  // d_qkv's query and key columns, the gradient of the normalised heads, become that of the heads
  // before the norm; the gains' gradients accumulate.
  void backward(Tensor& d_qkv, const QueryKeyNormActivations& a) const;

 private:
  struct Heads {
    ParameterEntry* weight = nullptr;
    ParameterEntry* bias = nullptr;
    std::int64_t first_column = 0;
    std::int64_t count = 0;
  };
  void forward(const Heads& heads, Tensor& qkv, Tensor& saved, Tensor& mean, Tensor& rstd) const;
  void backward(const Heads& heads, Tensor& d_qkv, const Tensor& saved, const Tensor& mean,
                const Tensor& rstd) const;

  const schemas::ModelConfig& model_;
  AttentionShape local_;
  Heads queries_, keys_;
};

}  // namespace strata::executor
