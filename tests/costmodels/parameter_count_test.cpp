#include "strata/costmodels/parameter_count.h"

#include <gtest/gtest.h>

#include "fixture_paths.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/presets.h"

namespace strata::costmodels {
namespace {

using strata::testing::fixture;

std::int64_t preset_parameters(std::string_view name) {
  return count_parameters(schemas::model_preset(name)).total();
}
std::int64_t hf_parameters(const std::string& name) {
  return count_parameters(schemas::load_model_file(fixture("hf/" + name))).total();
}

// The counts the model cards and Hugging Face checkpoints publish.
TEST(ParameterCount, PresetsMatchPublishedCounts) {
  EXPECT_EQ(preset_parameters("gpt2-124m"), 124'439'808);
  EXPECT_EQ(preset_parameters("gpt2-350m"), 354'823'168);
  EXPECT_EQ(preset_parameters("gpt2-774m"), 774'030'080);
  EXPECT_EQ(preset_parameters("gpt2-1.5b"), 1'557'611'200);
  EXPECT_EQ(preset_parameters("llama2-7b"), 6'738'415'616);
  EXPECT_EQ(preset_parameters("llama2-13b"), 13'015'864'320);
  EXPECT_EQ(preset_parameters("llama2-70b"), 68'976'648'192);
  EXPECT_EQ(preset_parameters("llama3.1-8b"), 8'030'261'248);
  EXPECT_EQ(preset_parameters("llama3.1-70b"), 70'553'706'496);
  EXPECT_EQ(preset_parameters("llama3.1-405b"), 405'853'388'800);
  EXPECT_EQ(preset_parameters("bloom-176b"), 176'247'271'424);
}

TEST(ParameterCount, HuggingFaceConfigsMatchPublishedCounts) {
  EXPECT_EQ(hf_parameters("gpt2.json"), 124'439'808);
  EXPECT_EQ(hf_parameters("gpt2-xl.json"), 1'557'611'200);
  EXPECT_EQ(hf_parameters("llama-2-7b.json"), 6'738'415'616);
  EXPECT_EQ(hf_parameters("llama-3.1-8b.json"), 8'030'261'248);
  EXPECT_EQ(hf_parameters("llama-3.1-70b.json"), 70'553'706'496);
  EXPECT_EQ(hf_parameters("llama-3.1-405b.json"), 405'853'388'800);
  EXPECT_EQ(hf_parameters("mistral-7b-v0.1.json"), 7'241'732'096);
  EXPECT_EQ(hf_parameters("mistral-nemo-12b.json"), 12'247'782'400);
  EXPECT_EQ(hf_parameters("qwen2-7b.json"), 7'615'616'512);
  EXPECT_EQ(hf_parameters("qwen2-0.5b.json"), 494'032'768);
}

// Narayanan et al. (2021), eq. 2: P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)) for a GPT with
// a 4h MLP and tied embeddings; it leaves out the final LayerNorm's 2h.
TEST(ParameterCount, GptFamilyMatchesMegatronClosedForm) {
  for (std::string_view name : {"gpt3-1.7b", "gpt3-18b", "gpt3-175b", "gpt3-1t"}) {
    const schemas::ModelConfig m = schemas::model_preset(name);
    const std::int64_t l = m.num_layers, h = m.hidden_size;
    const std::int64_t closed_form =
        12 * l * h * h + 13 * l * h + (m.vocab_size + m.max_seq_length) * h;
    EXPECT_EQ(count_parameters(m).total(), closed_form + 2 * h) << name;
  }
}

// A small model counted by hand, piece by piece.
TEST(ParameterCount, ComponentsOfAGroupedQueryModelWithBiases) {
  schemas::ModelConfig m = schemas::ModelConfig::defaults_for(schemas::Architecture::llama);
  m.num_layers = 2;
  m.hidden_size = 64;
  m.ffn_hidden_size = 96;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 32;  // q width 128, kv width 64: wider than hidden
  m.vocab_size = 100;
  m.max_seq_length = 16;
  m.qkv_bias = true;
  const ParameterBreakdown count = count_parameters(m);
  EXPECT_EQ(count.token_embedding, 6400);
  EXPECT_EQ(count.position_embedding, 0);
  // q 64×128 + k 64×64 + v 64×64 + o 128×64 + biases 128 + 64 + 64.
  EXPECT_EQ(count.attention_per_layer, 8192 + 4096 + 4096 + 8192 + 256);
  EXPECT_EQ(count.mlp_per_layer, 3 * 64 * 96);
  EXPECT_EQ(count.norms_per_layer, 128);
  EXPECT_EQ(count.final_norm, 64);
  EXPECT_EQ(count.lm_head, 6400);
  EXPECT_EQ(count.total(), 6400 + 2 * (24832 + 18432 + 128) + 64 + 6400);
}

}  // namespace
}  // namespace strata::costmodels
