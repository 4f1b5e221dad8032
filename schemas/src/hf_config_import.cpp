#include "strata/schemas/hf_config_import.h"

#include <fmt/format.h>

#include <array>
#include <filesystem>
#include <optional>

#include "strata/schemas/object_reader.h"

namespace strata::schemas {
namespace {

enum class HfFamily { llama, mistral, qwen2, gpt2 };

struct HfArchitecture {
  std::string_view architecture;  // "architectures"[0]
  std::string_view model_type;
  HfFamily family;
};

constexpr std::array<HfArchitecture, 4> kSupported{{
    {"LlamaForCausalLM", "llama", HfFamily::llama},
    {"MistralForCausalLM", "mistral", HfFamily::mistral},
    {"Qwen2ForCausalLM", "qwen2", HfFamily::qwen2},
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

std::optional<Dtype> checkpoint_dtype(const HfConfigReader& reader) {
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
  model.qkv_bias = family == HfFamily::qwen2 || attention_bias;  // Qwen2 always biases q, k, v
  model.attention_output_bias = family != HfFamily::qwen2 && attention_bias;
  model.mlp_bias = reader.boolean("mlp_bias", false);
  const std::string activation = reader.string("hidden_act").value_or("silu");
  if (activation != "silu") {
    (reader.location() / "hidden_act")
        .fail(fmt::format("\"{}\" is not supported: Strata's llama MLP is SwiGLU (\"silu\")",
                          activation));
  }
  return model;
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

}  // namespace

ModelConfig import_hf_config(const nlohmann::json& config, const JsonLocation& location,
                             const std::string& fallback_name) {
  require_object(config, location);
  const HfArchitecture& architecture = find_architecture(config, location);
  const HfConfigReader reader(config, location);
  ModelConfig model = architecture.family == HfFamily::gpt2
                          ? import_gpt2(reader)
                          : import_llama_family(reader, architecture.family);
  model.checkpoint_dtype = checkpoint_dtype(reader);
  const std::optional<std::string> name_or_path = reader.string("_name_or_path");
  const std::string from_path =
      name_or_path ? std::filesystem::path(*name_or_path).filename().string() : "";
  model.name = from_path.empty() ? fallback_name : from_path;
  validate_model(model, location);
  return model;
}

}  // namespace strata::schemas
