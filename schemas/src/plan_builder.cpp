#include "strata/schemas/plan_builder.h"

#include <fmt/format.h>

namespace strata::schemas {

Plan build_plan(const ModelConfig& model, const ClusterConfig& cluster, const PlanKnobs& knobs,
                const std::string& source) {
  const JsonLocation location(source);
  Plan plan;
  plan.model = model;
  plan.cluster = cluster;
  plan.mesh = knobs.mesh;
  plan.batch.seq_length = knobs.seq_length > 0 ? knobs.seq_length : model.max_seq_length;
  plan.batch.micro_batch_size = knobs.micro_batch_size;
  plan.batch.global_batch_size = knobs.global_batch_size;
  const std::int64_t per_step = knobs.micro_batch_size * knobs.mesh.dp;
  if (per_step <= 0 || knobs.global_batch_size % per_step != 0) {
    (location / "batch" / "global_batch_size")
        .fail(fmt::format("{} is not a multiple of micro_batch_size × dp = {} × {}",
                          knobs.global_batch_size, knobs.micro_batch_size, knobs.mesh.dp));
  }
  plan.batch.num_micro_batches = knobs.global_batch_size / per_step;
  plan.sequence_parallel = knobs.sequence_parallel;
  plan.zero_stage = knobs.zero_stage;
  plan.gradient_bucket_elements = knobs.gradient_bucket_elements;
  plan.overlap_grad_reduce = knobs.overlap_grad_reduce;
  plan.gradient_dtype = knobs.gradient_dtype;
  plan.tp_comm_overlap = knobs.tp_comm_overlap;
  plan.framework = knobs.framework;
  plan.attention = knobs.attention;
  plan.cp_comm = knobs.cp_comm;
  plan.recompute.granularity = knobs.recompute;
  plan.recompute.modules = knobs.recompute_modules;
  plan.schedule.type = knobs.schedule;
  plan.precision = knobs.precision;
  plan.ep_comm_overlap = knobs.ep_comm_overlap;
  plan.cuda_graph_scope = knobs.cuda_graph_scope;
  plan.expert_load_imbalance = knobs.expert_load_imbalance;
  const std::int64_t num_stages = knobs.mesh.pp * knobs.mesh.vpp;
  const std::int64_t slots = model.num_layers + (knobs.embedding_in_pipeline_split ? 1 : 0) +
                             (knobs.loss_in_pipeline_split ? 1 : 0);
  if (num_stages > slots) {
    (location / "mesh" / "vpp")
        .fail(fmt::format("pp × vpp = {} stages exceed num_layers={}{}", num_stages,
                          model.num_layers,
                          slots > model.num_layers
                              ? fmt::format(" and the {} the split counts as layers",
                                            slots - model.num_layers == 2 ? "embedding and loss"
                                            : knobs.embedding_in_pipeline_split ? "embedding"
                                                                                : "loss")
                              : ""));
  }
  plan.stages =
      even_pipeline_stages(model.num_layers, num_stages, knobs.embedding_in_pipeline_split,
                           knobs.loss_in_pipeline_split);
  validate_plan(plan, location);
  return plan;
}

}  // namespace strata::schemas
