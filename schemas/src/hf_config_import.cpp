#include "strata/schemas/hf_config_import.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <optional>
#include <vector>

#include "strata/schemas/object_reader.h"

namespace strata::schemas {
namespace {

enum class HfFamily {
  llama,
  mistral,
  qwen2,
  qwen3,
  mixtral,
  qwen2_moe,
  qwen3_moe,
  deepseek_v3,
  gpt_oss,
  gpt2
};

struct HfArchitecture {
  std::string_view architecture;  // "architectures"[0]
  std::string_view model_type;
  HfFamily family;
};

constexpr std::array<HfArchitecture, 10> kSupported{{
    {"LlamaForCausalLM", "llama", HfFamily::llama},
    {"MistralForCausalLM", "mistral", HfFamily::mistral},
    {"Qwen2ForCausalLM", "qwen2", HfFamily::qwen2},
    {"Qwen3ForCausalLM", "qwen3", HfFamily::qwen3},
    {"MixtralForCausalLM", "mixtral", HfFamily::mixtral},
    {"Qwen2MoeForCausalLM", "qwen2_moe", HfFamily::qwen2_moe},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HfFamily::qwen3_moe},
    {"DeepseekV3ForCausalLM", "deepseek_v3", HfFamily::deepseek_v3},
    {"GptOssForCausalLM", "gpt_oss", HfFamily::gpt_oss},
    {"GPT2LMHeadModel", "gpt2", HfFamily::gpt2},
}};

// Reads keys of a config that may be absent or null (transformers then uses its default).
class HfConfigReader {
 public:
  HfConfigReader(const nlohmann::json& config, const JsonLocation& location)
      : config_(config), location_(location) {}

  bool given(std::string_view key) const {
    return config_.contains(key) && !config_.at(std::string(key)).is_null();
  }
  std::int64_t integer(std::string_view key, IntegerRange range) const {
    if (!given(key)) (location_ / key).fail("required key is missing");
    return read_integer(config_.at(std::string(key)), location_ / key, range);
  }
  std::optional<std::int64_t> optional_integer(std::string_view key, IntegerRange range) const {
    if (!given(key)) return std::nullopt;
    return integer(key, range);
  }
  double number(std::string_view key, double fallback, NumberRange range) const {
    if (!given(key)) return fallback;
    return read_number(config_.at(std::string(key)), location_ / key, range);
  }
  bool boolean(std::string_view key, bool fallback) const {
    if (!given(key)) return fallback;
    const nlohmann::json& value = config_.at(std::string(key));
    if (!value.is_boolean())
      (location_ / key).fail("expected true or false, got " + describe_json_value(value));
    return value.get<bool>();
  }
  std::optional<std::string> string(std::string_view key) const {
    if (!given(key)) return std::nullopt;
    const nlohmann::json& value = config_.at(std::string(key));
    if (!value.is_string())
      (location_ / key).fail("expected a string, got " + describe_json_value(value));
    return value.get<std::string>();
  }
  const JsonLocation& location() const { return location_; }

 private:
  const nlohmann::json& config_;
  const JsonLocation& location_;
};

const HfArchitecture& find_architecture(const nlohmann::json& config,
                                        const JsonLocation& location) {
  std::string supported;
  for (const HfArchitecture& entry : kSupported) {
    supported += (supported.empty() ? "" : ", ") + std::string(entry.architecture);
  }
  if (config.contains("architectures")) {
    const nlohmann::json& list = config.at("architectures");
    require_array(list, location / "architectures", 1);
    const nlohmann::json& first = list.at(0);
    for (const HfArchitecture& entry : kSupported) {
      if (first.is_string() && first.get<std::string>() == entry.architecture) return entry;
    }
    (location / "architectures" / 0)
        .fail(fmt::format("{} is not supported; supported: {}", first.dump(), supported));
  }
  const nlohmann::json& model_type = config.at("model_type");
  for (const HfArchitecture& entry : kSupported) {
    if (model_type.is_string() && model_type.get<std::string>() == entry.model_type) return entry;
  }
  (location / "model_type")
      .fail(fmt::format("{} is not supported; supported: {}", model_type.dump(), supported));
}

std::optional<Dtype> checkpoint_dtype(const HfConfigReader& reader, const nlohmann::json& config) {
  // Weights published quantized (DeepSeek-V3's block-scaled e4m3) say so in quantization_config;
  // "torch_dtype" then names the dtype they are computed in.
  if (reader.given("quantization_config") && config.at("quantization_config").is_object() &&
      config.at("quantization_config").value("quant_method", "") == "fp8") {
    return Dtype::fp8;
  }
  // Newer transformers write "dtype", older ones "torch_dtype".
  const std::string_view key = reader.given("dtype") ? "dtype" : "torch_dtype";
  const std::optional<std::string> name = reader.string(key);
  if (!name) return std::nullopt;
  if (*name == "float32") return Dtype::fp32;
  if (*name == "bfloat16") return Dtype::bf16;
  if (*name == "float16") return Dtype::fp16;
  (reader.location() / key)
      .fail(fmt::format("\"{}\" is not one of \"float32\", \"bfloat16\" or \"float16\"", *name));
}

ModelConfig import_llama_family(const HfConfigReader& reader, HfFamily family) {
  ModelConfig model = ModelConfig::defaults_for(Architecture::llama);
  model.num_layers = reader.integer("num_hidden_layers", {1, kMaxLayers});
  model.hidden_size = reader.integer("hidden_size", {1, kMaxHiddenSize});
  model.ffn_hidden_size = reader.integer("intermediate_size", {1, 4 * kMaxHiddenSize});
  model.num_attention_heads = reader.integer("num_attention_heads", {1, kMaxHeads});
  // transformers: a null or absent num_key_value_heads means multi-head attention.
  model.num_kv_heads = reader.optional_integer("num_key_value_heads", {1, kMaxHeads})
                           .value_or(model.num_attention_heads);
  if (model.num_attention_heads % model.num_kv_heads != 0) {
    (reader.location() / "num_key_value_heads")
        .fail(fmt::format("{} does not divide num_attention_heads={}", model.num_kv_heads,
                          model.num_attention_heads));
  }
  const std::optional<std::int64_t> head_dim = reader.optional_integer("head_dim", {1, 4096});
  if (!head_dim && model.hidden_size % model.num_attention_heads != 0) {
    (reader.location() / "num_attention_heads")
        .fail(fmt::format("{} does not divide hidden_size={} and the config has no head_dim",
                          model.num_attention_heads, model.hidden_size));
  }
  model.head_dim = head_dim.value_or(model.hidden_size / model.num_attention_heads);
  model.vocab_size = reader.integer("vocab_size", {1, kMaxVocabSize});
  model.max_seq_length = reader.integer("max_position_embeddings", {1, kMaxSeqLength});
  model.norm_epsilon =
      reader.number("rms_norm_eps", 1e-6, {.minimum = 0, .maximum = 1, .minimum_exclusive = true});
  model.rope_theta = reader.number("rope_theta", 10000.0,
                                   {.minimum = 0, .maximum = 1e12, .minimum_exclusive = true});
  model.dropout = reader.number("attention_dropout", 0.0,
                                {.minimum = 0, .maximum = 1, .maximum_exclusive = true});
  model.tied_embeddings = reader.boolean("tie_word_embeddings", false);
  const bool attention_bias = reader.boolean("attention_bias", false);
  // Qwen2 and Qwen2-MoE always bias q, k and v and never the output projection.
  const bool qwen2 = family == HfFamily::qwen2 || family == HfFamily::qwen2_moe;
  model.qkv_bias = qwen2 || attention_bias;
  model.attention_output_bias = !qwen2 && attention_bias;
  model.qk_norm = family == HfFamily::qwen3 || family == HfFamily::qwen3_moe;
  model.mlp_bias = reader.boolean("mlp_bias", false);
  const std::string activation = reader.string("hidden_act").value_or("silu");
  if (activation != "silu") {
    (reader.location() / "hidden_act")
        .fail(fmt::format("\"{}\" is not supported: Strata's llama MLP is SwiGLU (\"silu\")",
                          activation));
  }
  return model;
}

constexpr NumberRange kCoefficient{.minimum = 0, .maximum = 1e3};

// Transformers' MoE configs leave dense layers only through a list Strata's layer pattern does
// not express; an empty or absent list is the common case.
void require_no_mlp_only_layers(const HfConfigReader& reader, const nlohmann::json& config) {
  if (!reader.given("mlp_only_layers")) return;
  const nlohmann::json& layers = config.at("mlp_only_layers");
  require_array(layers, reader.location() / "mlp_only_layers");
  if (!layers.empty()) {
    (reader.location() / "mlp_only_layers")
        .fail(
            "dense layers by list are not supported; Strata's moe block names dense layers as "
            "the first k and every n-th (decoder_sparse_step)");
  }
}

// The rules between an MoE config's keys, reported at the config's own keys (validate_model then
// finds nothing left to refuse in the moe block).
void check_moe_keys(const HfConfigReader& reader, const MoeConfig& moe,
                    std::string_view experts_key) {
  if (moe.experts_per_token > moe.num_experts) {
    (reader.location() / "num_experts_per_tok")
        .fail(fmt::format("{} is more than {}={}", moe.experts_per_token, experts_key,
                          moe.num_experts));
  }
  if (moe.num_experts % moe.router.expert_groups != 0) {
    (reader.location() / "n_group")
        .fail(fmt::format("{} does not divide {}={}", moe.router.expert_groups, experts_key,
                          moe.num_experts));
  }
  if (moe.router.groups_per_token > moe.router.expert_groups ||
      moe.experts_per_token >
          moe.router.groups_per_token * (moe.num_experts / moe.router.expert_groups)) {
    (reader.location() / "topk_group")
        .fail(fmt::format("{} of n_group={} groups cannot hold num_experts_per_tok={} experts",
                          moe.router.groups_per_token, moe.router.expert_groups,
                          moe.experts_per_token));
  }
}

// Mixtral (every layer MoE, no shared expert, experts of intermediate_size).
MoeConfig import_mixtral_moe(const HfConfigReader& reader, const ModelConfig& model) {
  MoeConfig moe;
  moe.num_experts = reader.integer("num_local_experts", {1, kMaxExperts});
  moe.experts_per_token =
      reader.optional_integer("num_experts_per_tok", {1, kMaxExperts}).value_or(2);
  moe.expert_ffn_hidden_size = model.ffn_hidden_size;
  moe.router.aux_loss_coefficient = reader.number("router_aux_loss_coef", 0.001, kCoefficient);
  check_moe_keys(reader, moe, "num_local_experts");
  return moe;
}

// Qwen2-MoE and Qwen3-MoE: experts of moe_intermediate_size on every decoder_sparse_step-th layer;
// Qwen2-MoE adds one gated shared expert of shared_expert_intermediate_size.
MoeConfig import_qwen_moe(const HfConfigReader& reader, const nlohmann::json& config,
                          HfFamily family, const ModelConfig& model) {
  require_no_mlp_only_layers(reader, config);
  MoeConfig moe;
  moe.num_experts = reader.integer("num_experts", {1, kMaxExperts});
  moe.experts_per_token = reader.integer("num_experts_per_tok", {1, kMaxExperts});
  moe.expert_ffn_hidden_size = reader.integer("moe_intermediate_size", {1, 1 << 22});
  moe.moe_layer_interval = reader.optional_integer("decoder_sparse_step", {1, 4096}).value_or(1);
  if (moe.num_moe_layers(model.num_layers) == 0) {
    (reader.location() / "decoder_sparse_step")
        .fail(fmt::format("{}: a MoE layer every {} leaves none of num_hidden_layers={}",
                          moe.moe_layer_interval, moe.moe_layer_interval, model.num_layers));
  }
  if (family == HfFamily::qwen2_moe) {
    const std::int64_t shared =
        reader.optional_integer("shared_expert_intermediate_size", {0, 1 << 22}).value_or(0);
    if (shared > 0) {
      moe.num_shared_experts = 1;
      moe.shared_expert_ffn_hidden_size = shared;
      moe.shared_expert_gate = true;
    }
  }
  moe.router.normalize_top_k = reader.boolean("norm_topk_prob", false);
  moe.router.aux_loss_coefficient = reader.number("router_aux_loss_coef", 0.001, kCoefficient);
  check_moe_keys(reader, moe, "num_experts");
  return moe;
}

// DeepSeek-V3: dense first_k_dense_replace layers, then MoE layers with n_shared_experts shared
// experts of moe_intermediate_size (transformers builds them as one MLP n_shared times as wide:
// the same parameters and FLOPs) and group-limited sigmoid routing.
MoeConfig import_deepseek_moe(const HfConfigReader& reader, const ModelConfig& model) {
  MoeConfig moe;
  moe.num_experts = reader.integer("n_routed_experts", {1, kMaxExperts});
  moe.experts_per_token = reader.integer("num_experts_per_tok", {1, kMaxExperts});
  moe.expert_ffn_hidden_size = reader.integer("moe_intermediate_size", {1, 1 << 22});
  moe.num_shared_experts = reader.optional_integer("n_shared_experts", {0, 64}).value_or(0);
  moe.shared_expert_ffn_hidden_size = moe.num_shared_experts > 0 ? moe.expert_ffn_hidden_size : 0;
  moe.first_dense_layers =
      reader.optional_integer("first_k_dense_replace", {0, kMaxLayers}).value_or(0);
  if (moe.first_dense_layers >= model.num_layers) {
    (reader.location() / "first_k_dense_replace")
        .fail(fmt::format("{} dense layers first leave none of num_hidden_layers={} a MoE layer",
                          moe.first_dense_layers, model.num_layers));
  }
  // DeepSeek counts moe_layer_freq from layer 0, Strata's interval from the first MoE layer: the
  // two agree for 1, the value every DeepSeek-V2/V3 config has.
  if (reader.optional_integer("moe_layer_freq", {1, kMaxLayers}).value_or(1) != 1) {
    (reader.location() / "moe_layer_freq")
        .fail("only 1 (every layer after the dense ones) is supported");
  }
  const std::string scoring = reader.string("scoring_func").value_or("softmax");
  const std::optional<RouterScoreFunction> score = value_of(scoring, kRouterScoreFunctionNames);
  if (!score) {
    (reader.location() / "scoring_func")
        .fail(fmt::format("\"{}\" is not \"softmax\" or \"sigmoid\"", scoring));
  }
  moe.router.score_function = *score;
  moe.router.expert_groups = reader.optional_integer("n_group", {1, kMaxExperts}).value_or(1);
  moe.router.groups_per_token =
      reader.optional_integer("topk_group", {1, kMaxExperts}).value_or(moe.router.expert_groups);
  // "noaux_tc": top-k over scores plus a learned correction bias (auxiliary-loss-free balancing).
  moe.router.expert_bias = reader.string("topk_method").value_or("") == "noaux_tc";
  moe.router.normalize_top_k = reader.boolean("norm_topk_prob", false);
  moe.router.scaling_factor = reader.number(
      "routed_scaling_factor", 1.0, {.minimum = 0, .maximum = 1e3, .minimum_exclusive = true});
  moe.router.aux_loss_coefficient = reader.number("aux_loss_alpha", 0.0, kCoefficient);
  check_moe_keys(reader, moe, "n_routed_experts");
  return moe;
}

MlaConfig import_mla(const HfConfigReader& reader) {
  MlaConfig mla;
  mla.q_lora_rank = reader.optional_integer("q_lora_rank", {1, kMaxLatentRank}).value_or(0);
  mla.kv_lora_rank = reader.integer("kv_lora_rank", {1, kMaxLatentRank});
  mla.qk_nope_head_dim = reader.integer("qk_nope_head_dim", {0, 4096});
  mla.qk_rope_head_dim = reader.integer("qk_rope_head_dim", {2, 4096});
  mla.v_head_dim = reader.integer("v_head_dim", {1, 4096});
  return mla;
}

ModelConfig import_gpt2(const HfConfigReader& reader) {
  ModelConfig model = ModelConfig::defaults_for(Architecture::gpt);
  model.num_layers = reader.integer("n_layer", {1, kMaxLayers});
  model.hidden_size = reader.integer("n_embd", {1, kMaxHiddenSize});
  model.num_attention_heads = reader.integer("n_head", {1, kMaxHeads});
  model.num_kv_heads = model.num_attention_heads;
  if (model.hidden_size % model.num_attention_heads != 0) {
    (reader.location() / "n_head")
        .fail(fmt::format("{} does not divide n_embd={}", model.num_attention_heads,
                          model.hidden_size));
  }
  model.head_dim = model.hidden_size / model.num_attention_heads;
  model.ffn_hidden_size =
      reader.optional_integer("n_inner", {1, 4 * kMaxHiddenSize}).value_or(4 * model.hidden_size);
  model.vocab_size = reader.integer("vocab_size", {1, kMaxVocabSize});
  model.max_seq_length = reader.given("n_positions")
                             ? reader.integer("n_positions", {1, kMaxSeqLength})
                             : reader.integer("n_ctx", {1, kMaxSeqLength});
  model.norm_epsilon = reader.number("layer_norm_epsilon", 1e-5,
                                     {.minimum = 0, .maximum = 1, .minimum_exclusive = true});
  model.dropout =
      reader.number("resid_pdrop", 0.1, {.minimum = 0, .maximum = 1, .maximum_exclusive = true});
  model.tied_embeddings = reader.boolean("tie_word_embeddings", true);
  const std::string activation = reader.string("activation_function").value_or("gelu_new");
  if (activation != "gelu_new" && activation != "gelu" && activation != "gelu_pytorch_tanh") {
    (reader.location() / "activation_function")
        .fail(fmt::format("\"{}\" is not supported: Strata's gpt MLP uses GELU", activation));
  }
  return model;
}

// The full_attention_interval that gives `full` (which layers attend fully), or nullopt when no
// "full every n-th" pattern does: 0 for none full, n when exactly the layers i with (i + 1) % n
// == 0 are.
std::optional<std::int64_t> full_attention_interval(const std::vector<bool>& full) {
  const auto first = std::find(full.begin(), full.end(), true);
  if (first == full.end()) return 0;
  const auto interval = static_cast<std::int64_t>(first - full.begin()) + 1;
  if (interval < 2) return std::nullopt;
  for (std::size_t i = 0; i < full.size(); ++i) {
    if (full[i] != ((static_cast<std::int64_t>(i) + 1) % interval == 0)) return std::nullopt;
  }
  return interval;
}

// Sliding windows, from the config's per-layer "layer_types" where it has them (transformers ≥
// 4.53 writes them for every family), else by the family's rule: Mistral windows every layer
// when sliding_window is set, GPT-OSS alternates (windowed first), and Qwen's windows (from
// max_window_layers on, only with use_sliding_window) have no "full every n-th" pattern.
std::optional<SlidingWindow> import_sliding_window(const HfConfigReader& reader,
                                                   const nlohmann::json& config, HfFamily family,
                                                   std::int64_t num_layers) {
  std::vector<bool> full;
  if (reader.given("layer_types")) {
    const nlohmann::json& types = config.at("layer_types");
    const JsonLocation at_types = reader.location() / "layer_types";
    require_array(types, at_types);
    if (static_cast<std::int64_t>(types.size()) != num_layers) {
      at_types.fail(fmt::format("{} entries for num_hidden_layers={}", types.size(), num_layers));
    }
    for (std::size_t i = 0; i < types.size(); ++i) {
      const nlohmann::json& type = types.at(i);
      if (type == "full_attention" || type == "sliding_attention") {
        full.push_back(type == "full_attention");
      } else {
        (at_types / static_cast<std::int64_t>(i))
            .fail(fmt::format("{} is not \"full_attention\" or \"sliding_attention\"",
                              describe_json_value(type)));
      }
    }
  } else if (family == HfFamily::mistral) {
    full.assign(static_cast<std::size_t>(num_layers), !reader.given("sliding_window"));
  } else if (family == HfFamily::gpt_oss) {
    for (std::int64_t i = 0; i < num_layers; ++i) full.push_back(i % 2 == 1);
  } else if ((family == HfFamily::qwen2 || family == HfFamily::qwen3 ||
              family == HfFamily::qwen2_moe || family == HfFamily::qwen3_moe) &&
             reader.boolean("use_sliding_window", false)) {
    (reader.location() / "use_sliding_window")
        .fail(
            "true is not supported: Qwen windows the layers from max_window_layers on, and "
            "Strata's sliding_window names full layers as every n-th");
  } else {
    return std::nullopt;
  }
  if (std::find(full.begin(), full.end(), false) == full.end()) return std::nullopt;
  const std::optional<std::int64_t> interval = full_attention_interval(full);
  if (!interval) {
    (reader.location() / "layer_types")
        .fail("full-attention layers that are not every n-th layer (n ≥ 2) are not supported");
  }
  return SlidingWindow{.size = reader.integer("sliding_window", {1, kMaxSeqLength}),
                       .full_attention_interval = *interval};
}

// GPT-OSS: every layer MoE (num_local_experts of intermediate_size, softmax over the top-k
// logits of a biased router), experts with biases and the clamped SwiGLU (α = 1.702, a constant
// of its modeling code; the limit from swiglu_limit), attention with biases and sinks.
void import_gpt_oss(const HfConfigReader& reader, ModelConfig& model) {
  model.mlp_activation = MlpActivation::clamped_swiglu;
  model.swiglu_limit =
      reader.number("swiglu_limit", 7.0, {.minimum = 0, .maximum = 1e6, .minimum_exclusive = true});
  model.swiglu_alpha = 1.702;
  model.mlp_bias = true;
  model.attention_sinks = true;
  MoeConfig moe;
  moe.num_experts = reader.integer("num_local_experts", {1, kMaxExperts});
  moe.experts_per_token = reader.given("num_experts_per_tok")
                              ? reader.integer("num_experts_per_tok", {1, kMaxExperts})
                              : reader.integer("experts_per_token", {1, kMaxExperts});
  moe.expert_ffn_hidden_size = model.ffn_hidden_size;
  moe.router.logit_bias = true;
  moe.router.normalize_top_k = true;
  moe.router.aux_loss_coefficient = reader.number("router_aux_loss_coef", 0.9, kCoefficient);
  check_moe_keys(reader, moe, "num_local_experts");
  model.moe = moe;
}

}  // namespace

ModelConfig import_hf_config(const nlohmann::json& config, const JsonLocation& location,
                             const std::string& fallback_name) {
  require_object(config, location);
  const HfArchitecture& architecture = find_architecture(config, location);
  const HfConfigReader reader(config, location);
  ModelConfig model = architecture.family == HfFamily::gpt2
                          ? import_gpt2(reader)
                          : import_llama_family(reader, architecture.family);
  switch (architecture.family) {
    case HfFamily::mixtral:
      model.moe = import_mixtral_moe(reader, model);
      break;
    case HfFamily::qwen2_moe:
    case HfFamily::qwen3_moe:
      model.moe = import_qwen_moe(reader, config, architecture.family, model);
      break;
    case HfFamily::deepseek_v3:
      model.moe = import_deepseek_moe(reader, model);
      model.mla = import_mla(reader);
      model.head_dim = model.mla->qk_head_dim();
      // DeepSeek-V3's checkpoint carries its MTP module (Kimi K2's says 0: none); the loss weight
      // is a training choice the config does not record, Megatron-Core's default then.
      if (const std::optional<std::int64_t> modules =
              reader.optional_integer("num_nextn_predict_layers", {0, kMaxMtpModules});
          modules && *modules > 0) {
        model.mtp = MultiTokenPrediction{.num_modules = *modules};
      }
      break;
    case HfFamily::gpt_oss:
      import_gpt_oss(reader, model);
      break;
    default:
      break;
  }
  if (architecture.family != HfFamily::gpt2) {
    model.sliding_window =
        import_sliding_window(reader, config, architecture.family, model.num_layers);
  }
  model.checkpoint_dtype = checkpoint_dtype(reader, config);
  const std::optional<std::string> name_or_path = reader.string("_name_or_path");
  const std::string from_path =
      name_or_path ? std::filesystem::path(*name_or_path).filename().string() : "";
  model.name = from_path.empty() ? fallback_name : from_path;
  validate_model(model, location);
  return model;
}

}  // namespace strata::schemas
