// `strata reshard --from DIR --to-plan P --out DIR2`: writes a checkpoint for another layout (any
// tp / pp / dp / ZeRO, or one device) from a checkpoint of any layout, values and AdamW moments
// together, one target file in memory at a time. `strata train --plan P --checkpoint-dir DIR2
// --resume` then continues the run on the new layout.
#include <fmt/format.h>

#include <iostream>

#include "cli_checks.h"
#include "commands.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/checkpoint/checkpoint_resharding.h"
#include "strata/executor/train/trainer.h"
#include "strata/executor/zero/sharded_optimizer.h"
#include "strata/layout/state_layout.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {

CLI::App* add_reshard_command(CLI::App& app, ReshardOptions& options) {
  CLI::App* command = app.add_subcommand(
      "reshard", "Write a checkpoint for another plan's layout (tp, pp, dp, ZeRO, or one device)");
  command->add_option("--from", options.from, "A checkpoint directory (DIR/step_N)")->required();
  command->add_option("--to-plan", options.to_plan, "The plan the new checkpoint is for")
      ->required();
  command->add_option("--out", options.out, "Directory to write step_N into")->required();
  return command;
}

int run_reshard(const ReshardOptions& options) {
  const schemas::Plan plan = schemas::load_plan_file(options.to_plan);
  executor::check_plan_runs(plan, options.to_plan, executor::Device::cpu, plan.mesh.world_size());
  // The plan's bucket size fixes how ZeRO shard files are laid out.
  const std::filesystem::path written = executor::reshard_checkpoint(
      options.from, plan.model, layout::state_layout_of(plan), options.out);
  fmt::print("wrote {} for {} rank{} (tp {} × dp {} × pp {}, ZeRO-{})\n", written.string(),
             plan.mesh.world_size(), plan.mesh.world_size() == 1 ? "" : "s", plan.mesh.tp,
             plan.mesh.dp, plan.mesh.pp, plan.zero_stage);
  return 0;
}

}  // namespace strata::tools
