// Every invalid document in tests/fixtures/<kind>/invalid_cases.json must be refused with exactly
// its recorded one-line message. Each case is a valid fixture plus a JSON Patch, or raw text.
// After an intended change of wording, STRATA_UPDATE_INVALID_CASES=1 rewrites the messages; review
// the diff before committing it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "fixture_paths.h"
#include "strata/schemas/cluster_config.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"
#include "strata/schemas/training_phases.h"

namespace strata::schemas {
namespace {

using strata::testing::fixture;

std::string error_of(const std::string& kind, const nlohmann::json& test_case) {
  const std::string source = kind + ".json";
  try {
    nlohmann::json document;
    if (test_case.contains("text")) {
      document = parse_json_text(test_case.at("text").get<std::string>(), source);
    } else {
      const nlohmann::json base =
          read_json_file(fixture(kind + "/" + test_case.at("base").get<std::string>()));
      document = base.patch(test_case.at("patch"));
    }
    const JsonLocation location(source);
    if (kind == "model") parse_model(document, location);
    if (kind == "cluster") parse_cluster(document, location);
    if (kind == "plan") parse_plan(document, location);
    if (kind == "plan_set") parse_plan_set(document, location);
    if (kind == "phases") parse_training_phases(document, location);
  } catch (const InputError& error) {
    return error.what();
  }
  return "(accepted)";
}

class InvalidDocuments : public ::testing::TestWithParam<std::string> {};

TEST_P(InvalidDocuments, EachIsRefusedWithItsExactMessage) {
  const std::string kind = GetParam();
  const std::filesystem::path cases_path = fixture(kind + "/invalid_cases.json");
  nlohmann::json cases = read_json_file(cases_path);
  ASSERT_GE(cases.size(), 30u) << "the foundation issue asks for at least 30 per format";
  const bool update = std::getenv("STRATA_UPDATE_INVALID_CASES") != nullptr;
  for (nlohmann::json& test_case : cases) {
    const std::string actual = error_of(kind, test_case);
    if (update) {
      test_case["error"] = actual;
      continue;
    }
    EXPECT_EQ(actual, test_case.at("error").get<std::string>()) << "case: " << test_case.at("name");
    EXPECT_EQ(actual.find('\n'), std::string::npos) << "messages are one line";
    EXPECT_EQ(actual.rfind(kind + ".json: ", 0), 0u) << "messages start with the file: " << actual;
  }
  if (update) write_file_atomically(cases_path, cases.dump(1) + "\n");
}

INSTANTIATE_TEST_SUITE_P(AllFormats, InvalidDocuments,
                         ::testing::Values("model", "cluster", "plan", "plan_set", "phases"));

}  // namespace
}  // namespace strata::schemas
