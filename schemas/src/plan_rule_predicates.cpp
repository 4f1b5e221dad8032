// The plan rules as predicates (plan_rules.h): each returns the first refusal of its rule, the
// JSON path and the words validate_plan throws, so that the planner and the trainer can ask
// without catching.
#include <fmt/format.h>

#include <string_view>

#include "strata/schemas/plan_rules.h"

namespace strata::schemas {

void fail_at(const JsonLocation& plan_location, const PlanRefusal& refusal) {
  JsonLocation(plan_location.source(), plan_location.pointer() + refusal.json_path)
      .fail(refusal.rule);
}

namespace {

PlanRefusal refusal_at(std::string json_path, std::string rule) {
  return PlanRefusal{std::move(json_path), std::move(rule)};
}

// The expert mesh (ep, etp) against the model's experts and the ranks it folds over.
std::optional<PlanRefusal> expert_mesh_refusal(const Mesh& mesh, const ModelConfig& model) {
  if (!model.moe) {
    for (const auto& [key, size] : {std::pair{"ep", mesh.ep}, std::pair{"etp", mesh.etp}}) {
      if (size > 1) {
        return refusal_at(
            fmt::format("/mesh/{}", key),
            fmt::format("{} needs a mixture-of-experts model (the model has no moe block)", size));
      }
    }
    return std::nullopt;
  }
  const MoeConfig& moe = *model.moe;
  if (moe.num_experts % mesh.ep != 0) {
    return refusal_at("/mesh/ep",
                      fmt::format("{} does not divide num_experts={}", mesh.ep, moe.num_experts));
  }
  if (moe.expert_ffn_hidden_size % mesh.etp != 0) {
    return refusal_at("/mesh/etp", fmt::format("{} does not divide expert_ffn_hidden_size={}",
                                               mesh.etp, moe.expert_ffn_hidden_size));
  }
  // Shared experts are dense MLPs every token visits, split over tp like the dense layers.
  if (moe.num_shared_experts > 0 && moe.shared_expert_ffn_hidden_size % mesh.tp != 0) {
    return refusal_at("/mesh/tp", fmt::format("{} does not divide shared_expert_ffn_hidden_size={}",
                                              mesh.tp, moe.shared_expert_ffn_hidden_size));
  }
  const __int128 stage_ranks = static_cast<__int128>(mesh.tp) * mesh.cp * mesh.dp;
  const __int128 expert_ranks = static_cast<__int128>(mesh.ep) * mesh.etp;
  if (stage_ranks % expert_ranks != 0) {
    return refusal_at(
        "/mesh/ep",
        fmt::format("ep × etp = {} × {} does not divide tp × cp × dp = {}: the expert mesh "
                    "folds over each pipeline stage's ranks",
                    mesh.ep, mesh.etp, static_cast<std::int64_t>(stage_ranks)));
  }
  return std::nullopt;
}

}  // namespace

std::optional<PlanRefusal> mesh_model_refusal(const Mesh& mesh, const ModelConfig& model) {
  if (model.num_attention_heads % mesh.tp != 0) {
    return refusal_at("/mesh/tp", fmt::format("{} does not divide num_attention_heads={}", mesh.tp,
                                              model.num_attention_heads));
  }
  // Megatron splits kv heads across tp ranks; when tp exceeds them each kv head is replicated on
  // tp / num_kv_heads ranks (as vLLM and Megatron-Core with --num-query-groups < tp do).
  if (model.num_kv_heads % mesh.tp != 0 && mesh.tp % model.num_kv_heads != 0) {
    return refusal_at("/mesh/tp",
                      fmt::format("{} neither divides num_kv_heads={} nor is a multiple of it",
                                  mesh.tp, model.num_kv_heads));
  }
  if (model.ffn_hidden_size % mesh.tp != 0) {
    return refusal_at("/mesh/tp", fmt::format("{} does not divide ffn_hidden_size={}", mesh.tp,
                                              model.ffn_hidden_size));
  }
  if (std::optional<PlanRefusal> refusal = expert_mesh_refusal(mesh, model)) return refusal;
  if (static_cast<__int128>(mesh.pp) * mesh.vpp > kMaxPipelineStages) {
    return refusal_at(
        "/mesh/pp",
        fmt::format("pp × vpp = {} × {} = {} pipeline stages: strata simulates at most {} "
                    "(a step's work grows with the square of the stages)",
                    mesh.pp, mesh.vpp, static_cast<std::int64_t>(mesh.pp * mesh.vpp),
                    kMaxPipelineStages));
  }
  if (mesh.pp > model.num_layers + 2) {
    return refusal_at("/mesh/pp",
                      fmt::format("{} pipeline ranks, but {} layer{}, the embedding and the LM "
                                  "head fill at most {} stages",
                                  mesh.pp, model.num_layers, model.num_layers == 1 ? "" : "s",
                                  model.num_layers + 2));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> context_parallel_refusal(const Mesh& mesh, std::int64_t seq_length) {
  // Causal context parallelism splits each sequence into 2·cp chunks so that every cp rank gets
  // one early and one late chunk (equal attention work), as Megatron-LM requires.
  if (mesh.cp > 1 && seq_length % (2 * mesh.cp) != 0) {
    return refusal_at("/mesh/cp", fmt::format("{}: seq_length={} is not divisible by 2 × cp = {}",
                                              mesh.cp, seq_length, 2 * mesh.cp));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> batch_refusal(const BatchConfig& batch, const Mesh& mesh,
                                         const ModelConfig& model) {
  // Plans made in memory (the planner, validate-sim's rows) meet the readers' limits here.
  if (batch.global_batch_size < 1 || batch.global_batch_size > kMaxGlobalBatchSize) {
    return refusal_at("/batch/global_batch_size",
                      fmt::format("{} is outside Strata's limit of 1 to {} sequences a step",
                                  batch.global_batch_size, kMaxGlobalBatchSize));
  }
  if (batch.micro_batch_size < 1 || batch.micro_batch_size > batch.global_batch_size) {
    return refusal_at("/batch/micro_batch_size",
                      fmt::format("{} is not from 1 to the global batch {}", batch.micro_batch_size,
                                  batch.global_batch_size));
  }
  if (batch.seq_length > model.max_seq_length) {
    return refusal_at("/batch/seq_length",
                      fmt::format("{} is more than the model's max_seq_length={}", batch.seq_length,
                                  model.max_seq_length));
  }
  const std::int64_t per_micro_batch_step = batch.micro_batch_size * mesh.dp;
  if (batch.global_batch_size % per_micro_batch_step != 0) {
    return refusal_at("/batch/global_batch_size",
                      fmt::format("{} is not divisible by micro_batch_size × dp = {} × {} = {}",
                                  batch.global_batch_size, batch.micro_batch_size, mesh.dp,
                                  per_micro_batch_step));
  }
  const std::int64_t derived = batch.global_batch_size / per_micro_batch_step;
  if (batch.num_micro_batches != derived) {
    return refusal_at(
        "/batch/num_micro_batches",
        fmt::format("{} does not match global_batch_size / (micro_batch_size × dp) = {} / "
                    "({} × {}) = {}",
                    batch.num_micro_batches, batch.global_batch_size, batch.micro_batch_size,
                    mesh.dp, derived));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> sequence_parallel_refusal(const Mesh& mesh, const ModelConfig& model,
                                                     std::int64_t seq_length,
                                                     bool sequence_parallel) {
  if (sequence_parallel && mesh.tp == 1) {
    return refusal_at("/sequence_parallel", "needs tp > 1 (tp = 1)");
  }
  if (sequence_parallel && (seq_length / mesh.cp) % mesh.tp != 0) {
    return refusal_at("/sequence_parallel",
                      fmt::format("seq_length / cp = {} is not divisible by tp={}",
                                  seq_length / mesh.cp, mesh.tp));
  }
  // Megatron-LM requires it with ep and tp: each tp rank must route its own tokens, or the tp
  // ranks would send the same tokens to the experts tp times.
  if (model.moe && mesh.tp > 1 && !sequence_parallel) {
    return refusal_at("/sequence_parallel",
                      fmt::format("a mixture-of-experts model with tp={} needs sequence "
                                  "parallelism: each tp rank routes its own share of the tokens",
                                  mesh.tp));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> schedule_refusal(ScheduleType schedule, const Mesh& mesh,
                                            const BatchConfig& batch) {
  if (schedule == ScheduleType::interleaved_one_f_one_b && mesh.vpp == 1) {
    return refusal_at("/schedule/type",
                      "interleaved-1f1b needs vpp > 1 (vpp = 1); use 1f1b for one chunk per rank");
  }
  if (mesh.vpp > 1 && schedule != ScheduleType::interleaved_one_f_one_b &&
      schedule != ScheduleType::custom) {
    return refusal_at(
        "/mesh/vpp",
        fmt::format("{} model chunks per rank need schedule interleaved-1f1b or custom, not {}",
                    mesh.vpp, name_of(schedule, kScheduleTypeNames)));
  }
  // Megatron's interleaved schedule runs micro-batches in groups of pp per chunk.
  if (schedule == ScheduleType::interleaved_one_f_one_b && batch.num_micro_batches % mesh.pp != 0) {
    return refusal_at("/batch/num_micro_batches",
                      fmt::format("{} is not a multiple of pp={}, which interleaved-1f1b needs",
                                  batch.num_micro_batches, mesh.pp));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> dp_shard_refusal(const Mesh& mesh, std::int64_t zero_stage) {
  const auto refused = [](std::string rule) {
    return PlanRefusal{"/mesh/dp_shard", std::move(rule)};
  };
  if (mesh.dp_shard > 0 && mesh.dp % mesh.dp_shard != 0) {
    return refused(fmt::format("{} does not divide dp={}: the shard groups must tile dp",
                               mesh.dp_shard, mesh.dp));
  }
  if (mesh.zero_shard_dp() < mesh.dp && zero_stage == 0) {
    return refused(
        fmt::format("{} < dp={} shards model state, but ZeRO-0 shards none: give "
                    "zero_stage 1-3 or drop dp_shard",
                    mesh.dp_shard, mesh.dp));
  }
  if (mesh.zero_replicas() > 1 && mesh.expert_dp() % mesh.zero_replicas() != 0) {
    return refused(
        fmt::format("dp / dp_shard = {} replicas do not divide the expert "
                    "data-parallel size tp·cp·dp / (ep·etp) = {}: expert state is "
                    "sharded into the same replicas",
                    mesh.zero_replicas(), mesh.expert_dp()));
  }
  return std::nullopt;
}

std::optional<PlanRefusal> ep_comm_overlap_refusal(const Plan& plan) {
  const auto refused = [](std::string rule) {
    return PlanRefusal{"/ep_comm_overlap", std::move(rule)};
  };
  if (plan.mesh.ep * plan.mesh.etp == 1) {
    return refused(
        "needs expert parallelism (ep or etp > 1): there is no token exchange to overlap");
  }
  if (!overlaps_expert_dispatch(plan.framework)) {
    return refused(
        fmt::format("{} does not overlap the expert all-to-alls (Megatron-Core's "
                    "combined 1F1B does: framework megatron-lm or nemo)",
                    name_of(plan.framework, kTrainingFrameworkNames)));
  }
  if (plan.mesh.pp > 1 && plan.mesh.vpp == 1) {
    return refused(
        fmt::format("with pp={} the all-to-alls overlap only under the interleaved "
                    "schedule (vpp > 1), as Megatron-Core's combined 1F1B requires",
                    plan.mesh.pp));
  }
  if (plan.recompute.granularity == RecomputeGranularity::full) {
    return refused("cannot run with full recomputation (Megatron-Core's combined 1F1B refuses it)");
  }
  return std::nullopt;
}

std::optional<PlanRefusal> switch_refusal(const Plan& from, const std::string& from_name,
                                          const Plan& to) {
  if (to.model != from.model) {
    return PlanRefusal{"/model",
                       to.model.name == from.model.name
                           ? fmt::format("another {} than {}'s (the same name, other fields)",
                                         from.model.name, from_name)
                           : fmt::format("{}: another model than {}'s {}", to.model.name, from_name,
                                         from.model.name)};
  }
  if (to.precision != from.precision) {
    return PlanRefusal{"/precision",
                       fmt::format("{}: {} trains in {}", name_of(to.precision, kDtypeNames),
                                   from_name, name_of(from.precision, kDtypeNames))};
  }
  if (to.mesh.world_size() != from.mesh.world_size()) {
    return PlanRefusal{"/mesh", fmt::format("{} ranks: {} has {}", to.mesh.world_size(), from_name,
                                            from.mesh.world_size())};
  }
  return std::nullopt;
}

}  // namespace strata::schemas
