#include "strata/planner/megatron_arguments.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string_view>
#include <utility>
#include <vector>

#include "strata/schemas/input_error.h"

namespace strata::planner {
namespace {

// Megatron-Core's --pipeline-model-parallel-layout: stages separated by '|', 'E' the embedding,
// 't' a transformer layer, 'L' the LM head and loss ("Et*3|t*4|t*3L").
std::string pipeline_layout(const schemas::Plan& plan) {
  std::string layout;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const schemas::PipelineStage& stage = plan.stages[s];
    if (s > 0) layout += "|";
    if (stage.embedding) layout += "E";
    if (stage.num_layers == 1) layout += "t";
    if (stage.num_layers > 1) layout += fmt::format("t*{}", stage.num_layers);
    if (stage.lm_head) layout += "L";
  }
  return layout;
}

// Megatron-Core's --moe-layer-freq as a pattern of MoE (1) and dense (0) layers in runs,
// "([0]*3+[1]*58)"; absent when every layer is a MoE layer (its default, 1).
std::string moe_layer_pattern(const schemas::ModelConfig& model) {
  std::vector<std::pair<int, std::int64_t>> runs;
  for (std::int64_t layer = 0; layer < model.num_layers; ++layer) {
    const int kind = model.moe->is_moe_layer(layer) ? 1 : 0;
    if (!runs.empty() && runs.back().first == kind) {
      ++runs.back().second;
    } else {
      runs.push_back({kind, 1});
    }
  }
  if (runs.size() == 1 && runs.front().first == 1) return "";
  std::string pattern = "(";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    if (r > 0) pattern += "+";
    pattern += fmt::format("[{}]*{}", runs[r].first, runs[r].second);
  }
  return pattern + ")";
}

// A mixture of experts' and latent attention's flags: the experts, router and dense-layer
// pattern, the expert mesh (etp always: Megatron's default is tp), the grouped GEMM and the
// all-to-all dispatcher the cost models price, and the all-to-all overlap.
void add_moe_and_latent_attention_flags(const schemas::Plan& plan,
                                        std::vector<std::string>& flags) {
  const schemas::ModelConfig& model = plan.model;
  if (model.mla) {
    const schemas::MlaConfig& mla = *model.mla;
    flags.push_back("--multi-latent-attention");
    if (mla.q_lora_rank > 0) flags.push_back(fmt::format("--q-lora-rank {}", mla.q_lora_rank));
    flags.push_back(fmt::format("--kv-lora-rank {}", mla.kv_lora_rank));
    flags.push_back(fmt::format("--qk-head-dim {}", mla.qk_nope_head_dim));
    flags.push_back(fmt::format("--qk-pos-emb-head-dim {}", mla.qk_rope_head_dim));
    flags.push_back(fmt::format("--v-head-dim {}", mla.v_head_dim));
  }
  if (model.qk_norm) flags.push_back("--qk-layernorm");
  if (model.sliding_window) {
    // Megatron-Core's window is flash-attention's (left, right): size − 1 keys back.
    flags.push_back(fmt::format("--window-size {},0", model.sliding_window->size - 1));
    if (model.sliding_window->full_attention_interval > 0) {
      flags.push_back(
          fmt::format("--window-attn-skip-freq {}", model.sliding_window->full_attention_interval));
    }
  }
  if (model.attention_sinks) flags.push_back("--softmax-type learnable");
  if (model.mtp) {
    flags.push_back(fmt::format("--mtp-num-layers {}", model.mtp->num_modules));
    flags.push_back(fmt::format("--mtp-loss-scaling-factor {}", model.mtp->loss_weight));
  }
  if (!model.moe) return;
  const schemas::MoeConfig& moe = *model.moe;
  flags.push_back(fmt::format("--num-experts {}", moe.num_experts));
  flags.push_back(fmt::format("--moe-router-topk {}", moe.experts_per_token));
  flags.push_back(fmt::format("--moe-ffn-hidden-size {}", moe.expert_ffn_hidden_size));
  if (moe.num_shared_experts > 0) {
    flags.push_back(fmt::format("--moe-shared-expert-intermediate-size {}",
                                moe.num_shared_experts * moe.shared_expert_ffn_hidden_size));
  }
  if (const std::string pattern = moe_layer_pattern(model); !pattern.empty()) {
    flags.push_back(fmt::format("--moe-layer-freq \"{}\"", pattern));
  }
  const schemas::RouterConfig& router = moe.router;
  flags.push_back(fmt::format(
      "--moe-router-score-function {}",
      router.score_function == schemas::RouterScoreFunction::sigmoid ? "sigmoid" : "softmax"));
  if (router.expert_bias) flags.push_back("--moe-router-enable-expert-bias");
  if (router.expert_groups > 1) {
    flags.push_back(fmt::format("--moe-router-num-groups {}", router.expert_groups));
    flags.push_back(fmt::format("--moe-router-group-topk {}", router.groups_per_token));
  }
  if (router.scaling_factor != 1.0) {
    flags.push_back(fmt::format("--moe-router-topk-scaling-factor {:g}", router.scaling_factor));
  }
  if (router.aux_loss_coefficient > 0) {
    flags.push_back(fmt::format("--moe-aux-loss-coeff {:g}", router.aux_loss_coefficient));
  }
  if (router.z_loss_coefficient > 0) {
    flags.push_back(fmt::format("--moe-z-loss-coeff {:g}", router.z_loss_coefficient));
  }
  if (moe.capacity_factor) {
    flags.push_back(fmt::format("--moe-expert-capacity-factor {:g}", *moe.capacity_factor));
  }
  flags.push_back(fmt::format("--expert-model-parallel-size {}", plan.mesh.ep));
  flags.push_back(fmt::format("--expert-tensor-parallel-size {}", plan.mesh.etp));
  flags.push_back("--moe-grouped-gemm");
  flags.push_back("--moe-token-dispatcher-type alltoall");
  if (plan.ep_comm_overlap) {
    flags.push_back("--overlap-moe-expert-parallel-comm");
    flags.push_back("--delay-wgrad-compute");
  }
}

bool evenly_split(const schemas::Plan& plan) {
  for (const schemas::PipelineStage& stage : plan.stages) {
    if (stage.num_layers != plan.stages.front().num_layers) return false;
  }
  return true;
}

// The model's own flags: sizes, attention heads, MLP, norm, positions, biases, dropout.
std::vector<std::string> model_flags(const schemas::Plan& plan) {
  const schemas::ModelConfig& model = plan.model;
  std::vector<std::string> flags{fmt::format("--num-layers {}", model.num_layers),
                                 fmt::format("--hidden-size {}", model.hidden_size),
                                 fmt::format("--ffn-hidden-size {}", model.ffn_hidden_size),
                                 fmt::format("--num-attention-heads {}", model.num_attention_heads),
                                 fmt::format("--seq-length {}", plan.batch.seq_length),
                                 fmt::format("--max-position-embeddings {}", model.max_seq_length)};
  if (model.num_kv_heads != model.num_attention_heads) {
    flags.push_back("--group-query-attention");
    flags.push_back(fmt::format("--num-query-groups {}", model.num_kv_heads));
  }
  if (model.head_dim * model.num_attention_heads != model.hidden_size) {
    flags.push_back(fmt::format("--kv-channels {}", model.head_dim));
  }
  if (model.mlp_activation == schemas::MlpActivation::swiglu) flags.push_back("--swiglu");
  if (model.mlp_activation == schemas::MlpActivation::squared_relu) {
    flags.push_back("--squared-relu");
  }
  if (model.mlp_activation == schemas::MlpActivation::clamped_swiglu) {
    // GPT-OSS's unit in Megatron-Core: quick GELU (its α is Megatron's fixed 1.702) on the clamped
    // gate, times the up projection plus 1.
    flags.push_back("--quick-geglu");
    flags.push_back(fmt::format("--activation-func-clamp-value {:g}", model.swiglu_limit));
    flags.push_back("--glu-linear-offset 1.0");
  }
  if (model.norm == schemas::NormKind::rmsnorm) flags.push_back("--normalization RMSNorm");
  if (model.position_embedding == schemas::PositionEmbedding::rope) {
    flags.push_back("--position-embedding-type rope");
    if (model.rope_theta) flags.push_back(fmt::format("--rotary-base {:g}", *model.rope_theta));
  }
  if (!model.tied_embeddings) flags.push_back("--untie-embeddings-and-output-weights");
  if (!model.mlp_bias && !model.qkv_bias && !model.attention_output_bias) {
    flags.push_back("--disable-bias-linear");
  }
  if (model.dropout == 0) {
    flags.push_back("--attention-dropout 0");
    flags.push_back("--hidden-dropout 0");
  }
  return flags;
}

// The layout's: parallel sizes, the pipeline split, sequence parallelism, batch, ZeRO (and its
// hybrid instances), gradient reduction.
void add_layout_flags(const schemas::Plan& plan, std::vector<std::string>& flags) {
  const schemas::ModelConfig& model = plan.model;
  const schemas::Mesh& mesh = plan.mesh;
  flags.push_back(fmt::format("--tensor-model-parallel-size {}", mesh.tp));
  flags.push_back(fmt::format("--pipeline-model-parallel-size {}", mesh.pp));
  if (mesh.cp > 1) {
    flags.push_back(fmt::format("--context-parallel-size {}", mesh.cp));
    flags.push_back(fmt::format(
        "--cp-comm-type {}",
        plan.cp_comm == schemas::ContextParallelComm::all_gather ? "allgather" : "p2p"));
  }
  if (mesh.vpp > 1) {
    flags.push_back(fmt::format("--num-layers-per-virtual-pipeline-stage {}",
                                model.num_layers / (mesh.pp * mesh.vpp)));
  }
  if (mesh.pp > 1 && !evenly_split(plan)) {
    const std::size_t last = plan.stages.size() - 1;
    bool middle_even = true;
    for (std::size_t s = 1; s + 1 < last; ++s) {
      middle_even = middle_even && plan.stages[s].num_layers == plan.stages[1].num_layers;
    }
    if (middle_even && plan.stages.size() > 2 && plan.stages[0].num_layers > 0 &&
        plan.stages[last].num_layers > 0) {
      flags.push_back(
          fmt::format("--decoder-first-pipeline-num-layers {}", plan.stages[0].num_layers));
      flags.push_back(
          fmt::format("--decoder-last-pipeline-num-layers {}", plan.stages[last].num_layers));
    } else {
      flags.push_back(
          fmt::format("--pipeline-model-parallel-layout \"{}\"", pipeline_layout(plan)));
    }
  }
  if (plan.sequence_parallel) flags.push_back("--sequence-parallel");
  if (plan.tp_comm_overlap) flags.push_back("--tp-comm-overlap");
  flags.push_back(fmt::format("--micro-batch-size {}", plan.batch.micro_batch_size));
  flags.push_back(fmt::format("--global-batch-size {}", plan.batch.global_batch_size));
  if (plan.zero_stage == 1 || plan.zero_stage == 2) flags.push_back("--use-distributed-optimizer");
  if (plan.zero_stage == 3) flags.push_back("--use-torch-fsdp2");
  if (mesh.zero_replicas() > 1) {
    // Hybrid sharding: Megatron shards its distributed optimizer within each of R instances and
    // all-reduces across them. Its FSDP2 path has no such split: refused rather than exported as
    // full sharding.
    if (plan.zero_stage == 3) {
      throw schemas::InputError("plan", "/mesh/dp_shard",
                                fmt::format("{}: Megatron-LM's --use-torch-fsdp2 shards over all "
                                            "of dp; hybrid sharding exports for ZeRO-1/2 only "
                                            "(--num-distributed-optimizer-instances)",
                                            mesh.dp_shard));
    }
    flags.push_back(fmt::format("--num-distributed-optimizer-instances {}", mesh.zero_replicas()));
  }
  if (plan.overlap_grad_reduce && plan.mesh.dp * plan.mesh.cp > 1) {
    flags.push_back("--overlap-grad-reduce");
    if (plan.zero_stage >= 1) flags.push_back("--overlap-param-gather");
  }
  if (plan.gradient_bucket_elements) {
    flags.push_back(fmt::format("--ddp-bucket-size {}", *plan.gradient_bucket_elements));
  }
}

// CUDA graphs and recomputation.
void add_graph_and_recompute_flags(const schemas::Plan& plan, std::vector<std::string>& flags) {
  if (!plan.cuda_graph_scope.empty()) {
    // The whole iteration is Megatron-Core's own capture; the per-layer scopes Transformer
    // Engine's.
    const bool whole = plan.cuda_graph_scope.front() == schemas::CudaGraphScope::full_iteration;
    std::vector<std::string_view> scopes;
    for (schemas::CudaGraphScope scope : plan.cuda_graph_scope) {
      scopes.push_back(schemas::name_of(scope, schemas::kCudaGraphScopeNames));
    }
    flags.push_back(fmt::format("--cuda-graph-impl {}", whole ? "local" : "transformer_engine"));
    flags.push_back(fmt::format("--cuda-graph-scope {}", fmt::join(scopes, " ")));
  }
  switch (plan.recompute.granularity) {
    case schemas::RecomputeGranularity::none:
      break;
    case schemas::RecomputeGranularity::selective:
      flags.push_back("--recompute-granularity selective");
      if (!plan.recompute.modules.empty()) {
        std::vector<std::string_view> names;
        for (schemas::RecomputeModule module : plan.recompute.modules) {
          names.push_back(schemas::name_of(module, schemas::kRecomputeModuleNames));
        }
        flags.push_back(fmt::format("--recompute-modules {}", fmt::join(names, " ")));
      }
      break;
    case schemas::RecomputeGranularity::full: {
      flags.push_back("--recompute-granularity full");
      flags.push_back("--recompute-method block");
      // Megatron takes one count for every stage: the largest the plan needs.
      std::int64_t most = 0;
      for (std::size_t s = 0; s < plan.stages.size(); ++s) {
        most = std::max(most, plan.recompute.full_layers_per_stage.empty()
                                  ? plan.stages[s].num_layers
                                  : plan.recompute.full_layers_per_stage[s]);
      }
      flags.push_back(fmt::format("--recompute-num-layers {}", most));
      break;
    }
  }
}

// The precision, the gradients' dtype where it is not the default, and a schedule upstream
// Megatron-LM does not run.
void add_precision_flags(const schemas::Plan& plan, std::vector<std::string>& flags) {
  switch (plan.precision) {
    case schemas::Dtype::bf16:
      flags.push_back("--bf16");
      break;
    case schemas::Dtype::fp16:
      flags.push_back("--fp16");
      break;
    case schemas::Dtype::fp8:
      flags.push_back("--bf16");
      flags.push_back("--fp8-format hybrid");
      break;
    case schemas::Dtype::mxfp8:
      // Blackwell's block scaling: e4m3 throughout (MX scales keep gradients in range).
      flags.push_back("--bf16");
      flags.push_back("--fp8-format e4m3");
      flags.push_back("--fp8-recipe mxfp8");
      break;
    case schemas::Dtype::nvfp4:
      flags.push_back("--bf16");
      flags.push_back("--fp4-format e2m1");
      flags.push_back("--fp4-recipe nvfp4");
      break;
    default:
      break;
  }
  // Megatron-LM accumulates bf16 gradients in fp32 and fp16 ones in fp16 unless told otherwise.
  const schemas::Dtype gradients = schemas::gradient_dtype_of(plan);
  if (gradients != schemas::default_gradient_dtype(plan.precision)) {
    flags.push_back(gradients == schemas::Dtype::bf16 ? "--grad-reduce-in-bf16"
                                                      : "--accumulate-allreduce-grads-in-fp32");
  }
  if (plan.schedule.type == schemas::ScheduleType::zb_h1) {
    flags.push_back("# schedule zb-h1: upstream Megatron-LM runs 1F1B here; zero-bubble schedules");
    flags.push_back(
        "# need the authors' fork (github.com/sail-sg/zero-bubble-pipeline-parallelism)");
  }
}

}  // namespace

std::string megatron_arguments(const schemas::Plan& plan) {
  std::vector<std::string> flags = model_flags(plan);
  add_moe_and_latent_attention_flags(plan, flags);
  add_layout_flags(plan, flags);
  add_graph_and_recompute_flags(plan, flags);
  add_precision_flags(plan, flags);
  std::string text;
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const bool comment = flags[i].starts_with("#");
    text += flags[i];
    const bool last_flag = i + 1 == flags.size() || flags[i + 1].starts_with("#");
    text += (comment || last_flag) ? "\n" : " \\\n";
  }
  return text;
}

}  // namespace strata::planner
