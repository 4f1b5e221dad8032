#include "strata/schemas/hf_config_import.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "input_error_message.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/presets.h"

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
            "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
            "MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, DeepseekV3ForCausalLM, "
            "GptOssForCausalLM, GPT2LMHeadModel");
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

TEST(HfConfigImport, MixtralRoutesEveryLayerToTwoOfEightExperts) {
  const ModelConfig model = import_fixture("mixtral-8x7b-v0.1.json");
  ASSERT_TRUE(model.moe);
  EXPECT_EQ(model.moe->num_experts, 8);
  EXPECT_EQ(model.moe->experts_per_token, 2);
  EXPECT_EQ(model.moe->expert_ffn_hidden_size, 14336);
  EXPECT_EQ(model.moe->num_moe_layers(model.num_layers), 32);
  EXPECT_EQ(model.moe->router.score_function, RouterScoreFunction::softmax);
  EXPECT_EQ(model.moe->router.aux_loss_coefficient, 0.02);
  EXPECT_FALSE(model.mla);
}

TEST(HfConfigImport, QwenMoeSharedExpertAndQwen3QueryKeyNorms) {
  const ModelConfig qwen15 = import_fixture("qwen1.5-moe-a2.7b.json");
  ASSERT_TRUE(qwen15.moe);
  EXPECT_EQ(qwen15.moe->num_experts, 60);
  EXPECT_EQ(qwen15.moe->expert_ffn_hidden_size, 1408);
  EXPECT_EQ(qwen15.moe->num_shared_experts, 1);
  EXPECT_EQ(qwen15.moe->shared_expert_ffn_hidden_size, 5632);
  EXPECT_TRUE(qwen15.moe->shared_expert_gate);
  EXPECT_FALSE(qwen15.moe->router.normalize_top_k);
  EXPECT_TRUE(qwen15.qkv_bias) << "Qwen2-MoE biases q, k and v as Qwen2 does";
  EXPECT_FALSE(qwen15.qk_norm);

  const ModelConfig qwen3 = import_fixture("qwen3-30b-a3b.json");
  EXPECT_TRUE(qwen3.qk_norm);
  EXPECT_FALSE(qwen3.qkv_bias);
  EXPECT_EQ(qwen3.head_dim, 128);
  EXPECT_EQ(qwen3.moe->num_shared_experts, 0);
  EXPECT_TRUE(qwen3.moe->router.normalize_top_k);

  nlohmann::json every_other = read_json_file(fixture("hf/qwen3-30b-a3b.json"));
  every_other["decoder_sparse_step"] = 2;
  const ModelConfig sparse_step = import_hf_config(every_other, JsonLocation("config.json"), "m");
  EXPECT_EQ(sparse_step.moe->num_moe_layers(48), 24);
  EXPECT_TRUE(sparse_step.moe->is_moe_layer(1)) << "transformers: (i + 1) % step == 0";
  EXPECT_FALSE(sparse_step.moe->is_moe_layer(0));
}

TEST(HfConfigImport, DeepSeekV3LatentAttentionDenseLayersAndGroupedSigmoidRouting) {
  const ModelConfig model = import_fixture("deepseek-v3.json");
  ASSERT_TRUE(model.mla);
  EXPECT_EQ(model.mla->q_lora_rank, 1536);
  EXPECT_EQ(model.mla->kv_lora_rank, 512);
  EXPECT_EQ(model.head_dim, 192) << "qk_nope_head_dim + qk_rope_head_dim";
  ASSERT_TRUE(model.moe);
  EXPECT_EQ(model.moe->first_dense_layers, 3);
  EXPECT_EQ(model.moe->num_moe_layers(model.num_layers), 58);
  EXPECT_EQ(model.moe->num_shared_experts, 1);
  EXPECT_EQ(model.moe->router.score_function, RouterScoreFunction::sigmoid);
  EXPECT_EQ(model.moe->router.expert_groups, 8);
  EXPECT_EQ(model.moe->router.groups_per_token, 4);
  EXPECT_TRUE(model.moe->router.expert_bias) << "topk_method noaux_tc";
  EXPECT_EQ(model.moe->router.scaling_factor, 2.5);
  EXPECT_EQ(model.ffn_hidden_size, 18432) << "the dense layers' width";
  EXPECT_EQ(model.checkpoint_dtype, Dtype::fp8) << "quantization_config names fp8 weights";
  ASSERT_TRUE(model.mtp) << "num_nextn_predict_layers: 1";
  EXPECT_EQ(model.mtp->num_modules, 1);
  EXPECT_EQ(model.mtp->loss_weight, 0.1) << "the config has no loss weight: Megatron-Core's";
}

// Kimi K2 publishes DeepSeek-V3's architecture under its own model_type: read by the architecture,
// equal to the kimi-k2 preset but for the names.
TEST(HfConfigImport, KimiK2IsDeepSeekV3sArchitectureAtItsOwnSizes) {
  ModelConfig model = import_fixture("kimi-k2.json");
  ASSERT_TRUE(model.mla && model.moe);
  EXPECT_FALSE(model.mtp) << "num_nextn_predict_layers: 0";
  EXPECT_EQ(model.moe->num_experts, 384);
  EXPECT_EQ(model.moe->router.expert_groups, 1);
  EXPECT_TRUE(model.moe->router.expert_bias);
  ModelConfig preset = model_preset("kimi-k2");
  model.name = preset.name;
  model.description = preset.description;
  EXPECT_EQ(model, preset);
}

// GPT-OSS: windows on alternate layers (windowed first), sinks, the clamped SwiGLU, biases on
// attention, router and experts; equal to its preset but for the names.
TEST(HfConfigImport, GptOssAlternatesWindowsAndHasSinksAndClampedExperts) {
  for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
    ModelConfig model = import_fixture(std::string(name) + ".json");
    ASSERT_TRUE(model.sliding_window && model.moe) << name;
    EXPECT_EQ(model.sliding_window->size, 128);
    EXPECT_EQ(model.attention_window(0), 128);
    EXPECT_EQ(model.attention_window(1), 0);
    EXPECT_EQ(model.mlp_activation, MlpActivation::clamped_swiglu);
    EXPECT_TRUE(model.attention_sinks && model.mlp_bias && model.moe->router.logit_bias);
    const ModelConfig preset = model_preset(name);
    model.description = preset.description;
    EXPECT_EQ(model, preset) << name;
  }
}

// Windows come from "layer_types" when a config has them, else by its family's rule (Mistral:
// every layer when sliding_window is set); patterns the format cannot name are refused.
TEST(HfConfigImport, SlidingWindowsByLayerTypesOrFamily) {
  const ModelConfig mistral = import_fixture("mistral-7b-v0.1.json");
  ASSERT_TRUE(mistral.sliding_window);
  EXPECT_EQ(mistral.sliding_window->size, 4096);
  EXPECT_EQ(mistral.sliding_window->full_attention_interval, 0);
  EXPECT_FALSE(import_fixture("mixtral-8x7b-v0.1.json").sliding_window) << "sliding_window null";
  EXPECT_FALSE(import_fixture("qwen2-7b.json").sliding_window) << "use_sliding_window false";

  nlohmann::json gemma_like = read_json_file(fixture("hf/llama-3.1-8b.json"));
  gemma_like["sliding_window"] = 512;
  gemma_like["layer_types"] = nlohmann::json::array();
  for (int i = 0; i < 32; ++i) {
    gemma_like["layer_types"].push_back((i + 1) % 4 == 0 ? "full_attention" : "sliding_attention");
  }
  const ModelConfig every_fourth = import_hf_config(gemma_like, JsonLocation("config.json"), "m");
  ASSERT_TRUE(every_fourth.sliding_window);
  EXPECT_EQ(every_fourth.sliding_window->full_attention_interval, 4);
  EXPECT_EQ(every_fourth.attention_window(3), 0);
  EXPECT_EQ(every_fourth.attention_window(4), 512);

  gemma_like["layer_types"][5] = "full_attention";
  EXPECT_EQ(error_of(gemma_like),
            "config.json: /layer_types: full-attention layers that are not every n-th layer "
            "(n ≥ 2) are not supported");
  gemma_like["layer_types"][5] = "chunked_attention";
  EXPECT_EQ(error_of(gemma_like),
            "config.json: /layer_types/5: a string (\"chunked_attention\") is not "
            "\"full_attention\" or \"sliding_attention\"");
  nlohmann::json qwen = read_json_file(fixture("hf/qwen2-7b.json"));
  qwen["use_sliding_window"] = true;
  EXPECT_EQ(error_of(qwen),
            "config.json: /use_sliding_window: true is not supported: Qwen windows the layers "
            "from max_window_layers on, and Strata's sliding_window names full layers as every "
            "n-th");
}

TEST(HfConfigImport, RefusesMoeLayoutsItCannotRepresent) {
  nlohmann::json listed = read_json_file(fixture("hf/qwen3-30b-a3b.json"));
  listed["mlp_only_layers"] = {0, 5};
  EXPECT_EQ(error_of(listed),
            "config.json: /mlp_only_layers: dense layers by list are not supported; Strata's moe "
            "block names dense layers as the first k and every n-th (decoder_sparse_step)");
  nlohmann::json every_other = read_json_file(fixture("hf/deepseek-v3.json"));
  every_other["moe_layer_freq"] = 2;
  EXPECT_EQ(error_of(every_other),
            "config.json: /moe_layer_freq: only 1 (every layer after the dense ones) is supported");
  nlohmann::json scoring = read_json_file(fixture("hf/deepseek-v3.json"));
  scoring["scoring_func"] = "sparsemax";
  EXPECT_EQ(error_of(scoring),
            "config.json: /scoring_func: \"sparsemax\" is not \"softmax\" or \"sigmoid\"");
  nlohmann::json too_many = read_json_file(fixture("hf/mixtral-8x7b-v0.1.json"));
  too_many["num_experts_per_tok"] = 9;
  EXPECT_EQ(error_of(too_many),
            "config.json: /num_experts_per_tok: 9 is more than num_local_experts=8");
  nlohmann::json narrow = read_json_file(fixture("hf/deepseek-v3.json"));
  narrow["topk_group"] = 1;
  narrow["num_experts_per_tok"] = 33;
  EXPECT_EQ(error_of(narrow),
            "config.json: /topk_group: 1 of n_group=8 groups cannot hold num_experts_per_tok=33 "
            "experts");
  // A layout with no MoE layer is named at the config's own key, not at the moe block's field
  // the config does not have.
  nlohmann::json sparse = read_json_file(fixture("hf/qwen1.5-moe-a2.7b.json"));
  sparse["decoder_sparse_step"] = 1000;
  EXPECT_EQ(error_of(sparse),
            "config.json: /decoder_sparse_step: 1000: a MoE layer every 1000 leaves none of "
            "num_hidden_layers=24");
  nlohmann::json predicting = read_json_file(fixture("hf/deepseek-v3.json"));
  predicting["num_nextn_predict_layers"] = 17;
  EXPECT_EQ(error_of(predicting),
            "config.json: /num_nextn_predict_layers: 17 is above the maximum 16");
  nlohmann::json dense = read_json_file(fixture("hf/deepseek-v3.json"));
  dense["first_k_dense_replace"] = 61;
  EXPECT_EQ(error_of(dense),
            "config.json: /first_k_dense_replace: 61 dense layers first leave none of "
            "num_hidden_layers=61 a MoE layer");
}

}  // namespace
}  // namespace strata::schemas
