#include "train_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/model/transformer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/executor_admission.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::tools {
namespace {

constexpr const char* kSingleCpuCluster = "cpu-local";
constexpr const char* kDefaultGpuCluster = "dgx-h100";
// The device of the cpu-local preset: a plan for a cluster of these trains on the CPU.
constexpr const char* kCpuDeviceName = "cpu-core";

// A cluster of CPU ranks: the cpu-local preset, or a file `strata profile` measured on the CPU.
bool is_cpu_cluster(const schemas::ClusterConfig& cluster) {
  return cluster.gpu.name == kCpuDeviceName ||
         (cluster.sources && cluster.sources->backend == "cpu");
}

// `cluster` (resolved from `spec`) used with `ranks` ranks: as it is when it has that many, else
// one node's worth or whole nodes of it.
schemas::ClusterConfig sized_for(schemas::ClusterConfig cluster, const std::string& spec,
                                 std::int64_t ranks) {
  if (cluster.world_size() == ranks) return cluster;
  if (ranks > cluster.gpus_per_node && ranks % cluster.gpus_per_node != 0) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("the plan's {} ranks do not fill whole nodes of {} ({})",
                                          ranks, cluster.gpus_per_node, spec));
  }
  const std::string counts = ranks <= cluster.gpus_per_node
                                 ? fmt::format("1x{}", ranks)
                                 : fmt::format("{}", ranks / cluster.gpus_per_node);
  return schemas::with_node_counts(std::move(cluster), spec, counts);
}

// The cluster a --model plan of `ranks` CPU ranks is made for: `spec` (a measured file or a
// preset) used with that many ranks.
schemas::ClusterConfig cpu_cluster_of(const std::string& spec, std::int64_t ranks) {
  schemas::ClusterConfig cluster = schemas::resolve_cluster(spec);
  if (!is_cpu_cluster(cluster)) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("{} is a GPU cluster: add --device cuda, or give a "
                                          "file strata profile measured on the CPU",
                                          spec));
  }
  return sized_for(std::move(cluster), spec, ranks);
}

executor::Device parse_device(const std::string& name) {
  return name == "cuda" ? executor::Device::cuda : executor::Device::cpu;
}

// The plan's ranks as GPUs of a GPU cluster (a preset, or a file `strata profile --device cuda`
// measured): one GPU, a part of one node, or whole nodes. What a --model plan on cuda is planned
// for; ranks that share a GPU (mpirun -np 2 on one card) are still priced as GPUs of their own.
schemas::ClusterConfig gpus_of(const std::string& spec, std::int64_t ranks) {
  schemas::ClusterConfig cluster = schemas::resolve_cluster(spec);
  if (is_cpu_cluster(cluster)) {
    throw schemas::InputError("--cluster", "",
                              fmt::format("{} is a cluster of CPU ranks: on cuda give a GPU "
                                          "preset or a file strata profile --device cuda wrote",
                                          spec));
  }
  if (ranks == 1) {
    cluster.nodes = 1;
    cluster.gpus_per_node = 1;
    cluster.name += " (one GPU)";
    return cluster;
  }
  return sized_for(std::move(cluster), spec, ranks);
}

// The plan `strata train --model M` runs: the batch, precision and layout from the flags; on the
// CPU a cpu-local cluster of tp·dp ranks (dp: what the job's ranks leave after tp), on cuda as
// many GPUs of --cluster.
schemas::Plan plan_from_flags(const TrainOptions& options, executor::Device device,
                              std::int64_t world_size) {
  if (!options.model && !options.init_llmc) {
    throw schemas::InputError("command line", "", "give --plan, --model or --init-llmc");
  }
  const schemas::ModelConfig model = options.model
                                         ? schemas::resolve_model(*options.model)
                                         : executor::read_llmc_model_config(*options.init_llmc);
  // What the executor cannot build — anywhere, or on the device the job runs on — is the
  // model's, named in the model file (or preset), not in the plan these flags make.
  if (options.model) {
    std::optional<schemas::ExecutorRefusal> refusal = schemas::executor_model_refusal(model);
    if (!refusal && device == executor::Device::cuda) refusal = executor::cuda_model_refusal(model);
    if (refusal) {
      throw schemas::InputError(*options.model, refusal->json_path, std::move(refusal->rule));
    }
  }
  schemas::PlanKnobs knobs;
  knobs.seq_length = options.seq_length.value_or(std::min<std::int64_t>(model.max_seq_length, 256));
  knobs.micro_batch_size = options.micro_batch;
  knobs.mesh.tp = options.tp;
  knobs.mesh.cp = options.cp;
  knobs.cp_comm = *schemas::value_of(options.cp_comm, schemas::kContextParallelCommNames);
  knobs.mesh.pp = options.pp;
  knobs.mesh.ep = options.ep;
  knobs.mesh.etp = options.etp;
  knobs.mesh.vpp = options.vpp;
  knobs.mesh.dp = options.dp.value_or(
      std::max<std::int64_t>(1, world_size / (options.tp * options.cp * options.pp)));
  knobs.schedule = options.schedule
                       ? *schemas::value_of(*options.schedule, schemas::kScheduleTypeNames)
                   : options.vpp > 1 ? schemas::ScheduleType::interleaved_one_f_one_b
                                     : schemas::ScheduleType::one_f_one_b;
  knobs.global_batch_size = options.global_batch.value_or(options.micro_batch * knobs.mesh.dp);
  knobs.sequence_parallel = options.sequence_parallel;
  knobs.zero_stage = options.zero_stage;
  knobs.mesh.dp_shard = options.dp_shard.value_or(0);
  knobs.overlap_grad_reduce = !options.no_overlap_grad_reduce;
  knobs.gradient_bucket_elements = options.bucket_size;
  knobs.recompute = *schemas::value_of(options.recompute, schemas::kRecomputeGranularityNames);
  const bool cuda = device == executor::Device::cuda;
  knobs.precision = options.precision == std::string("bf16") || (!options.precision && cuda)
                        ? schemas::Dtype::bf16
                        : schemas::Dtype::fp32;
  const std::int64_t ranks = knobs.mesh.world_size();
  const schemas::ClusterConfig cluster =
      cuda              ? gpus_of(options.cluster.value_or(kDefaultGpuCluster), ranks)
      : options.cluster ? cpu_cluster_of(*options.cluster, ranks)
                        : schemas::resolve_cluster(fmt::format("{}:{}", kSingleCpuCluster, ranks));
  schemas::Plan plan = schemas::build_plan(model, cluster, knobs, "command line");
  plan.description =
      ranks == 1
          ? fmt::format("{} on one {}, written by strata train", model.name,
                        cuda ? "GPU" : "CPU device")
          : fmt::format(
                "{} on {} CPU ranks (tp {} × cp {} × dp {} × pp {}), written by "
                "strata train",
                model.name, ranks, knobs.mesh.tp, knobs.mesh.cp, knobs.mesh.dp, knobs.mesh.pp);
  return plan;
}

}  // namespace

TrainPlan train_plan_of(const TrainOptions& options, std::int64_t world_size, bool writes_files) {
  TrainPlan chosen;
  if (options.device) chosen.device = parse_device(*options.device);
  if (options.plan &&
      schemas::document_kind_of_file(*options.plan) == schemas::DocumentKind::plan_set) {
    chosen.plan_set = schemas::load_plan_set_file(*options.plan);
    const std::string first = chosen.plan_set->phases.empty()
                                  ? chosen.plan_set->plans.front().id
                                  : chosen.plan_set->phases.front().plan;
    chosen.plan = chosen.plan_set->find(first)->plan;
    chosen.source = *options.plan + "#" + first;
    chosen.directory = std::filesystem::path(*options.plan).parent_path();
    if (!options.device && !is_cpu_cluster(chosen.plan.cluster)) {
      chosen.device = executor::Device::cuda;
    }
    return chosen;
  }
  if (options.plan) {
    chosen.plan = schemas::load_plan_file(*options.plan);
    chosen.source = *options.plan;
    chosen.directory = std::filesystem::path(*options.plan).parent_path();
    if (!options.device && !is_cpu_cluster(chosen.plan.cluster)) {
      chosen.device = executor::Device::cuda;  // the plan is for a GPU cluster
    }
    return chosen;
  }
  if (options.precision == std::string("bf16") && chosen.device != executor::Device::cuda) {
    throw schemas::InputError("--precision", "", "bf16 trains on a GPU: add --device cuda");
  }
  chosen.plan = plan_from_flags(options, chosen.device, world_size);
  if (options.write_plan && writes_files) {
    schemas::write_json_document(*options.write_plan, schemas::plan_to_json(chosen.plan));
  }
  return chosen;
}

}  // namespace strata::tools
