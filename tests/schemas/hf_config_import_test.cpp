#include "strata/schemas/hf_config_import.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "input_error_message.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::schemas {
namespace {

using strata::testing::fixture;

ModelConfig import_fixture(const std::string& name) {
  return load_model_file(fixture("hf/" + name));
}

std::string error_of(const nlohmann::json& config) {
  return strata::testing::input_error_message(
      [&] { import_hf_config(config, JsonLocation("config.json"), "m"); });
}

TEST(HfConfigImport, LlamaWithGroupedQueryAttention) {
  const ModelConfig model = import_fixture("llama-3.1-8b.json");
  EXPECT_EQ(model.architecture, Architecture::llama);
  EXPECT_EQ(model.num_layers, 32);
  EXPECT_EQ(model.num_kv_heads, 8);
  EXPECT_EQ(model.head_dim, 128);
  EXPECT_EQ(model.rope_theta, 500000.0);
  EXPECT_EQ(model.checkpoint_dtype, Dtype::bf16);
  EXPECT_FALSE(model.tied_embeddings);
  EXPECT_EQ(model.name, "llama-3.1-8b") << "no _name_or_path: named after the file";
}

TEST(HfConfigImport, NullKvHeadsMeansMultiHeadAttention) {
  const ModelConfig model = import_fixture("llama-2-7b.json");
  EXPECT_EQ(model.num_kv_heads, 32);
  EXPECT_EQ(model.name, "Llama-2-7b-hf") << "named after _name_or_path";
  EXPECT_EQ(model.checkpoint_dtype, Dtype::fp16);
}

TEST(HfConfigImport, ExplicitHeadDimAndNewDtypeKey) {
  const ModelConfig model = import_fixture("mistral-nemo-12b.json");
  EXPECT_EQ(model.head_dim, 128) << "not hidden/heads = 160";
  EXPECT_EQ(model.attention_width(), 4096);
  EXPECT_EQ(model.checkpoint_dtype, Dtype::bf16);
}

TEST(HfConfigImport, Qwen2BiasesQueryKeyValueOnly) {
  const ModelConfig model = import_fixture("qwen2-7b.json");
  EXPECT_TRUE(model.qkv_bias);
  EXPECT_FALSE(model.attention_output_bias);
  EXPECT_FALSE(model.mlp_bias);
  EXPECT_TRUE(import_fixture("qwen2-0.5b.json").tied_embeddings);
}

TEST(HfConfigImport, Gpt2NamesAndNullInner) {
  const ModelConfig model = import_fixture("gpt2.json");
  EXPECT_EQ(model.architecture, Architecture::gpt);
  EXPECT_EQ(model.hidden_size, 768);
  EXPECT_EQ(model.ffn_hidden_size, 3072) << "n_inner null means 4 × n_embd";
  EXPECT_EQ(model.max_seq_length, 1024);
  EXPECT_TRUE(model.tied_embeddings);
  EXPECT_DOUBLE_EQ(model.dropout, 0.1);
  EXPECT_EQ(model.name, "gpt2");
}

TEST(HfConfigImport, RefusesWhatItCannotRepresent) {
  EXPECT_EQ(error_of({{"architectures", {"FalconForCausalLM"}}}),
            "config.json: /architectures/0: \"FalconForCausalLM\" is not supported; supported: "
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel");
  nlohmann::json gelu_llama = read_json_file(fixture("hf/llama-3.1-8b.json"));
  gelu_llama["hidden_act"] = "gelu";
  EXPECT_EQ(error_of(gelu_llama),
            "config.json: /hidden_act: \"gelu\" is not supported: Strata's llama MLP is SwiGLU "
            "(\"silu\")");
  nlohmann::json missing = read_json_file(fixture("hf/llama-3.1-8b.json"));
  missing.erase("hidden_size");
  EXPECT_EQ(error_of(missing), "config.json: /hidden_size: required key is missing");
  nlohmann::json bad_kv = read_json_file(fixture("hf/llama-3.1-8b.json"));
  bad_kv["num_key_value_heads"] = 5;
  EXPECT_EQ(error_of(bad_kv),
            "config.json: /num_key_value_heads: 5 does not divide num_attention_heads=32");
  nlohmann::json bad_dtype = read_json_file(fixture("hf/gpt2-xl.json"));
  bad_dtype["torch_dtype"] = "int8";
  EXPECT_EQ(
      error_of(bad_dtype),
      "config.json: /torch_dtype: \"int8\" is not one of \"float32\", \"bfloat16\" or \"float16\"");
}

}  // namespace
}  // namespace strata::schemas
