// Small model configurations for the executor's tests: fast enough for the sanitizers' Debug build.
#pragma once

#include <cstdint>

#include "strata/schemas/model_config.h"

namespace strata::executor::testing {

// A 2-layer gpt of hidden 16 (2 heads of 8), MLP 64, sequences up to 8 tokens.
inline schemas::ModelConfig micro_gpt(std::int64_t vocab_size, double dropout = 0.0) {
  schemas::ModelConfig model = schemas::ModelConfig::defaults_for(schemas::Architecture::gpt);
  model.name = "micro";
  model.num_layers = 2;
  model.hidden_size = 16;
  model.ffn_hidden_size = 64;
  model.num_attention_heads = 2;
  model.num_kv_heads = 2;
  model.head_dim = 8;
  model.vocab_size = vocab_size;
  model.max_seq_length = 8;
  model.dropout = dropout;
  return model;
}

}  // namespace strata::executor::testing
