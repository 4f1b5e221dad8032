// MoeMlp: the mixture-of-experts MLP that replaces a layer's dense MLP on the layers the model's
// `moe` block names — a router (ops/top_k_router.h), routed experts each of the model's MLP kind
// (gpt: fc ─ GELU ─ output; llama: gate, up ─ SwiGLU ─ output) computed on the tokens dispatched
// to them, and shared experts every token visits, optionally behind a sigmoid gate (Qwen2-MoE).
// Forward keeps what backward needs; backward is explicit, as the rest of the executor.
//
//   h ─ router ─ top-k ──────────────── weights ─┐
//   └─ permute (by expert, token order) ─ experts ─ × ─ unpermute (+) ─┬─(+)─ y
//   └─ shared experts ─ (× sigmoid gate) ───────────────────────────────┘
//
// The routed experts' weights are stacked along a leading expert axis ([E, F, H] and [E, H, F]),
// so that expert e's matrices are contiguous views — one grouped GEMM's operands, and what an
// expert-parallel rank will hold a range of. The S shared experts are one MLP of width S·Fs
// (their rows side by side), each with its own output bias when the model has biases.
//
// Layouts this file runs: one rank, data parallelism with any ZeRO stage, pipelines and
// recomputation (the admission rule in schemas/executor_admission.h says which plans).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/model/parameter_store.h"
#include "strata/executor/ops/top_k_router.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// The parameters of layer `index`'s MoE MLP, in store order (after the layer's mlp_norm): router,
// routed experts, shared experts, shared gate. Names under "layers.<index>.mlp.".
std::vector<ParameterSpec> moe_mlp_parameters(const schemas::ModelConfig& model,
                                              std::int64_t index);

// One micro-batch's MoE forward state: the routing, and the dispatched rows' inputs and
// intermediates (row r is the pair routing.dispatched[r]).
struct MoeActivations {
  Tensor logits;  // [tokens, experts]
  TokenRouting routing;
  Tensor dispatched_in;              // [rows, hidden]
  Tensor hidden_in, up, hidden_out;  // [rows, F]: pre-activation (gpt) / gate (llama), up, act.
  Tensor expert_out;                 // [rows, hidden], before the combine weight
  Tensor shared_in, shared_up, shared_hidden, shared_out;  // [tokens, S·Fs] …, [tokens, hidden]
  Tensor shared_gate;                                      // [tokens]: sigmoid of the gate logit
};

class MoeMlp {
 public:
  MoeMlp(const schemas::ModelConfig& model, std::int64_t index, ParameterStore& store);

  // y = moe(h) for h and y [tokens, hidden] (y overwritten).
  void forward(const Tensor& h, Tensor& y, MoeActivations& a) const;
  // dh = ∂/∂h (overwritten) given dy; parameter gradients accumulate in the store.
  // auxiliary_scale weighs this micro-batch's router losses in the step's objective: the loss
  // scale of its token losses times its tokens, so that a step's objective is its mean token loss
  // plus the mean over its micro-batches of each MoE layer's auxiliary losses.
  void backward(const Tensor& dy, const Tensor& h, const MoeActivations& a, double auxiliary_scale,
                Tensor& dh) const;

 private:
  struct Matrices {                       // one MLP's parameters (null where absent)
    ParameterEntry* in_weight = nullptr;  // gpt: fc; llama: gate
    ParameterEntry* in_bias = nullptr;
    ParameterEntry* up_weight = nullptr;  // llama only
    ParameterEntry* up_bias = nullptr;
    ParameterEntry* output_weight = nullptr;
    ParameterEntry* output_bias = nullptr;
  };
  const schemas::ModelConfig& model_;
  const schemas::MoeConfig& moe_;
  bool llama_mlp_;
  ParameterEntry* router_;
  Matrices experts_;
  Matrices shared_;
  ParameterEntry* shared_gate_ = nullptr;
};

}  // namespace strata::executor
