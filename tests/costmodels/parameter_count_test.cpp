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
  // Qwen3's dense models: the Hugging Face checkpoints' totals (safetensors metadata).
  EXPECT_EQ(preset_parameters("qwen3-8b"), 8'190'735'360);
  EXPECT_EQ(preset_parameters("qwen3-32b"), 32'762'123'264);
  // Mixtures of experts: the Hugging Face checkpoints' totals (DeepSeek-V3's main model and its
  // multi-token-prediction module: MultiTokenPredictionCountsAsTheCheckpointStoresIt).
  EXPECT_EQ(preset_parameters("mixtral-8x7b"), 46'702'792'704);
  EXPECT_EQ(preset_parameters("mixtral-8x22b"), 140'630'071'296);
  EXPECT_EQ(preset_parameters("deepseek-v3"), 671'026'419'200 + 11'610'068'224);
  EXPECT_EQ(preset_parameters("qwen3-30b-a3b"), 30'532'122'624);
  EXPECT_EQ(preset_parameters("qwen3-235b-a22b"), 235'093'634'560);
  // Kimi K2: the config's arithmetic (the model card rounds it to "1 T").
  EXPECT_EQ(preset_parameters("kimi-k2"), 1'026'408'232'448);
  // GPT-OSS: the model card's 20.91 B and 116.83 B, exactly by the config's arithmetic (sinks,
  // biased attention, router and experts included).
  EXPECT_EQ(preset_parameters("gpt-oss-20b"), 20'914'757'184);
  EXPECT_EQ(preset_parameters("gpt-oss-120b"), 116'829'156'672);
}

// GPT-OSS's model card counts active parameters without the input embedding: 3.61 B and 5.13 B.
TEST(ParameterCount, GptOssActiveParametersMatchTheModelCard) {
  for (const auto& [name, card] :
       {std::pair{"gpt-oss-20b", 3'608'307'264LL}, std::pair{"gpt-oss-120b", 5'132'849'472LL}}) {
    const schemas::ModelConfig model = schemas::model_preset(name);
    const ParameterBreakdown count = count_parameters(model);
    EXPECT_EQ(count.active() - count.token_embedding, card) << name;
  }
}

// Active parameters: the total less the routed experts a token does not visit. The model cards
// round them: Mixtral 8×7B "12.9 B", 8×22B "39 B", DeepSeek-V3 "37 B", Qwen3 "3.3 B" and "22 B".
TEST(ParameterCount, ActiveParametersOfMixturesOfExperts) {
  const auto active = [](std::string_view name) {
    return count_parameters(schemas::model_preset(name)).active();
  };
  // Mixtral 8×7B: 32 layers × 6 unvisited experts × 3·4096·14336 weights.
  EXPECT_EQ(active("mixtral-8x7b"), 46'702'792'704 - 32LL * 6 * 3 * 4096 * 14336);
  EXPECT_EQ(active("mixtral-8x7b"), 12'879'925'248);
  EXPECT_EQ(active("mixtral-8x22b"), 39'161'468'928);
  // DeepSeek-V3: 58 MoE layers × 248 unvisited experts × 3·7168·2048.
  EXPECT_EQ(active("deepseek-v3"), 671'026'419'200 - 58LL * 248 * 3 * 7168 * 2048);
  EXPECT_EQ(active("qwen3-30b-a3b"), 3'353'032'704);
  EXPECT_EQ(active("qwen3-235b-a22b"), 22'190'763'520);
  // Kimi K2 "32 B activated": 60 MoE layers × 376 unvisited experts × 3·7168·2048.
  EXPECT_EQ(active("kimi-k2"), 1'026'408'232'448 - 60LL * 376 * 3 * 7168 * 2048);
  EXPECT_EQ(active("kimi-k2"), 32'861'500'928);
  EXPECT_EQ(count_parameters(schemas::model_preset("llama3.1-8b")).active(), 8'030'261'248)
      << "a dense model's active parameters are all of them";
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
  EXPECT_EQ(hf_parameters("mixtral-8x7b-v0.1.json"), 46'702'792'704);
  EXPECT_EQ(hf_parameters("mixtral-8x22b-v0.1.json"), 140'630'071'296);
  EXPECT_EQ(hf_parameters("deepseek-v3.json"), 671'026'419'200 + 11'610'068'224);
  EXPECT_EQ(hf_parameters("kimi-k2.json"), 1'026'408'232'448);
  EXPECT_EQ(hf_parameters("gpt-oss-20b.json"), 20'914'757'184);
  EXPECT_EQ(hf_parameters("gpt-oss-120b.json"), 116'829'156'672);
  EXPECT_EQ(hf_parameters("qwen3-30b-a3b.json"), 30'532'122'624);
  EXPECT_EQ(hf_parameters("qwen3-235b-a22b.json"), 235'093'634'560);
  EXPECT_EQ(hf_parameters("qwen1.5-moe-a2.7b.json"), 14'315'784'192);
}

// DeepSeek-V3: "671 B" main model and "14 B" MTP module (the checkpoint's 685 B). The module is
// its layer 61 — MLA attention and a MoE MLP of 256 routed experts and a shared one — with enorm,
// hnorm, eh_proj (7168 × 14336) and its final norm: 11,610,068,224 trained; the checkpoint adds
// its own copies of the embedding and the head (2 × 129280 × 7168) for 13,463,426,304, and the
// whole checkpoint's 684,489,845,504 plus its fp8 block scales (one float per 128 × 128 block of
// every fp8 linear but eh_proj: 41,540,496) is the 684,531,386,000 its safetensors index lists.
TEST(ParameterCount, MultiTokenPredictionCountsAsTheCheckpointStoresIt) {
  const ParameterBreakdown count = count_parameters(schemas::model_preset("deepseek-v3"));
  EXPECT_EQ(count.num_mtp_modules, 1);
  EXPECT_TRUE(count.mtp_layer_moe);
  EXPECT_EQ(count.main_model(), 671'026'419'200);
  EXPECT_EQ(count.mtp(), 11'610'068'224);
  EXPECT_EQ(count.mtp_with_copies(), 13'463'426'304);
  EXPECT_EQ(count.main_model() + count.mtp_with_copies(), 684'489'845'504);
  EXPECT_EQ(count.active(), 671'026'419'200 - 58LL * 248 * 3 * 7168 * 2048)
      << "active parameters are the main model's";
  // Two modules: twice the module, and the total moves by exactly that.
  schemas::ModelConfig deeper = schemas::model_preset("deepseek-v3");
  deeper.mtp->num_modules = 2;
  EXPECT_EQ(count_parameters(deeper).total(), count.main_model() + 2 * count.mtp_module());
}

TEST(ParameterCount, PresetsAndHuggingFaceConfigsAreTheSameModels) {
  for (const auto& [preset, config] : {std::pair{"mixtral-8x7b", "mixtral-8x7b-v0.1.json"},
                                       std::pair{"deepseek-v3", "deepseek-v3.json"},
                                       std::pair{"qwen3-235b-a22b", "qwen3-235b-a22b.json"}}) {
    schemas::ModelConfig imported = schemas::load_model_file(fixture(std::string("hf/") + config));
    imported.name = preset;
    imported.description = schemas::model_preset(preset).description;
    EXPECT_EQ(imported, schemas::model_preset(preset)) << preset;
  }
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

// A small mixture of experts counted by hand: a dense first layer, then MoE layers of 8 SwiGLU
// experts of width 32 (top 2), one shared expert of width 48 and a router.
TEST(ParameterCount, ComponentsOfAMixtureOfExperts) {
  schemas::ModelConfig m = schemas::ModelConfig::defaults_for(schemas::Architecture::llama);
  m.num_layers = 4;
  m.hidden_size = 64;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 16;
  m.vocab_size = 100;
  m.max_seq_length = 16;
  m.moe.emplace();
  m.moe->num_experts = 8;
  m.moe->experts_per_token = 2;
  m.moe->expert_ffn_hidden_size = 32;
  m.moe->num_shared_experts = 1;
  m.moe->shared_expert_ffn_hidden_size = 48;
  m.moe->first_dense_layers = 1;
  const ParameterBreakdown count = count_parameters(m);
  EXPECT_EQ(count.num_moe_layers, 3);
  EXPECT_EQ(count.num_dense_layers(), 1);
  EXPECT_EQ(count.router_per_moe_layer, 64 * 8);
  EXPECT_EQ(count.routed_expert, 3 * 64 * 32);
  EXPECT_EQ(count.shared_experts_per_moe_layer, 3 * 64 * 48);
  // q 64×64 + k, v 64×32 each + o 64×64; norms 2×64.
  const std::int64_t attention = 4096 + 2048 + 2048 + 4096;
  const std::int64_t moe_layer = 512 + 8 * 6144 + 9216;
  EXPECT_EQ(count.total(),
            6400 + 4 * (attention + 128) + 1 * 3 * 64 * 128 + 3 * moe_layer + 64 + 6400);
  EXPECT_EQ(count.active(), count.total() - 3 * 6 * 6144);

  // Every second layer after the dense one: layers 2 only (layer 1 + 2 = 3 > 4 is past the end
  // for the next); the router's expert bias and the shared-expert gate add E and h per layer.
  m.moe->moe_layer_interval = 2;
  m.moe->router.expert_bias = true;
  m.moe->shared_expert_gate = true;
  EXPECT_TRUE(m.moe->is_moe_layer(2));
  EXPECT_FALSE(m.moe->is_moe_layer(1));
  EXPECT_FALSE(m.moe->is_moe_layer(3));
  const ParameterBreakdown every_other = count_parameters(m);
  EXPECT_EQ(every_other.num_moe_layers, 1);
  EXPECT_EQ(every_other.router_per_moe_layer, 512 + 8 + 64);
}

// Latent attention counted by hand: the q latent (h → 24, norm, 24 → heads·(8 + 4)), the kv latent
// with the shared rotary key (h → 16 + 4, norm, 16 → heads·(8 + 8)) and the output (heads·8 → h).
TEST(ParameterCount, LatentAttentionByHand) {
  schemas::ModelConfig m = schemas::ModelConfig::defaults_for(schemas::Architecture::llama);
  m.num_layers = 1;
  m.hidden_size = 64;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_kv_heads = 4;
  m.mla = schemas::MlaConfig{.q_lora_rank = 24,
                             .kv_lora_rank = 16,
                             .qk_nope_head_dim = 8,
                             .qk_rope_head_dim = 4,
                             .v_head_dim = 8};
  m.head_dim = 12;
  m.vocab_size = 100;
  m.max_seq_length = 16;
  EXPECT_EQ(attention_matrix_parameters(m), 64 * 24 + 24 * 48 + 64 * 20 + 16 * 64 + 32 * 64);
  EXPECT_EQ(count_parameters(m).attention_per_layer, attention_matrix_parameters(m) + 24 + 16);
  m.mla->q_lora_rank = 0;  // queries straight from the hidden state
  EXPECT_EQ(count_parameters(m).attention_per_layer, 64 * 48 + 64 * 20 + 16 * 64 + 32 * 64 + 16);
}

TEST(ParameterCount, QueryKeyNormsAreOnePerHeadWidth) {
  schemas::ModelConfig m = schemas::model_preset("llama3.1-8b");
  const std::int64_t without = count_parameters(m).attention_per_layer;
  m.qk_norm = true;
  EXPECT_EQ(count_parameters(m).attention_per_layer, without + 2 * 128);
}

}  // namespace
}  // namespace strata::costmodels
