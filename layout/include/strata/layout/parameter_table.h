// The parameter table: every parameter a model has — its name, whole shape, how it starts, whether
// AdamW decays it, and how the tp, ep and etp axes of a mesh split it — in the order a rank lays
// its parameters out, grouped into units (the embeddings, each layer, the head). It is the one
// description of a model's parameters: the executor's store allocates and initialises from it,
// checkpoints are sliced by it, and the bucket layout (gradient_buckets.h) that data parallelism
// reduces and ZeRO shards is computed from it for any rank, by the executor and the cost models
// alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/layout/placement.h"
#include "strata/schemas/model_config.h"
#include "strata/schemas/plan.h"

namespace strata::layout {

// How a parameter starts: N(0, std²) from the counter-based generator, or a constant.
enum class InitKind { normal, zeros, ones };
struct InitRule {
  InitKind kind = InitKind::normal;
  double std = 0.02;
};

struct ParameterSpec {
  std::string name;  // e.g. "layers.3.attention.qkv.weight"; keys init, checkpoints, reference
  Shape shape;       // the whole parameter
  InitRule init;
  bool weight_decay = false;  // AdamW decays matrices and embeddings, not biases or norm gains
  // How the ranks of a tensor-parallel group split it (Megatron's column- and row-parallel
  // layers, the vocabulary-parallel embedding).
  Placement tensor_parallel{};
  // How the ranks of an expert-parallel group split it: Shard(0) for a MoE layer's stacked routed
  // experts (each rank its range of experts), Replicate for everything else. A parameter is split
  // by tensor parallelism or by the expert groups, never both.
  Placement expert_parallel{};
  // How the ranks of an expert-tensor-parallel group split a routed expert's tensor (its width:
  // column-parallel inputs, row-parallel output); read only where expert_parallel is a Shard.
  Placement expert_tensor_parallel{};
  // Replicated over tp, but each rank's gradient covers only its own heads (the query/key norms'
  // gains): DTensor's Partial over the tp group whether or not tokens are sharded, summed before
  // the data-parallel reduction.
  bool partial_over_tensor_parallel = false;

  // A MoE layer's routed experts: reduced over the expert data-parallel group when the mesh
  // splits them (experts_reduced_apart in gradient_buckets.h).
  bool routed_expert() const { return expert_parallel.kind == PlacementKind::shard; }
};

// Every parameter of the model in store order — embeddings, layers 0..L−1, final norm, LM head,
// the MTP modules.
// The word embedding and LM head split the vocabulary (unevenly when tp does not divide it), the
// layers as transformer_layer_parameters says; norms and the position embedding are replicated.
std::vector<ParameterSpec> transformer_parameters(const schemas::ModelConfig& model);

// The parameters of layer `index` in store order. The placement table (ATorch's TPInfo,
// Megatron's layer choice): weights are [out, in]; column-parallel layers split their output
// rows, row-parallel ones their input columns, the fused qkv rows split per segment by heads.
std::vector<ParameterSpec> transformer_layer_parameters(const schemas::ModelConfig& model,
                                                        std::int64_t index);

// The parameters of layer `index`'s MoE MLP, in store order (after the layer's mlp_norm): router,
// routed experts, shared experts, shared gate. Names under "layers.<index>.mlp.".
std::vector<ParameterSpec> moe_mlp_parameters(const schemas::ModelConfig& model,
                                              std::int64_t index);

// The parameters of MTP module `module` (from 1) in store order, under
// "layers.<num_layers + module − 1>." as Hugging Face's DeepSeek-V3 checkpoint names them: enorm,
// hnorm, eh_proj [h, 2h], the transformer layer, final_norm. eh_proj is replicated over tp
// (Megatron-Core splits its output columns and gathers them right after: the same product).
std::vector<ParameterSpec> mtp_module_parameters(const schemas::ModelConfig& model,
                                                 std::int64_t module);

// The parameters a rank holding `stages` keeps: the embeddings with the first stage, each stage's
// layers, the final norm, LM head and MTP modules with the last stage — and on the last stage a
// copy of the word embedding with tied embeddings, of the whole embedding unit with MTP (kept
// equal by the embedding group's all-reduce). In transformer_parameters' order.
std::vector<ParameterSpec> stage_parameters(const schemas::ModelConfig& model,
                                            const std::vector<schemas::PipelineStage>& stages);

// Unit of a parameter by name: 0 for "embedding.*", 1 + l for "layers.l.*", num_layers + 1 for
// the final norm and the LM head, num_layers + 1 + k for MTP module k. ZeRO-3 gathers a unit at a
// time; buckets close between units.
std::int64_t parameter_unit(const schemas::ModelConfig& model, std::string_view name);
inline std::int64_t parameter_unit_count(const schemas::ModelConfig& model) {
  return model.num_layers + 2 + model.mtp_modules();
}

// The parameter units a stage computes with: the embeddings on the first stage (and the word
// embedding's copy on the last, for a tied head or MTP), its layers, the head and the MTP modules
// on the last.
std::vector<std::int64_t> stage_units(const schemas::ModelConfig& model,
                                      const schemas::PipelineStage& stage);

}  // namespace strata::layout
