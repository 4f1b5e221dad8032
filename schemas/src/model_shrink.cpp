#include "strata/schemas/model_shrink.h"

#include <algorithm>

namespace strata::schemas {
namespace {

constexpr std::int64_t kHeads = 4;
constexpr std::int64_t kHeadDim = 8;
constexpr std::int64_t kHidden = 32;
constexpr std::int64_t kFfn = 64;
constexpr std::int64_t kExpertFfn = 16;
constexpr std::int64_t kMaxRoutedExperts = 8;
constexpr std::int64_t kMaxExpertsPerToken = 2;
constexpr std::int64_t kVocabulary = 256;
constexpr std::int64_t kSeqLength = 64;
constexpr std::int64_t kWindow = 12;

// The kv heads that keep the original's kind of attention: multi-head (every head its own), multi-
// query (one for all) or grouped (two heads share each kv head here).
std::int64_t shrunk_kv_heads(const ModelConfig& model) {
  if (model.num_kv_heads == model.num_attention_heads) return kHeads;
  if (model.num_kv_heads == 1) return 1;
  return kHeads / 2;
}

MoeConfig shrink_moe(const MoeConfig& moe) {
  MoeConfig shrunk = moe;
  shrunk.num_experts = std::min(moe.num_experts, kMaxRoutedExperts);
  shrunk.experts_per_token = std::min(moe.experts_per_token, kMaxExpertsPerToken);
  shrunk.expert_ffn_hidden_size = kExpertFfn;
  shrunk.num_shared_experts = std::min<std::int64_t>(moe.num_shared_experts, 1);
  shrunk.shared_expert_ffn_hidden_size = shrunk.num_shared_experts > 0 ? kExpertFfn : 0;
  shrunk.first_dense_layers = std::min<std::int64_t>(moe.first_dense_layers, 1);
  shrunk.moe_layer_interval = std::min<std::int64_t>(moe.moe_layer_interval, 2);
  if (moe.router.expert_groups > 1) {
    // Group-limited routing stays limited: 4 groups of 2 experts, each token within 2 groups.
    shrunk.num_experts = kMaxRoutedExperts;
    shrunk.router.expert_groups = 4;
    shrunk.router.groups_per_token = std::min<std::int64_t>(moe.router.groups_per_token, 2);
  }
  return shrunk;
}

}  // namespace

ModelConfig shrink_model(const ModelConfig& model) {
  ModelConfig shrunk = model;
  shrunk.name = model.name + "-shrunk";
  shrunk.description = "a tiny copy of " + model.name + " with its features (strata's --shrink)";
  shrunk.hidden_size = kHidden;
  shrunk.ffn_hidden_size = kFfn;
  shrunk.num_attention_heads = kHeads;
  shrunk.num_kv_heads = shrunk_kv_heads(model);
  shrunk.head_dim = kHeadDim;
  shrunk.vocab_size = kVocabulary;
  shrunk.max_seq_length = kSeqLength;
  shrunk.num_layers = 2;
  // Dropout is a training setting, not a feature of the architecture: the tiny copy trains
  // deterministically (against PyTorch), and a test that wants dropout sets it.
  shrunk.dropout = 0.0;
  if (model.mla) {
    shrunk.mla = MlaConfig{.q_lora_rank = model.mla->q_lora_rank > 0 ? 16 : 0,
                           .kv_lora_rank = 16,
                           .qk_nope_head_dim = kHeadDim,
                           .qk_rope_head_dim = kHeadDim / 2,
                           .v_head_dim = kHeadDim};
    shrunk.head_dim = shrunk.mla->qk_head_dim();
  }
  if (model.mtp) shrunk.mtp->num_modules = std::min<std::int64_t>(model.mtp->num_modules, 2);
  if (model.sliding_window) {
    // A window shorter than a context-parallel chunk of the tiny sequence (16 tokens at cp 2):
    // some blocks are seen in part and some not at all. Two layers: windowed, then full.
    shrunk.sliding_window->size = std::min(model.sliding_window->size, kWindow);
    if (model.sliding_window->full_attention_interval > 0) {
      shrunk.sliding_window->full_attention_interval = 2;
    }
  }
  if (model.moe) {
    shrunk.moe = shrink_moe(*model.moe);
    shrunk.num_layers = shrunk.moe->first_dense_layers + 2 * shrunk.moe->moe_layer_interval;
  }
  validate_model(shrunk, JsonLocation(shrunk.name));
  return shrunk;
}

}  // namespace strata::schemas
