#include "strata/executor/checkpoint/checkpoint.h"

#include <unistd.h>

#include "checkpoint_files.h"
#include "state_document.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"

namespace strata::executor {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path write_checkpoint(const fs::path& directory, const schemas::ModelConfig& model,
                          const ParameterStore& parameters, const OptimizerMoments& moments,
                          const TrainingState& state) {
  const fs::path temporary = create_temporary_checkpoint(directory, state.step, ::getpid());
  const Tensor values = on_host(parameters.values());
  const Tensor first_moments = on_host(moments.first);
  const Tensor second_moments = on_host(moments.second);
  json files{{"model.bin", write_tensor_file(temporary / "model.bin", {&values})},
             {"optimizer.bin",
              write_tensor_file(temporary / "optimizer.bin", {&first_moments, &second_moments})}};
  const json document = state_document(model, parameters, state, std::move(files), json());
  return commit_checkpoint(directory, temporary, state.step, document.dump(2) + "\n");
}

TrainingState read_checkpoint(const fs::path& checkpoint, const schemas::ModelConfig& model,
                              ParameterStore& parameters, OptimizerMoments& moments) {
  return reading_checkpoint_state(checkpoint, [&] {
    TrainingState resumed;
    if (recorded_checkpoint_layout(checkpoint)) {
      // Written by a parallel run: gather this one device's state from its files.
      resumed =
          read_resharded_checkpoint(checkpoint, model, std::nullopt, 0, {&parameters.values()},
                                    {&moments.first, &moments.second});
    } else {
      const json state = verified_state(checkpoint, model, parameters, false);
      read_tensor_file(checkpoint, state, "model.bin", {&parameters.values()});
      read_tensor_file(checkpoint, state, "optimizer.bin", {&moments.first, &moments.second});
      resumed = training_state_of(state);
    }
    parameters.refresh_compute_values();
    return resumed;
  });
}

TrainingState read_checkpoint_values(const fs::path& checkpoint, const schemas::ModelConfig& model,
                                     ParameterStore& parameters) {
  return reading_checkpoint_state(checkpoint, [&] {
    TrainingState resumed;
    if (recorded_checkpoint_layout(checkpoint)) {
      resumed =
          read_resharded_checkpoint(checkpoint, model, std::nullopt, 0, {&parameters.values()}, {});
    } else {
      const json state = verified_state(checkpoint, model, parameters, false);
      read_tensor_file(checkpoint, state, "model.bin", {&parameters.values()});
      resumed = training_state_of(state);
    }
    parameters.refresh_compute_values();
    return resumed;
  });
}

}  // namespace strata::executor
