// Small model configurations for the executor's tests: fast enough for the sanitizers' Debug build.
#pragma once

#include <cstdint>

#include "strata/schemas/model_config.h"
#include "strata/schemas/presets.h"

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

// A small gpt whose sizes nothing divides evenly: layers of odd size (every ZeRO bucket is padded
// for dp 2, 3 and 4), 4 heads of 9, MLP 99 and a vocabulary of 257 rows, sequences up to 32.
inline schemas::ModelConfig odd_gpt(std::int64_t layers = 2, bool tied_embeddings = false) {
  schemas::ModelConfig model = schemas::model_preset("gpt-tiny");
  model.name = "gpt-odd";
  model.num_layers = layers;
  model.hidden_size = 36;
  model.num_attention_heads = 4;
  model.num_kv_heads = 4;
  model.head_dim = 9;
  model.ffn_hidden_size = 99;
  model.vocab_size = 257;
  model.max_seq_length = 32;
  model.tied_embeddings = tied_embeddings;
  return model;
}

}  // namespace strata::executor::testing
