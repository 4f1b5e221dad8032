// The plan `strata train` runs and the device it runs on: read from --plan (a GPU cluster's plan
// trains on cuda unless --device says otherwise), or made from --model and the batch and layout
// flags — on the CPU for a cpu-local cluster of the job's ranks (or a cluster file strata profile
// measured on the CPU), on cuda for one GPU of a GPU cluster.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "commands.h"
#include "strata/executor/tensor/scalar_type.h"
#include "strata/schemas/plan.h"
#include "strata/schemas/plan_set.h"

namespace strata::tools {

struct TrainPlan {
  schemas::Plan plan;                        // the first one a plan set's run trains under
  std::optional<schemas::PlanSet> plan_set;  // when --plan names a plan set
  std::string source = "command line";       // the plan file, in messages
  std::filesystem::path directory;           // where relative paths in the plan resolve
  executor::Device device = executor::Device::cpu;
};

// The plan of a job of `world_size` ranks. Refuses (schemas::InputError) a --model plan without a
// model, bf16 off the GPU, and a cluster of the wrong kind for the device. Writes --write-plan when
// `writes_files` (rank 0).
TrainPlan train_plan_of(const TrainOptions& options, std::int64_t world_size, bool writes_files);

}  // namespace strata::tools
