#include "strata/schemas/plan_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "strata/schemas/document_kind.h"
#include "strata/schemas/object_reader.h"
#include "strata/schemas/plan_rules.h"

namespace strata::schemas {
namespace {

bool valid_id(const std::string& id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace

std::string read_plan_id(const ObjectReader& reader, std::string_view key) {
  const std::string id = reader.string(key);
  if (!valid_id(id)) {
    reader.at(key).fail(
        fmt::format("\"{}\": an id is 1 to 64 letters, digits, '.', '_' or '-'", id));
  }
  return id;
}

const PlanSetEntry* PlanSet::find(const std::string& id) const {
  for (const PlanSetEntry& entry : plans) {
    if (entry.id == id) return &entry;
  }
  return nullptr;
}

std::string PlanSet::id_list() const {
  std::string ids;
  for (const PlanSetEntry& entry : plans) ids += (ids.empty() ? "" : ", ") + entry.id;
  return ids;
}

PlanSet parse_plan_set(const nlohmann::json& document, const JsonLocation& location) {
  const ObjectReader reader(document, location,
                            {kSchemaVersionKey, kKindKey, kEditorSchemaKey, kDescriptionKey,
                             "plans", "phases", "switches", "total_steps"});
  check_document_header(reader, DocumentKind::plan_set, kPlanSetSchemaVersion);
  PlanSet set;
  set.description = reader.optional_string(kDescriptionKey);
  const nlohmann::json& plans = reader.array("plans", 1);
  std::set<std::string> ids;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    const JsonLocation where = reader.at("plans") / i;
    const ObjectReader entry(plans[i], where, {"id", "plan"});
    PlanSetEntry parsed{read_plan_id(entry, "id"),
                        parse_plan(entry.object("plan"), entry.at("plan"))};
    if (!ids.insert(parsed.id).second) {
      entry.at("id").fail(fmt::format("\"{}\" names another plan of the set too", parsed.id));
    }
    if (!set.plans.empty()) {
      // One run switches between them: the same model, precision and ranks.
      const PlanSetEntry& first = set.plans.front();
      if (const std::optional<PlanRefusal> refusal =
              switch_refusal(first.plan, fmt::format("plan \"{}\"", first.id), parsed.plan)) {
        (entry.at("plan") / refusal->json_path.substr(1)).fail(refusal->rule);
      }
    }
    set.plans.push_back(std::move(parsed));
  }
  const auto known = [&](const ObjectReader& owner, std::string_view key) {
    const std::string id = read_plan_id(owner, key);
    if (set.find(id) == nullptr) {
      owner.at(key).fail(fmt::format("\"{}\" is not an id of the set's plans", id));
    }
    return id;
  };
  if (reader.has("phases")) {
    const nlohmann::json& phases = reader.array("phases", 1);
    for (std::size_t i = 0; i < phases.size(); ++i) {
      const ObjectReader phase(phases[i], reader.at("phases") / i, {"first_step", "plan"});
      PlanSetPhase parsed{phase.integer("first_step", {0, kMaxTrainingSteps}),
                          known(phase, "plan")};
      if (i == 0 && parsed.first_step != 0) {
        phase.at("first_step")
            .fail(fmt::format("{}: the first phase starts at step 0", parsed.first_step));
      }
      if (i > 0 && parsed.first_step <= set.phases.back().first_step) {
        phase.at("first_step")
            .fail(fmt::format("{}: phases start in increasing steps (the previous at {})",
                              parsed.first_step, set.phases.back().first_step));
      }
      set.phases.push_back(std::move(parsed));
    }
  }
  if (reader.has("total_steps")) {
    set.total_steps = reader.integer("total_steps", {1, kMaxTrainingSteps});
    if (!set.phases.empty() && *set.total_steps <= set.phases.back().first_step) {
      reader.at("total_steps")
          .fail(fmt::format("{}: the last phase starts at step {}", *set.total_steps,
                            set.phases.back().first_step));
    }
  }
  if (reader.has("switches")) {
    const nlohmann::json& switches = reader.array("switches");
    for (std::size_t i = 0; i < switches.size(); ++i) {
      const ObjectReader cost(switches[i], reader.at("switches") / i,
                              {"from", "to", "most_sent_bytes", "most_received_bytes", "seconds"});
      set.switches.push_back({known(cost, "from"), known(cost, "to"),
                              cost.integer("most_sent_bytes", {0, std::int64_t{1} << 60}),
                              cost.integer("most_received_bytes", {0, std::int64_t{1} << 60}),
                              cost.number("seconds", {0, 1e9})});
    }
  }
  return set;
}

nlohmann::json plan_set_to_json(const PlanSet& set) {
  nlohmann::json document{{std::string(kSchemaVersionKey), kPlanSetSchemaVersion},
                          {std::string(kKindKey), "plan_set"}};
  if (set.description) document[std::string(kDescriptionKey)] = *set.description;
  document["plans"] = nlohmann::json::array();
  for (const PlanSetEntry& entry : set.plans) {
    document["plans"].push_back({{"id", entry.id}, {"plan", plan_to_json(entry.plan)}});
  }
  for (const PlanSetPhase& phase : set.phases) {
    document["phases"].push_back({{"first_step", phase.first_step}, {"plan", phase.plan}});
  }
  if (set.total_steps) document["total_steps"] = *set.total_steps;
  for (const PlanSwitchCost& cost : set.switches) {
    document["switches"].push_back({{"from", cost.from},
                                    {"to", cost.to},
                                    {"most_sent_bytes", cost.most_sent_bytes},
                                    {"most_received_bytes", cost.most_received_bytes},
                                    {"seconds", cost.seconds}});
  }
  return document;
}

}  // namespace strata::schemas
