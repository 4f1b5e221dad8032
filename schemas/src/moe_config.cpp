#include "strata/schemas/moe_config.h"

#include <fmt/format.h>

#include "strata/schemas/object_reader.h"

namespace strata::schemas {
namespace {

constexpr NumberRange kLossCoefficient{.minimum = 0, .maximum = 1e3};

RouterConfig parse_router(const ObjectReader& reader) {
  RouterConfig router;
  router.score_function = reader.optional_choice("score_function", kRouterScoreFunctionNames)
                              .value_or(router.score_function);
  router.expert_groups = reader.optional_integer("expert_groups", {1, kMaxExperts}).value_or(1);
  router.groups_per_token =
      reader.optional_integer("groups_per_token", {1, kMaxExperts}).value_or(router.expert_groups);
  router.expert_bias = reader.optional_boolean("expert_bias").value_or(false);
  const std::optional<double> update_rate =
      reader.optional_number("expert_bias_update_rate", {.minimum = 0, .maximum = 1});
  if (update_rate && !router.expert_bias) {
    reader.at("expert_bias_update_rate")
        .fail("given, but expert_bias is false: there is no bias to update");
  }
  router.expert_bias_update_rate = update_rate.value_or(router.expert_bias_update_rate);
  router.logit_bias = reader.optional_boolean("logit_bias").value_or(false);
  router.normalize_top_k = reader.optional_boolean("normalize_top_k").value_or(true);
  router.scaling_factor =
      reader
          .optional_number("scaling_factor",
                           {.minimum = 0, .maximum = 1e3, .minimum_exclusive = true})
          .value_or(1.0);
  router.aux_loss_coefficient =
      reader.optional_number("aux_loss_coefficient", kLossCoefficient).value_or(0.0);
  router.z_loss_coefficient =
      reader.optional_number("z_loss_coefficient", kLossCoefficient).value_or(0.0);
  return router;
}

}  // namespace

MoeConfig parse_moe(const nlohmann::json& value, const JsonLocation& location,
                    std::int64_t num_layers) {
  const ObjectReader reader(
      value, location,
      {"num_experts", "experts_per_token", "expert_ffn_hidden_size", "num_shared_experts",
       "shared_expert_ffn_hidden_size", "shared_expert_gate", "first_dense_layers",
       "moe_layer_interval", "router", "capacity_factor"});
  MoeConfig moe;
  moe.num_experts = reader.integer("num_experts", {1, kMaxExperts});
  moe.experts_per_token = reader.integer("experts_per_token", {1, kMaxExperts});
  moe.expert_ffn_hidden_size = reader.integer("expert_ffn_hidden_size", {1, 1 << 22});
  moe.num_shared_experts = reader.optional_integer("num_shared_experts", {0, 64}).value_or(0);
  const std::optional<std::int64_t> shared_width =
      reader.optional_integer("shared_expert_ffn_hidden_size", {1, 1 << 22});
  if (shared_width && moe.num_shared_experts == 0) {
    reader.at("shared_expert_ffn_hidden_size")
        .fail("given, but num_shared_experts is 0: there is no shared expert to size");
  }
  moe.shared_expert_ffn_hidden_size =
      moe.num_shared_experts == 0 ? 0 : shared_width.value_or(moe.expert_ffn_hidden_size);
  moe.shared_expert_gate = reader.optional_boolean("shared_expert_gate").value_or(false);
  moe.first_dense_layers = reader.optional_integer("first_dense_layers", {0, 4096}).value_or(0);
  moe.moe_layer_interval = reader.optional_integer("moe_layer_interval", {1, 4096}).value_or(1);
  if (reader.has("router")) {
    moe.router = parse_router(
        ObjectReader(reader.object("router"), reader.at("router"),
                     {"score_function", "expert_groups", "groups_per_token", "expert_bias",
                      "expert_bias_update_rate", "logit_bias", "normalize_top_k", "scaling_factor",
                      "aux_loss_coefficient", "z_loss_coefficient"}));
  }
  moe.capacity_factor = reader.optional_number(
      "capacity_factor", {.minimum = 0, .maximum = 1e3, .minimum_exclusive = true});
  validate_moe(moe, location, num_layers);
  return moe;
}

void validate_moe(const MoeConfig& moe, const JsonLocation& location, std::int64_t num_layers) {
  if (moe.experts_per_token > moe.num_experts) {
    (location / "experts_per_token")
        .fail(
            fmt::format("{} is more than num_experts={}", moe.experts_per_token, moe.num_experts));
  }
  if (moe.shared_expert_gate && moe.num_shared_experts == 0) {
    (location / "shared_expert_gate").fail("true, but num_shared_experts is 0");
  }
  if (moe.num_moe_layers(num_layers) == 0) {
    // Named at the field that leaves no MoE layer: all layers dense first, or an interval longer
    // than what is left after them.
    (location /
     (moe.first_dense_layers >= num_layers ? "first_dense_layers" : "moe_layer_interval"))
        .fail(fmt::format("{} dense layers first and a MoE layer every {} leave none of the "
                          "model's {} layers a MoE layer",
                          moe.first_dense_layers, moe.moe_layer_interval, num_layers));
  }
  const RouterConfig& router = moe.router;
  const JsonLocation at_router = location / "router";
  if (moe.num_experts % router.expert_groups != 0) {
    (at_router / "expert_groups")
        .fail(fmt::format("{} does not divide num_experts={}", router.expert_groups,
                          moe.num_experts));
  }
  if (router.groups_per_token > router.expert_groups) {
    (at_router / "groups_per_token")
        .fail(fmt::format("{} is more than expert_groups={}", router.groups_per_token,
                          router.expert_groups));
  }
  const std::int64_t reachable = router.groups_per_token * (moe.num_experts / router.expert_groups);
  if (moe.experts_per_token > reachable) {
    (at_router / "groups_per_token")
        .fail(fmt::format("{} of {} groups hold {} experts, fewer than experts_per_token={}",
                          router.groups_per_token, router.expert_groups, reachable,
                          moe.experts_per_token));
  }
}

nlohmann::json moe_to_json(const MoeConfig& moe) {
  const RouterConfig& router = moe.router;
  nlohmann::json document = {
      {"num_experts", moe.num_experts},
      {"experts_per_token", moe.experts_per_token},
      {"expert_ffn_hidden_size", moe.expert_ffn_hidden_size},
      {"num_shared_experts", moe.num_shared_experts},
      {"shared_expert_gate", moe.shared_expert_gate},
      {"first_dense_layers", moe.first_dense_layers},
      {"moe_layer_interval", moe.moe_layer_interval},
      {"router",
       {{"score_function", name_of(router.score_function, kRouterScoreFunctionNames)},
        {"expert_groups", router.expert_groups},
        {"groups_per_token", router.groups_per_token},
        {"expert_bias", router.expert_bias},
        {"normalize_top_k", router.normalize_top_k},
        {"scaling_factor", router.scaling_factor},
        {"aux_loss_coefficient", router.aux_loss_coefficient},
        {"z_loss_coefficient", router.z_loss_coefficient}}}};
  if (moe.num_shared_experts > 0) {
    document["shared_expert_ffn_hidden_size"] = moe.shared_expert_ffn_hidden_size;
  }
  // Written only with a bias to update, so that plans of other routers keep their hashes.
  if (router.expert_bias) {
    document["router"]["expert_bias_update_rate"] = router.expert_bias_update_rate;
  }
  if (router.logit_bias) document["router"]["logit_bias"] = true;
  if (moe.capacity_factor) document["capacity_factor"] = *moe.capacity_factor;
  return document;
}

}  // namespace strata::schemas
