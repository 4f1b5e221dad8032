#include "strata/layout/parameter_table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "layout_check.h"

namespace strata::layout {
namespace {

using schemas::ModelConfig;

// GPT-2's init: N(0, 0.02²), and for the residual branches' output projections a std scaled by
// 1/√(2·layers).
struct InitRules {
  InitRule weight{InitKind::normal, 0.02};
  InitRule residual_output;
  InitRule zeros{InitKind::zeros, 0};
  InitRule ones{InitKind::ones, 0};
  explicit InitRules(const ModelConfig& model)
      : residual_output{InitKind::normal,
                        0.02 / std::sqrt(2.0 * static_cast<double>(model.num_layers))} {}
};

// A norm's scale (and a LayerNorm's bias) over `width` features, replicated: `prefix`.weight
// and `prefix`.bias.
void add_norm(const ModelConfig& model, const std::string& prefix, std::int64_t width,
              std::vector<ParameterSpec>& specs) {
  const InitRules init(model);
  specs.push_back({prefix + ".weight", {width}, init.ones, false, Placement::replicate()});
  if (model.norm == schemas::NormKind::layernorm) {
    specs.push_back({prefix + ".bias", {width}, init.zeros, false, Placement::replicate()});
  }
}

// Latent attention (DeepSeek-V2/V3, Megatron-Core's MLA): queries through a low-rank latent (or
// one projection), keys and values through a shared kv latent plus one rotary key for all heads.
// The down projections and the latents' norms are whole on every tp rank; the up projections
// split their rows by heads and the output its columns by heads.
void add_latent_attention(const ModelConfig& model, std::int64_t index,
                          std::vector<ParameterSpec>& specs) {
  const schemas::MlaConfig& mla = *model.mla;
  const std::int64_t hidden = model.hidden_size;
  const std::int64_t heads = model.num_attention_heads;
  const InitRules init(model);
  const auto name = [&](const char* suffix) { return fmt::format("layers.{}.{}", index, suffix); };
  const Placement replicated = Placement::replicate();
  const std::size_t first_spec = specs.size();
  if (mla.q_lora_rank > 0) {
    specs.push_back({name("attention.q_down.weight"),
                     {mla.q_lora_rank, hidden},
                     init.weight,
                     true,
                     replicated});
    add_norm(model, name("attention.q_latent_norm"), mla.q_lora_rank, specs);
    specs.push_back({name("attention.q_up.weight"),
                     {heads * mla.qk_head_dim(), mla.q_lora_rank},
                     init.weight,
                     true,
                     Placement::shard(0, {{heads, mla.qk_head_dim()}})});
  } else {
    specs.push_back({name("attention.q.weight"),
                     {heads * mla.qk_head_dim(), hidden},
                     init.weight,
                     true,
                     Placement::shard(0, {{heads, mla.qk_head_dim()}})});
  }
  specs.push_back({name("attention.kv_down.weight"),
                   {mla.kv_lora_rank + mla.qk_rope_head_dim, hidden},
                   init.weight,
                   true,
                   replicated});
  add_norm(model, name("attention.kv_latent_norm"), mla.kv_lora_rank, specs);
  const std::int64_t kv_up_per_head = mla.qk_nope_head_dim + mla.v_head_dim;
  specs.push_back({name("attention.kv_up.weight"),
                   {heads * kv_up_per_head, mla.kv_lora_rank},
                   init.weight,
                   true,
                   Placement::shard(0, {{heads, kv_up_per_head}})});
  specs.push_back({name("attention.output.weight"),
                   {hidden, heads * mla.v_head_dim},
                   init.residual_output,
                   true,
                   Placement::shard(1, {{heads, mla.v_head_dim}})});
  // The down projections and the latents' norms are whole on every tp rank, but each rank's
  // gradient of them comes from its own heads only.
  for (std::size_t i = first_spec; i < specs.size(); ++i) {
    if (specs[i].tensor_parallel.kind == PlacementKind::replicate) {
      specs[i].partial_over_tensor_parallel = true;
    }
  }
}

// Multi-head or grouped-query attention: one fused qkv projection split per segment by heads (each
// rank gets its q heads and the k and v heads they read), the output's columns by heads; the
// query/key norms over head_dim are shared by the heads, whole on every rank.
void add_attention(const ModelConfig& model, std::int64_t index,
                   std::vector<ParameterSpec>& specs) {
  const std::int64_t hidden = model.hidden_size;
  const std::int64_t heads = model.num_attention_heads;
  const std::int64_t kv_heads = model.num_kv_heads;
  const std::int64_t head_dim = model.head_dim;
  const std::int64_t qkv_width = (heads + 2 * kv_heads) * head_dim;
  const InitRules init(model);
  const auto name = [&](const char* suffix) { return fmt::format("layers.{}.{}", index, suffix); };
  const Placement qkv_heads =
      Placement::shard(0, {{heads, head_dim}, {kv_heads, head_dim}, {kv_heads, head_dim}});
  specs.push_back(
      {name("attention.qkv.weight"), {qkv_width, hidden}, init.weight, true, qkv_heads});
  if (model.qkv_bias) {
    specs.push_back({name("attention.qkv.bias"), {qkv_width}, init.zeros, false, qkv_heads});
  }
  if (model.qk_norm) {
    const std::size_t first_norm = specs.size();
    add_norm(model, name("attention.q_norm"), head_dim, specs);
    add_norm(model, name("attention.k_norm"), head_dim, specs);
    for (std::size_t i = first_norm; i < specs.size(); ++i) {
      specs[i].partial_over_tensor_parallel = true;
    }
  }
  specs.push_back({name("attention.output.weight"),
                   {hidden, heads * head_dim},
                   init.residual_output,
                   true,
                   Placement::shard(1, {{heads, head_dim}})});
}

}  // namespace

namespace {

// Unit 0: the word embedding (its vocabulary split by rows, Megatron's VocabParallelEmbedding),
// learned positions and an embedding norm (replicated).
std::vector<ParameterSpec> embedding_parameters(const ModelConfig& model) {
  const InitRules init(model);
  std::vector<ParameterSpec> specs;
  specs.push_back({"embedding.word",
                   {model.vocab_size, model.hidden_size},
                   init.weight,
                   true,
                   Placement::shard(0)});
  if (model.position_embedding == schemas::PositionEmbedding::learned) {
    specs.push_back({"embedding.position",
                     {model.max_seq_length, model.hidden_size},
                     init.weight,
                     true,
                     Placement::replicate()});
  }
  if (model.embedding_norm) add_norm(model, "embedding.norm", model.hidden_size, specs);
  return specs;
}

// The last unit: the final norm and an untied LM head (its vocabulary rows column-parallel).
std::vector<ParameterSpec> head_parameters(const ModelConfig& model) {
  const InitRules init(model);
  std::vector<ParameterSpec> specs;
  add_norm(model, "final_norm", model.hidden_size, specs);
  if (!model.tied_embeddings) {
    specs.push_back({"lm_head.weight",
                     {model.vocab_size, model.hidden_size},
                     init.weight,
                     true,
                     Placement::shard(0)});
  }
  return specs;
}

void append(std::vector<ParameterSpec>& specs, std::vector<ParameterSpec> more) {
  for (ParameterSpec& spec : more) specs.push_back(std::move(spec));
}

}  // namespace

std::vector<ParameterSpec> mtp_module_parameters(const ModelConfig& model, std::int64_t module) {
  const std::int64_t layer = model.num_layers + module - 1;
  const InitRules init(model);
  const auto name = [&](const char* part) { return fmt::format("layers.{}.{}", layer, part); };
  std::vector<ParameterSpec> specs;
  add_norm(model, name("enorm"), model.hidden_size, specs);
  add_norm(model, name("hnorm"), model.hidden_size, specs);
  // [h, 2h]: the normalised embedding's columns first, then the hidden state's (Megatron-Core's
  // torch.cat((decoder_input, hidden_states), -1)).
  specs.push_back({name("eh_proj.weight"),
                   {model.hidden_size, 2 * model.hidden_size},
                   init.weight,
                   true,
                   Placement::replicate()});
  append(specs, transformer_layer_parameters(model, layer));
  add_norm(model, name("final_norm"), model.hidden_size, specs);
  return specs;
}

std::vector<ParameterSpec> transformer_parameters(const ModelConfig& model) {
  std::vector<ParameterSpec> specs = embedding_parameters(model);
  for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
    append(specs, transformer_layer_parameters(model, layer));
  }
  append(specs, head_parameters(model));
  for (std::int64_t module = 1; module <= model.mtp_modules(); ++module) {
    append(specs, mtp_module_parameters(model, module));
  }
  return specs;
}

std::vector<ParameterSpec> transformer_layer_parameters(const ModelConfig& model,
                                                        std::int64_t index) {
  const std::int64_t hidden = model.hidden_size;
  const std::int64_t ffn = model.ffn_hidden_size;
  const InitRules init(model);
  const Placement replicated = Placement::replicate();
  const Placement column_parallel = Placement::shard(0);
  const Placement row_parallel = Placement::shard(1);
  std::vector<ParameterSpec> specs;
  auto add = [&](const char* suffix, Shape shape, InitRule rule, bool decay, Placement placement) {
    specs.push_back(ParameterSpec{fmt::format("layers.{}.{}", index, suffix), std::move(shape),
                                  rule, decay, std::move(placement)});
  };
  add_norm(model, fmt::format("layers.{}.attention_norm", index), hidden, specs);
  if (model.mla) {
    add_latent_attention(model, index, specs);
  } else {
    add_attention(model, index, specs);
  }
  if (model.attention_sinks) {
    // One logit per query head (GPT-OSS draws them as its other weights), split with the heads.
    add("attention.sinks", {model.num_attention_heads}, init.weight, false,
        Placement::shard(0, {{model.num_attention_heads, 1}}));
  }
  if (model.attention_output_bias) {
    add("attention.output.bias", {hidden}, init.zeros, false, replicated);
  }
  add_norm(model, fmt::format("layers.{}.mlp_norm", index), hidden, specs);
  if (model.is_moe_layer(index)) {
    for (ParameterSpec& spec : moe_mlp_parameters(model, index)) specs.push_back(std::move(spec));
    return specs;
  }
  if (schemas::is_gated(model.mlp_activation)) {
    add("mlp.gate.weight", {ffn, hidden}, init.weight, true, column_parallel);
    if (model.mlp_bias) add("mlp.gate.bias", {ffn}, init.zeros, false, column_parallel);
    add("mlp.up.weight", {ffn, hidden}, init.weight, true, column_parallel);
    if (model.mlp_bias) add("mlp.up.bias", {ffn}, init.zeros, false, column_parallel);
  } else {
    add("mlp.fc.weight", {ffn, hidden}, init.weight, true, column_parallel);
    if (model.mlp_bias) add("mlp.fc.bias", {ffn}, init.zeros, false, column_parallel);
  }
  add("mlp.output.weight", {hidden, ffn}, init.residual_output, true, row_parallel);
  if (model.mlp_bias) add("mlp.output.bias", {hidden}, init.zeros, false, replicated);
  return specs;
}

std::vector<ParameterSpec> moe_mlp_parameters(const ModelConfig& model, std::int64_t index) {
  const schemas::MoeConfig& moe = *model.moe;
  const std::int64_t hidden = model.hidden_size;
  const std::int64_t experts = moe.num_experts;
  const std::int64_t width = moe.expert_ffn_hidden_size;
  const std::int64_t shared_width = moe.num_shared_experts * moe.shared_expert_ffn_hidden_size;
  const bool gated = schemas::is_gated(model.mlp_activation);
  const InitRules init(model);
  const Placement replicated = Placement::replicate();
  // The routed experts' tensors stack the experts along dim 0: expert parallelism takes ranges.
  const Placement expert_ranges = Placement::shard(0);
  // The shared experts are one dense MLP, split over tp as the dense layers' MLP is.
  const Placement column_parallel = Placement::shard(0);
  const Placement row_parallel = Placement::shard(1);
  std::vector<ParameterSpec> specs;
  // Expert tensor parallelism splits each routed expert's width: its input projections by rows
  // (column-parallel), its output projection by columns (row-parallel); the output bias, added
  // once after the partial sums, stays whole.
  auto add = [&](const std::string& suffix, Shape shape, InitRule rule, bool decay,
                 const Placement& tensor_parallel, const Placement& expert_width = {}) {
    const bool routed = suffix.starts_with("experts.");
    specs.push_back(ParameterSpec{fmt::format("layers.{}.mlp.{}", index, suffix), std::move(shape),
                                  rule, decay, tensor_parallel, routed ? expert_ranges : replicated,
                                  expert_width});
  };
  add("router.weight", {experts, hidden}, init.weight, true, replicated);
  if (moe.router.logit_bias) add("router.bias", {experts}, init.zeros, false, replicated);
  // DeepSeek-V3's per-expert bias, added to the scores only to choose experts.
  if (moe.router.expert_bias) add("router.expert_bias", {experts}, init.zeros, false, replicated);
  const std::vector<const char*> inputs =
      gated ? std::vector<const char*>{"gate", "up"} : std::vector<const char*>{"fc"};
  for (const char* input : inputs) {
    add(fmt::format("experts.{}.weight", input), {experts, width, hidden}, init.weight, true,
        replicated, Placement::shard(1));
    if (model.mlp_bias) {
      add(fmt::format("experts.{}.bias", input), {experts, width}, init.zeros, false, replicated,
          Placement::shard(1));
    }
  }
  add("experts.output.weight", {experts, hidden, width}, init.residual_output, true, replicated,
      Placement::shard(2));
  if (model.mlp_bias) add("experts.output.bias", {experts, hidden}, init.zeros, false, replicated);
  if (shared_width > 0) {
    for (const char* input : inputs) {
      add(fmt::format("shared.{}.weight", input), {shared_width, hidden}, init.weight, true,
          column_parallel);
      if (model.mlp_bias) {
        add(fmt::format("shared.{}.bias", input), {shared_width}, init.zeros, false,
            column_parallel);
      }
    }
    add("shared.output.weight", {hidden, shared_width}, init.residual_output, true, row_parallel);
    if (model.mlp_bias) {
      add("shared.output.bias", {moe.num_shared_experts, hidden}, init.zeros, false, replicated);
    }
    if (moe.shared_expert_gate) {
      add("shared_gate.weight", {1, hidden}, init.weight, true, replicated);
    }
  }
  return specs;
}

std::vector<ParameterSpec> stage_parameters(const ModelConfig& model,
                                            const std::vector<schemas::PipelineStage>& stages) {
  bool embedding = false, lm_head = false;
  std::vector<bool> layer_held(static_cast<std::size_t>(model.num_layers), false);
  for (const schemas::PipelineStage& stage : stages) {
    embedding = embedding || stage.embedding;
    lm_head = lm_head || stage.lm_head;
    for (std::int64_t l = stage.first_layer; l < stage.first_layer + stage.num_layers; ++l) {
      layer_held[static_cast<std::size_t>(l)] = true;
    }
  }
  // Only the held units are built: the cost models ask for one stage of a deep model at a time.
  std::vector<ParameterSpec> held;
  if (embedding) {
    held = embedding_parameters(model);
  } else if (lm_head && model.mtp) {
    held = embedding_parameters(model);  // the MTP modules embed with all of it
  } else if (lm_head && model.tied_embeddings) {
    held.push_back(std::move(embedding_parameters(model).front()));  // the word embedding
  }
  for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
    if (layer_held[static_cast<std::size_t>(layer)]) {
      append(held, transformer_layer_parameters(model, layer));
    }
  }
  if (lm_head) {
    append(held, head_parameters(model));
    for (std::int64_t module = 1; module <= model.mtp_modules(); ++module) {
      append(held, mtp_module_parameters(model, module));
    }
  }
  return held;
}

std::int64_t parameter_unit(const ModelConfig& model, std::string_view name) {
  if (name.starts_with("embedding.")) return 0;
  if (name.starts_with("final_norm.") || name.starts_with("lm_head.")) return model.num_layers + 1;
  constexpr std::string_view kLayers = "layers.";
  STRATA_LAYOUT_CHECK(name.starts_with(kLayers), "parameter {} belongs to no unit", name);
  std::int64_t layer = -1;
  const char* first = name.data() + kLayers.size();
  std::from_chars(first, name.data() + name.size(), layer);
  STRATA_LAYOUT_CHECK(layer >= 0 && layer < model.layers_with_mtp(), "parameter {}: no such layer",
                      name);
  // An MTP module's layer follows the head's unit (the modules run after the head).
  return layer < model.num_layers ? 1 + layer : 2 + layer;
}

std::vector<std::int64_t> stage_units(const ModelConfig& model,
                                      const schemas::PipelineStage& stage) {
  std::vector<std::int64_t> units;
  if (stage.embedding || (stage.lm_head && model.last_stage_uses_word_embedding())) {
    units.push_back(0);
  }
  for (std::int64_t l = stage.first_layer; l < stage.first_layer + stage.num_layers; ++l) {
    units.push_back(l + 1);
  }
  if (stage.lm_head) {
    for (std::int64_t unit = model.num_layers + 1; unit < parameter_unit_count(model); ++unit) {
      units.push_back(unit);  // the head, then the MTP modules
    }
  }
  return units;
}

}  // namespace strata::layout
