// serialize_documents OUT_DIR FILE...: parses each model, cluster, plan, plan set or phases
// file (or HF config)
// and writes what Strata serializes for it to OUT_DIR/<name>, so that the schema conformance
// test can check Strata's own output against the published schema files.
#include <cstdio>
#include <filesystem>

#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"

int main(int argc, char** argv) {
  using namespace strata::schemas;
  if (argc < 3) {
    std::fprintf(stderr, "usage: serialize_documents OUT_DIR FILE...\n");
    return 2;
  }
  const std::filesystem::path out_dir = argv[1];
  std::filesystem::create_directories(out_dir);
  try {
    for (int i = 2; i < argc; ++i) {
      const std::filesystem::path file = argv[i];
      const LoadedDocument document = load_document_file(file);
      nlohmann::json serialized;
      if (const auto* model = std::get_if<ModelConfig>(&document.content)) {
        serialized = model_to_json(*model);
      } else if (const auto* cluster = std::get_if<ClusterConfig>(&document.content)) {
        serialized = cluster_to_json(*cluster);
      } else if (const auto* set = std::get_if<PlanSet>(&document.content)) {
        serialized = plan_set_to_json(*set);
      } else if (const auto* phases = std::get_if<TrainingPhases>(&document.content)) {
        serialized = training_phases_to_json(*phases);
      } else {
        serialized = plan_to_json(std::get<Plan>(document.content));
      }
      write_json_document(out_dir / file.filename(), serialized);
    }
  } catch (const InputError& error) {
    std::fprintf(stderr, "%s\n", error.what());
    return 1;
  }
  return 0;
}
