#include "strata/schemas/executor_admission.h"

#include <fmt/format.h>

#include <tuple>

#include "strata/schemas/enum_names.h"

namespace strata::schemas {

std::optional<ExecutorRefusal> executor_model_refusal(const ModelConfig& model) {
  if (model.position_embedding != PositionEmbedding::learned &&
      model.position_embedding != PositionEmbedding::rope) {
    return ExecutorRefusal{"/position_embedding",
                           fmt::format("the executor builds learned or rope positions, not {}",
                                       name_of(model.position_embedding, kPositionEmbeddingNames))};
  }
  if (model.mlp_activation != MlpActivation::gelu &&
      model.mlp_activation != MlpActivation::swiglu) {
    return ExecutorRefusal{"/mlp_activation",
                           fmt::format("the executor builds gelu or swiglu MLPs, not {}",
                                       name_of(model.mlp_activation, kMlpActivationNames))};
  }
  if (model.embedding_norm) {
    return ExecutorRefusal{"/embedding_norm", "the executor builds no embedding norm"};
  }
  if (model.qk_norm) {
    return ExecutorRefusal{"/qk_norm", "the executor builds no query/key norm"};
  }
  if (model.moe && model.moe->router.expert_bias) {
    return ExecutorRefusal{"/moe/router/expert_bias",
                           "the executor's router has no expert bias (auxiliary-loss-free "
                           "balancing): set it to false"};
  }
  if (model.moe && model.moe->router.expert_groups > 1) {
    return ExecutorRefusal{"/moe/router/expert_groups",
                           fmt::format("{}: the executor's router picks among all experts, not "
                                       "within groups: set it to 1",
                                       model.moe->router.expert_groups)};
  }
  if (model.mla) {
    return ExecutorRefusal{"/mla",
                           "the executor builds multi-head attention, not latent attention"};
  }
  return std::nullopt;
}

std::optional<ExecutorRefusal> executor_refusal(const Plan& plan) {
  if (plan.framework != TrainingFramework::strata) {
    return ExecutorRefusal{
        "/framework",
        fmt::format("\"{}\" is a plan for another training stack, for simulation only; strata "
                    "train runs plans whose framework is strata (remove the field)",
                    name_of(plan.framework, kTrainingFrameworkNames))};
  }
  if (plan.tp_comm_overlap) {
    return ExecutorRefusal{"/tp_comm_overlap",
                           "the executor runs tensor-parallel collectives between the GEMMs, not "
                           "pipelined with them: set it to false"};
  }
  if (plan.precision != Dtype::fp32 && plan.precision != Dtype::bf16) {
    return ExecutorRefusal{"/precision", fmt::format("the executor trains in fp32 or bf16, not {}",
                                                     name_of(plan.precision, kDtypeNames))};
  }
  if (std::optional<ExecutorRefusal> refusal = executor_model_refusal(plan.model)) {
    refusal->json_path = "/model" + refusal->json_path;
    return refusal;
  }
  if (plan.model.moe) {
    // The executor's MoE layer splits its routed experts over ep ranks of the tensor-, data- and
    // context-parallel group and sends each token to its experts' rank (all-to-all); each
    // expert's MLP stays whole on its rank (its gradients summed, and its state ZeRO-sharded,
    // over the ranks holding the same experts). Under tensor parallelism each rank routes its
    // own sequence-parallel shard of the tokens (Megatron-Core needs sequence parallelism there
    // too) and the shared experts are split as a dense MLP; under context parallelism a rank
    // routes its chunks' tokens; the load-balancing loss pools the choices of both groups.
    // (Plan validation already requires sequence parallelism with tp for MoE.) Expert tensor
    // parallelism waits for the experts' sharded GEMMs and the all-gather dispatch.
    if (plan.mesh.etp > 1) {
      return ExecutorRefusal{
          "/mesh/etp",
          fmt::format("{}: the executor trains mixture-of-experts models with whole experts on "
                      "each rank; expert tensor parallelism is not built yet",
                      plan.mesh.etp)};
    }
  }
  return std::nullopt;
}

}  // namespace strata::schemas
