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
// expert-parallel rank holds a range of (and an expert-tensor-parallel rank a part of the F
// axis of). The S shared experts are one MLP of width S·Fs
// (their rows side by side), each with its own output bias when the model has biases.
//
// Expert parallelism: over an ep group, member r holds experts r·E/ep … (r+1)·E/ep − 1 (the
// stores' Shard(0) of the stacked tensors). Each member routes its own tokens; the dispatched
// rows go to the members holding their experts in one all-to-all, are regrouped by expert there,
// computed, and come back in a second (Megatron-Core's all-to-all token dispatcher); backward
// sends the outputs' gradients the same way and the inputs' gradients back. The router, the
// shared experts and the combine stay with the tokens.
//
// Expert tensor parallelism: the etp members (the expert mesh's fastest axis) hold the same
// experts, each a part of every expert's width (column-parallel input projections, row-parallel
// output). After the ep exchange each member gathers the rows its etp peers received, computes
// its part of every expert on all of them, and sends each peer the partial sums of the peer's
// rows, which the peer adds (an all-gather and a reduce-scatter of unequal blocks, as
// Megatron-Core's all-to-all dispatcher does with etp > 1); backward mirrors it.
//
// Tensor parallelism (with sequence parallelism, as Megatron-Core requires for MoE): each tp rank
// routes its own shard of the tokens, so the routed path runs on the rank's tokens with no tp
// traffic; the experts stay whole (etp = 1) and, folded over the tp ranks by the expert mesh, are
// split by ep alone. The shared experts are a dense MLP split as Megatron's: column-parallel on
// the gathered tokens, row-parallel back, reduce-scattered to the rank's tokens before the gate.
//
// Context and sequence parallelism: each rank routes its tokens; the load-balancing loss is a
// statistic of the micro-batch, so the ranks splitting it (the tp group under sequence
// parallelism, the cp group) pool their choices per expert (one all-reduce of E + 1 counts per
// group) before the backward takes each expert's share from them.
//
// Layouts the trainer runs it in: one rank, data, tensor (with sequence), context and expert
// parallelism with any ZeRO stage, pipelines and recomputation (the admission rule in
// schemas/executor_admission.h says which plans).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/model/parameter_store.h"
#include "strata/executor/model/tensor_parallel.h"
#include "strata/executor/ops/top_k_router.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// The groups a MoE layer's routed experts are split over: `group` (ep) takes ranges of experts,
// `width_group` (etp) each expert's width. Null: one rank holds them all, or whole.
struct ExpertParallelism {
  Communicator* group = nullptr;
  Communicator* width_group = nullptr;
  int size() const { return group ? group->size() : 1; }
  int rank() const { return group ? group->rank() : 0; }
  bool active() const { return size() > 1; }
  int width_size() const { return width_group ? width_group->size() : 1; }
  int width_rank() const { return width_group ? width_group->rank() : 0; }
  bool splits_width() const { return width_size() > 1; }
};

// Who sends which dispatched rows where under expert parallelism, for one micro-batch.
struct ExpertExchange {
  std::vector<std::int64_t> send_rows, receive_rows;  // per ep member
  // The rows received (member-major, then expert) regrouped by this member's experts: row i of
  // the expert-major layout is received row order[i].
  std::vector<std::int64_t> order;
};

// One micro-batch's MoE forward state: the routing, the dispatched rows (row r is the pair
// routing.dispatched[r]) and, on the member holding their experts, the rows it computes.
struct MoeActivations {
  Tensor logits;  // [tokens, experts]
  TokenRouting routing;
  Tensor dispatched_in;  // [rows, hidden]: this member's tokens, by expert
  Tensor expert_out;     // [rows, hidden]: their experts' outputs, before the combine weight
  // The rows this member's experts compute (the dispatched rows themselves without ep), grouped
  // by local expert: expert l's are expert_in[local_offsets[l] … local_offsets[l + 1]).
  Tensor expert_in;
  std::vector<std::int64_t> local_offsets;
  ExpertExchange exchange;
  // The rows the experts compute: under etp every etp member's rows for the group's experts
  // (gathered, expert-major: expert l's are computed_in[computed_offsets[l] …
  // computed_offsets[l + 1])), otherwise expert_in itself; width_exchange says whose they are.
  Tensor computed_in;
  std::vector<std::int64_t> computed_offsets;
  ExpertExchange width_exchange;
  // [computed rows, F/etp]: pre-activation (gpt) / gate (llama), up; the activation's output.
  Tensor hidden_in, up, hidden_out;
  Tensor expert_out_local;  // [local rows, hidden]: summed over etp
  // The shared experts: this tp rank's columns for all the group's tokens ([all tokens, S·Fs/tp]),
  // and their output summed over tp on this rank's tokens, bias added ([tokens, hidden]).
  Tensor shared_in, shared_up, shared_hidden, shared_out;
  Tensor shared_gate;  // [tokens, 1]: sigmoid of the gate logit
};

class MoeMlp {
 public:
  // `store` holds this member's experts (its Shard(0) of the stacked tensors under `ep`) and its
  // tp columns of the shared experts. `context_group`: the ranks one micro-batch's sequences are
  // split over (the cp group; null or one rank: none). With the tp group under sequence
  // parallelism, the ranks whose routing choices the load-balancing loss pools, as one rank
  // holding the whole micro-batch would count them.
  MoeMlp(const schemas::ModelConfig& model, std::int64_t index, ParameterStore& store,
         const TensorParallelism& tp, ExpertParallelism ep = {},
         Communicator* context_group = nullptr);

  // y = moe(h): h [all tokens, hidden] is every token of the tp group (gathered under sequence
  // parallelism), y [tokens, hidden] (overwritten) this rank's (tp.local_tokens of them).
  void forward(const Tensor& h, Tensor& y, MoeActivations& a) const;
  // dh [tokens, hidden] = ∂/∂ this rank's rows of h (overwritten) given dy [tokens, hidden];
  // parameter gradients accumulate in the store.
  // auxiliary_scale weighs this micro-batch's router losses in the step's objective: the loss
  // scale of its token losses times its tokens, so that a step's objective is its mean token loss
  // plus the mean over its micro-batches of each MoE layer's auxiliary losses.
  void backward(const Tensor& dy, const Tensor& h, const MoeActivations& a, double auxiliary_scale,
                Tensor& dh) const;

  // With an expert-bias router: the bias, and this rank's choices per expert over the micro-
  // batches trained since the last take_step_loads (which returns and clears them).
  ParameterEntry* expert_bias() const { return expert_bias_; }
  std::vector<double> take_step_loads() {
    std::vector<double> loads(step_loads_.size(), 0.0);
    std::swap(loads, step_loads_);
    return loads;
  }

 private:
  struct Matrices {                       // one MLP's parameters (null where absent)
    ParameterEntry* in_weight = nullptr;  // gpt: fc; llama: gate
    ParameterEntry* in_bias = nullptr;
    ParameterEntry* up_weight = nullptr;  // llama only
    ParameterEntry* up_bias = nullptr;
    ParameterEntry* output_weight = nullptr;
    ParameterEntry* output_bias = nullptr;
  };
  // Rows between this member's dispatch order and its experts' (identity without ep).
  void dispatch(MoeActivations& a) const;
  void return_outputs(MoeActivations& a) const;
  Tensor receive_output_gradients(const Tensor& d_expert_out, const MoeActivations& a) const;
  Tensor return_input_gradients(const Tensor& d_expert_in, const MoeActivations& a) const;
  // Expert tensor parallelism: this member's rows gathered over the etp group (forward: with the
  // counts, into a.computed_in), and partial sums of the computed rows back to their members.
  void gather_over_width(MoeActivations& a) const;
  Tensor gather_rows_over_width(const Tensor& own, const MoeActivations& a) const;
  Tensor sum_over_width(const Tensor& computed, const MoeActivations& a) const;
  // The load-balancing statistic pooled over the ranks that split the micro-batch's tokens.
  void pool_balance_counts(TokenRouting& routing, std::int64_t tokens) const;
  void shared_forward(const Tensor& h_all, const Tensor& h, Tensor& y, MoeActivations& a) const;
  void shared_backward(const Tensor& dy, const Tensor& h_all, const Tensor& h,
                       const MoeActivations& a, Tensor& dh) const;

  const schemas::ModelConfig& model_;
  const schemas::MoeConfig& moe_;
  const TensorParallelism& tp_;
  ExpertParallelism ep_;
  Communicator* context_group_;
  std::int64_t local_experts_;
  std::int64_t width_;  // each expert's width on this member (F / etp)
  bool gated_mlp_;      // SwiGLU or clamped SwiGLU: gate and up projections
  ParameterEntry* router_;
  ParameterEntry* expert_bias_ = nullptr;
  ParameterEntry* router_bias_ = nullptr;  // GPT-OSS's learned logit bias, if any
  // Counted by the (const) backward: bookkeeping of the step, not of the layer's function.
  mutable std::vector<double> step_loads_;
  Matrices experts_;
  Matrices shared_;
  ParameterEntry* shared_gate_ = nullptr;
};

}  // namespace strata::executor
