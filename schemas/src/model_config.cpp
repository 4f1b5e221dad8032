#include "strata/schemas/model_config.h"

#include <fmt/format.h>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"

namespace strata::schemas {

ModelConfig ModelConfig::defaults_for(Architecture architecture) {
  ModelConfig model;
  model.architecture = architecture;
  if (architecture == Architecture::llama) {
    model.tied_embeddings = false;
    model.position_embedding = PositionEmbedding::rope;
    model.norm = NormKind::rmsnorm;
    model.mlp_activation = MlpActivation::swiglu;
    model.qkv_bias = false;
    model.attention_output_bias = false;
    model.mlp_bias = false;
    model.rope_theta = 10000.0;
  }
  return model;
}

ModelConfig parse_model(const nlohmann::json& document, const JsonLocation& location) {
  const ObjectReader reader(document, location,
                            {kSchemaVersionKey,
                             kKindKey,
                             kEditorSchemaKey,
                             kDescriptionKey,
                             "name",
                             "architecture",
                             "num_layers",
                             "hidden_size",
                             "ffn_hidden_size",
                             "num_attention_heads",
                             "num_kv_heads",
                             "head_dim",
                             "vocab_size",
                             "max_seq_length",
                             "tied_embeddings",
                             "position_embedding",
                             "norm",
                             "mlp_activation",
                             "qkv_bias",
                             "attention_output_bias",
                             "mlp_bias",
                             "embedding_norm",
                             "qk_norm",
                             "attention_sinks",
                             "swiglu_limit",
                             "swiglu_alpha",
                             "sliding_window",
                             "dropout",
                             "norm_epsilon",
                             "rope_theta",
                             "checkpoint_dtype",
                             "moe",
                             "mla",
                             "mtp"});
  check_document_header(reader, DocumentKind::model, kModelSchemaVersion);

  ModelConfig model = ModelConfig::defaults_for(reader.choice("architecture", kArchitectureNames));
  model.name = reader.string("name");
  model.description = reader.optional_string(kDescriptionKey);
  model.num_layers = reader.integer("num_layers", {1, kMaxLayers});
  model.hidden_size = reader.integer("hidden_size", {1, kMaxHiddenSize});
  model.ffn_hidden_size = reader.integer("ffn_hidden_size", {1, 4 * kMaxHiddenSize});
  model.num_attention_heads = reader.integer("num_attention_heads", {1, kMaxHeads});
  model.num_kv_heads =
      reader.optional_integer("num_kv_heads", {1, kMaxHeads}).value_or(model.num_attention_heads);
  const std::optional<std::int64_t> head_dim = reader.optional_integer("head_dim", {1, 4096});
  model.vocab_size = reader.integer("vocab_size", {1, kMaxVocabSize});
  model.max_seq_length = reader.integer("max_seq_length", {1, kMaxSeqLength});
  model.tied_embeddings =
      reader.optional_boolean("tied_embeddings").value_or(model.tied_embeddings);
  model.position_embedding = reader.optional_choice("position_embedding", kPositionEmbeddingNames)
                                 .value_or(model.position_embedding);
  model.norm = reader.optional_choice("norm", kNormKindNames).value_or(model.norm);
  model.mlp_activation =
      reader.optional_choice("mlp_activation", kMlpActivationNames).value_or(model.mlp_activation);
  model.qkv_bias = reader.optional_boolean("qkv_bias").value_or(model.qkv_bias);
  model.attention_output_bias =
      reader.optional_boolean("attention_output_bias").value_or(model.attention_output_bias);
  model.mlp_bias = reader.optional_boolean("mlp_bias").value_or(model.mlp_bias);
  model.embedding_norm = reader.optional_boolean("embedding_norm").value_or(false);
  model.qk_norm = reader.optional_boolean("qk_norm").value_or(false);
  model.attention_sinks = reader.optional_boolean("attention_sinks").value_or(false);
  for (const auto& [key, value] : {std::pair{"swiglu_limit", &model.swiglu_limit},
                                   std::pair{"swiglu_alpha", &model.swiglu_alpha}}) {
    const std::optional<double> given =
        reader.optional_number(key, {.minimum = 0, .maximum = 1e6, .minimum_exclusive = true});
    if (given && model.mlp_activation != MlpActivation::clamped_swiglu) {
      reader.at(key).fail(
          fmt::format("given, but mlp_activation is \"{}\"; only clamped_swiglu uses it",
                      name_of(model.mlp_activation, kMlpActivationNames)));
    }
    *value = given.value_or(*value);
  }
  if (reader.has("sliding_window")) {
    model.sliding_window =
        parse_sliding_window(reader.object("sliding_window"), reader.at("sliding_window"));
  }
  model.dropout =
      reader.optional_number("dropout", {.minimum = 0, .maximum = 1, .maximum_exclusive = true})
          .value_or(0.0);
  model.norm_epsilon =
      reader
          .optional_number(
              "norm_epsilon",
              {.minimum = 0, .maximum = 1, .minimum_exclusive = true, .maximum_exclusive = true})
          .value_or(1e-5);
  const std::optional<double> rope_theta = reader.optional_number(
      "rope_theta", {.minimum = 0, .maximum = 1e12, .minimum_exclusive = true});
  model.checkpoint_dtype = reader.optional_choice("checkpoint_dtype", kDtypeNames);
  if (reader.has("moe")) {
    model.moe = parse_moe(reader.object("moe"), reader.at("moe"), model.num_layers);
  }
  if (reader.has("mla")) model.mla = parse_mla(reader.object("mla"), reader.at("mla"));
  if (reader.has("mtp")) {
    model.mtp = parse_multi_token_prediction(reader.object("mtp"), reader.at("mtp"));
  }

  if (model.mla) {
    // Latent attention fixes the head widths and gives every query head its own key and value.
    if (head_dim && *head_dim != model.mla->qk_head_dim()) {
      reader.at("head_dim")
          .fail(fmt::format(
              "{} is not qk_nope_head_dim + qk_rope_head_dim = {} of the mla block; leave it out",
              *head_dim, model.mla->qk_head_dim()));
    }
    model.head_dim = model.mla->qk_head_dim();
  } else if (head_dim) {
    model.head_dim = *head_dim;
  } else if (model.hidden_size % model.num_attention_heads != 0) {
    reader.at("num_attention_heads")
        .fail(fmt::format("{} does not divide hidden_size={}; give head_dim when the heads are not "
                          "hidden_size/num_attention_heads wide",
                          model.num_attention_heads, model.hidden_size));
  } else {
    model.head_dim = model.hidden_size / model.num_attention_heads;
  }
  if (model.position_embedding != PositionEmbedding::rope) {
    if (rope_theta) {
      reader.at("rope_theta")
          .fail(
              fmt::format("given, but position_embedding is \"{}\"; only rotary embeddings use it",
                          name_of(model.position_embedding, kPositionEmbeddingNames)));
    }
    model.rope_theta.reset();
  } else {
    model.rope_theta = rope_theta.value_or(10000.0);
  }
  validate_model(model, location);
  return model;
}

void validate_model(const ModelConfig& model, const JsonLocation& location) {
  if (model.moe) {
    const MoeConfig& moe = *model.moe;
    validate_moe(moe, location / "moe", model.num_layers);
    // Bounds on the experts' summed width, so that every parameter and byte count stays far
    // inside int64 (the largest published models use below 2^20).
    if (moe.num_experts * moe.expert_ffn_hidden_size > kMaxExpertsWidth) {
      (location / "moe" / "expert_ffn_hidden_size")
          .fail(
              fmt::format("num_experts × expert_ffn_hidden_size = {} × {} is above the maximum {}",
                          moe.num_experts, moe.expert_ffn_hidden_size, kMaxExpertsWidth));
    }
    if (moe.num_shared_experts * moe.shared_expert_ffn_hidden_size > kMaxExpertsWidth) {
      (location / "moe" / "shared_expert_ffn_hidden_size")
          .fail(fmt::format("num_shared_experts × shared_expert_ffn_hidden_size = {} × {} is above "
                            "the maximum {}",
                            moe.num_shared_experts, moe.shared_expert_ffn_hidden_size,
                            kMaxExpertsWidth));
    }
  }
  if (model.mla) {
    if (model.num_kv_heads != model.num_attention_heads) {
      (location / "num_kv_heads")
          .fail(fmt::format("{} differs from num_attention_heads={}: latent attention (mla) gives "
                            "every head its own key and value",
                            model.num_kv_heads, model.num_attention_heads));
    }
    if (model.position_embedding != PositionEmbedding::rope) {
      (location / "position_embedding")
          .fail(fmt::format("\"{}\": latent attention (mla) rotates qk_rope_head_dim features, "
                            "so it needs rope",
                            name_of(model.position_embedding, kPositionEmbeddingNames)));
    }
    if (model.qkv_bias) {
      (location / "qkv_bias").fail("true, but latent attention (mla) projections have no biases");
    }
    if (model.qk_norm) {
      (location / "qk_norm")
          .fail("true, but latent attention (mla) normalises its latents instead");
    }
  }
  if (model.sliding_window && model.sliding_window->full_attention_interval > model.num_layers) {
    (location / "sliding_window" / "full_attention_interval")
        .fail(fmt::format("{} is more than num_layers={}: no layer would attend fully; leave it "
                          "out to window every layer",
                          model.sliding_window->full_attention_interval, model.num_layers));
  }
  if (model.num_kv_heads > model.num_attention_heads) {
    (location / "num_kv_heads")
        .fail(fmt::format("{} is more than num_attention_heads={}", model.num_kv_heads,
                          model.num_attention_heads));
  }
  if (model.num_attention_heads % model.num_kv_heads != 0) {
    (location / "num_kv_heads")
        .fail(fmt::format("{} does not divide num_attention_heads={}: every kv head must serve "
                          "the same number of query heads",
                          model.num_kv_heads, model.num_attention_heads));
  }
  if (model.position_embedding == PositionEmbedding::rope && model.head_dim % 2 != 0) {
    (location / "head_dim")
        .fail(fmt::format("{} must be even for rotary position embedding", model.head_dim));
  }
  if (model.attention_width() > 4 * kMaxHiddenSize) {
    (location / "head_dim")
        .fail(fmt::format("num_attention_heads × head_dim = {} × {} is above the maximum width {}",
                          model.num_attention_heads, model.head_dim, 4 * kMaxHiddenSize));
  }
}

nlohmann::json model_to_json(const ModelConfig& model) {
  nlohmann::json document = {
      {kSchemaVersionKey, kModelSchemaVersion},
      {kKindKey, "model"},
      {"name", model.name},
      {"architecture", name_of(model.architecture, kArchitectureNames)},
      {"num_layers", model.num_layers},
      {"hidden_size", model.hidden_size},
      {"ffn_hidden_size", model.ffn_hidden_size},
      {"num_attention_heads", model.num_attention_heads},
      {"num_kv_heads", model.num_kv_heads},
      {"head_dim", model.head_dim},
      {"vocab_size", model.vocab_size},
      {"max_seq_length", model.max_seq_length},
      {"tied_embeddings", model.tied_embeddings},
      {"position_embedding", name_of(model.position_embedding, kPositionEmbeddingNames)},
      {"norm", name_of(model.norm, kNormKindNames)},
      {"mlp_activation", name_of(model.mlp_activation, kMlpActivationNames)},
      {"qkv_bias", model.qkv_bias},
      {"attention_output_bias", model.attention_output_bias},
      {"mlp_bias", model.mlp_bias},
      {"embedding_norm", model.embedding_norm},
      {"dropout", model.dropout},
      {"norm_epsilon", model.norm_epsilon},
  };
  if (model.description) document[kDescriptionKey] = *model.description;
  if (model.rope_theta) document["rope_theta"] = *model.rope_theta;
  if (model.checkpoint_dtype) {
    document["checkpoint_dtype"] = name_of(*model.checkpoint_dtype, kDtypeNames);
  }
  // Written only when set, as the blocks below: a plan's content hash covers its model's JSON, and
  // plans made before these fields existed keep their hash.
  if (model.qk_norm) document["qk_norm"] = true;
  if (model.attention_sinks) document["attention_sinks"] = true;
  if (model.mlp_activation == MlpActivation::clamped_swiglu) {
    document["swiglu_limit"] = model.swiglu_limit;
    document["swiglu_alpha"] = model.swiglu_alpha;
  }
  if (model.sliding_window)
    document["sliding_window"] = sliding_window_to_json(*model.sliding_window);
  if (model.moe) document["moe"] = moe_to_json(*model.moe);
  if (model.mla) document["mla"] = mla_to_json(*model.mla);
  if (model.mtp) document["mtp"] = multi_token_prediction_to_json(*model.mtp);
  return document;
}

}  // namespace strata::schemas
