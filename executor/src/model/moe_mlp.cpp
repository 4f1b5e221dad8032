#include "strata/executor/model/moe_mlp.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "activation_dispatch.h"
#include "strata/executor/ops/bias.h"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/ops/linear.h"
#include "strata/executor/ops/residual.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;
using schemas::MoeConfig;

std::string name_of(std::int64_t index, const std::string& suffix) {
  return fmt::format("layers.{}.mlp.{}", index, suffix);
}

// One MLP's tensors as the ops see them: expert e's slices of the stacked weights (or the shared
// experts' whole matrices) and the matching gradient views. Absent biases stay empty.
struct MlpView {
  Tensor in_weight, in_bias, up_weight, up_bias, output_weight, output_bias;
  const Tensor* bias(const Tensor& tensor) const { return tensor.numel() > 0 ? &tensor : nullptr; }
};

Tensor slice(const Tensor& stacked, std::int64_t index, Shape shape) {
  const std::int64_t offset = index * shape_numel(shape);  // before the shape moves
  return stacked.view(offset, std::move(shape));
}

// Rows of a [rows, columns] tensor: rows first … first + count − 1.
Tensor rows(const Tensor& tensor, std::int64_t first, std::int64_t count) {
  const std::int64_t columns = tensor.size(1);
  return tensor.view(first * columns, {count, columns});
}

// to[i] = from[index[i]], rows of `from`'s width.
void gather_rows(const Tensor& from, const std::vector<std::int64_t>& index, Tensor& to) {
  const std::size_t row_bytes =
      static_cast<std::size_t>(from.size(1)) * scalar_bytes(from.scalar_type());
  for (std::size_t i = 0; i < index.size(); ++i) {
    std::memcpy(static_cast<std::byte*>(to.raw()) + i * row_bytes,
                static_cast<const std::byte*>(from.raw()) + index[i] * row_bytes, row_bytes);
  }
}

// to[index[i]] = from[i]: gather_rows undone.
void scatter_rows(const Tensor& from, const std::vector<std::int64_t>& index, Tensor& to) {
  const std::size_t row_bytes =
      static_cast<std::size_t>(from.size(1)) * scalar_bytes(from.scalar_type());
  for (std::size_t i = 0; i < index.size(); ++i) {
    std::memcpy(static_cast<std::byte*>(to.raw()) + index[i] * row_bytes,
                static_cast<const std::byte*>(from.raw()) + i * row_bytes, row_bytes);
  }
}

// Rows per ep member as element counts of rows `width` wide.
std::vector<std::int64_t> elements(const std::vector<std::int64_t>& rows, std::int64_t width) {
  std::vector<std::int64_t> counts;
  for (std::int64_t r : rows) counts.push_back(r * width);
  return counts;
}

// Rows that arrive member-major (each member's, expert by expert: count_of[member][expert]) and
// are computed expert-major: fills `exchange`'s receive_rows and order (row i of the expert-major
// layout is arrived row order[i]) and `offsets` (expert l's rows begin at offsets[l]). Returns
// the rows that arrive.
std::int64_t regroup_by_expert(const std::int32_t* count_of, int members, std::int64_t experts,
                               ExpertExchange& exchange, std::vector<std::int64_t>& offsets) {
  std::vector<std::int64_t> block_start(static_cast<std::size_t>(members * experts));
  exchange.receive_rows.assign(static_cast<std::size_t>(members), 0);
  std::int64_t received = 0;
  for (int m = 0; m < members; ++m) {
    for (std::int64_t e = 0; e < experts; ++e) {
      block_start[m * experts + e] = received;
      received += count_of[m * experts + e];
      exchange.receive_rows[static_cast<std::size_t>(m)] += count_of[m * experts + e];
    }
  }
  exchange.order.clear();
  offsets.assign(1, 0);
  for (std::int64_t e = 0; e < experts; ++e) {
    for (int m = 0; m < members; ++m) {
      const std::int64_t start = block_start[m * experts + e];
      for (std::int32_t k = 0; k < count_of[m * experts + e]; ++k) {
        exchange.order.push_back(start + k);
      }
    }
    offsets.push_back(static_cast<std::int64_t>(exchange.order.size()));
  }
  return received;
}

}  // namespace

MoeMlp::MoeMlp(const ModelConfig& model, std::int64_t index, ParameterStore& store,
               const TensorParallelism& tp, ExpertParallelism ep, Communicator* context_group)
    : model_(model),
      moe_(*model.moe),
      tp_(tp),
      ep_(ep),
      context_group_(context_group),
      local_experts_(0),
      width_(0),
      gated_mlp_(schemas::is_gated(model.mlp_activation)),
      router_(&store.entry(name_of(index, "router.weight"))) {
  auto optional = [&](const std::string& suffix) -> ParameterEntry* {
    const std::string name = name_of(index, suffix);
    return store.contains(name) ? &store.entry(name) : nullptr;
  };
  expert_bias_ = optional("router.expert_bias");
  router_bias_ = optional("router.bias");
  if (expert_bias_ != nullptr) step_loads_.assign(static_cast<std::size_t>(moe_.num_experts), 0.0);
  auto group = [&](const char* prefix) {
    Matrices m;
    const std::string in = gated_mlp_ ? "gate" : "fc";
    m.in_weight = optional(fmt::format("{}.{}.weight", prefix, in));
    m.in_bias = optional(fmt::format("{}.{}.bias", prefix, in));
    m.up_weight = optional(fmt::format("{}.up.weight", prefix));
    m.up_bias = optional(fmt::format("{}.up.bias", prefix));
    m.output_weight = optional(fmt::format("{}.output.weight", prefix));
    m.output_bias = optional(fmt::format("{}.output.bias", prefix));
    return m;
  };
  experts_ = group("experts");
  shared_ = group("shared");
  shared_gate_ = optional("shared_gate.weight");
  STRATA_CHECK(experts_.in_weight != nullptr && experts_.output_weight != nullptr,
               "layer {}: a MoE layer without its experts' weights", index);
  local_experts_ = experts_.in_weight->shape[0];
  width_ = experts_.in_weight->shape[1];
  STRATA_CHECK(width_ * ep_.width_size() == moe_.expert_ffn_hidden_size,
               "layer {}: experts {} wide on each of {} expert-tensor-parallel ranks for a width "
               "of {}",
               index, width_, ep_.width_size(), moe_.expert_ffn_hidden_size);
  STRATA_CHECK(local_experts_ * ep_.size() == moe_.num_experts,
               "layer {}: {} experts held on each of {} expert-parallel ranks for {} experts",
               index, local_experts_, ep_.size(), moe_.num_experts);
}

namespace {

// Expert e's slices of the stacked routed-expert tensors `m` (MoeMlp's Matrices): `pick` chooses
// the compute copies or the gradients.
// `width`: the part of each expert's width this member holds (all of it without etp).
template <class Pick, class Entries>
MlpView expert_view(std::int64_t width, std::int64_t hidden, std::int64_t e, Pick pick,
                    const Entries& m) {
  MlpView view;
  view.in_weight = slice(pick(*m.in_weight), e, {width, hidden});
  if (m.in_bias) view.in_bias = slice(pick(*m.in_bias), e, {width});
  if (m.up_weight) view.up_weight = slice(pick(*m.up_weight), e, {width, hidden});
  if (m.up_bias) view.up_bias = slice(pick(*m.up_bias), e, {width});
  view.output_weight = slice(pick(*m.output_weight), e, {hidden, width});
  if (m.output_bias) view.output_bias = slice(pick(*m.output_bias), e, {hidden});
  return view;
}

const auto kCompute = [](ParameterEntry& entry) -> Tensor& { return entry.compute; };
const auto kGradient = [](ParameterEntry& entry) -> Tensor& { return entry.gradient; };

}  // namespace

void MoeMlp::pool_balance_counts(TokenRouting& routing, std::int64_t tokens) const {
  if (moe_.router.aux_loss_coefficient == 0) return;
  Communicator* token_group = tp_.shards_tokens() ? tp_.group : nullptr;
  for (Communicator* group : {token_group, context_group_}) {
    if (group == nullptr || group->size() == 1) continue;
    // The micro-batch's choices per expert and its tokens, summed over the ranks holding it
    // (counts: exact in float64, in any order of summation).
    std::vector<std::int64_t>& counts = routing.balance_counts;
    Tensor pooled = Tensor::zeros({moe_.num_experts + 1}, ScalarType::float64);
    double* values = pooled.data<double>();
    for (std::int64_t e = 0; e < moe_.num_experts; ++e) {
      values[e] = static_cast<double>(counts[static_cast<std::size_t>(e)]);
    }
    values[moe_.num_experts] = static_cast<double>(routing.balance_tokens);
    group->all_reduce(pooled, ReduceOp::sum);
    for (std::int64_t e = 0; e < moe_.num_experts; ++e) {
      counts[static_cast<std::size_t>(e)] = std::llround(values[e]);
    }
    routing.balance_tokens = std::llround(values[moe_.num_experts]);
  }
  STRATA_CHECK(routing.balance_tokens >= tokens, "pooled {} tokens of a rank's {}",
               routing.balance_tokens, tokens);
}

void MoeMlp::forward(const Tensor& h_all, Tensor& y, MoeActivations& a) const {
  STRATA_CHECK(h_all.device() == Device::cpu, "mixture-of-experts layers run on the CPU backend");
  // This rank's tokens: its rows of the group's (all of them without sequence parallelism).
  const std::int64_t tokens = tp_.local_tokens(h_all.size(0)), hidden = model_.hidden_size;
  const Tensor h = rows(h_all, tp_.first_local_token(h_all.size(0)), tokens);
  const ScalarType type = h.scalar_type();
  a.logits = Tensor::zeros({tokens, moe_.num_experts}, type);
  linear_forward(h, router_->compute, router_bias_ ? &router_bias_->compute : nullptr, a.logits);
  route_tokens(a.logits, moe_, a.routing, expert_bias_ ? &expert_bias_->compute : nullptr);
  pool_balance_counts(a.routing, tokens);
  const TokenRouting& routing = a.routing;
  const std::int64_t rows_dispatched = routing.dispatched_count();
  const std::int64_t width = width_;
  // Permute: each dispatched row is a copy of its token's input.
  a.dispatched_in = Tensor::zeros({rows_dispatched, hidden}, type);
  std::vector<std::int64_t> token_of_row(static_cast<std::size_t>(rows_dispatched));
  for (std::int64_t r = 0; r < rows_dispatched; ++r) token_of_row[r] = routing.token_of(r);
  gather_rows(h, token_of_row, a.dispatched_in);
  dispatch(a);
  gather_over_width(a);
  const std::int64_t rows_computed = a.computed_in.size(0);
  a.hidden_in = Tensor::zeros({rows_computed, width}, type);
  a.up = gated_mlp_ ? Tensor::zeros({rows_computed, width}, type) : Tensor();
  a.hidden_out = Tensor::zeros({rows_computed, width}, type);
  Tensor computed_out = Tensor::zeros({rows_computed, hidden}, type);
  // Under etp each member's outputs are partial sums over its part of the width: the output
  // bias is added once, by the first member.
  const bool adds_output_bias = ep_.width_rank() == 0;
  // This member's experts, each on its contiguous rows (a grouped GEMM as a loop of GEMMs).
  for (std::int64_t e = 0; e < local_experts_; ++e) {
    const std::int64_t first = a.computed_offsets[e];
    const std::int64_t count = a.computed_offsets[e + 1] - first;
    if (count == 0) continue;
    const MlpView w = expert_view(width_, hidden, e, kCompute, experts_);
    const Tensor x = rows(a.computed_in, first, count);
    Tensor hidden_in = rows(a.hidden_in, first, count);
    Tensor hidden_out = rows(a.hidden_out, first, count);
    if (gated_mlp_) {
      Tensor up = rows(a.up, first, count);
      linear_forward(x, w.in_weight, w.bias(w.in_bias), hidden_in);
      linear_forward(x, w.up_weight, w.bias(w.up_bias), up);
      detail::gated_activation_forward(model_, hidden_in, up, hidden_out);
    } else {
      detail::linear_activation_forward(model_.mlp_activation, x, w.in_weight, w.bias(w.in_bias),
                                        hidden_in, hidden_out);
    }
    Tensor out = rows(computed_out, first, count);
    linear_forward(hidden_out, w.output_weight, adds_output_bias ? w.bias(w.output_bias) : nullptr,
                   out);
  }
  a.expert_out_local = sum_over_width(computed_out, a);
  return_outputs(a);
  // Unpermute: each token's output is its kept experts' outputs times their weights.
  y.fill_zero();
  dispatch_floating(type, "moe_combine", [&]<class T>() {
    const T* weights = routing.weights.data<T>();
    const T* expert_out = a.expert_out.data<T>();
    T* out = y.data<T>();
    for (std::int64_t r = 0; r < rows_dispatched; ++r) {
      const T weight = weights[routing.dispatched[r]];
      T* target = out + routing.token_of(r) * hidden;
      const T* source = expert_out + r * hidden;
      for (std::int64_t i = 0; i < hidden; ++i) target[i] += weight * source[i];
    }
  });
  if (shared_.in_weight != nullptr) shared_forward(h_all, h, y, a);
}

void MoeMlp::shared_forward(const Tensor& h_all, const Tensor& h, Tensor& y,
                            MoeActivations& a) const {
  // Column-parallel on all the group's tokens, row-parallel back to partial sums over tp.
  const std::int64_t all_tokens = h_all.size(0), tokens = h.size(0);
  const std::int64_t hidden = model_.hidden_size;
  const ScalarType type = h.scalar_type();
  const std::int64_t shared_width = shared_.in_weight->shape[0];  // this tp rank's columns
  a.shared_in = Tensor::zeros({all_tokens, shared_width}, type);
  a.shared_up = gated_mlp_ ? Tensor::zeros({all_tokens, shared_width}, type) : Tensor();
  a.shared_hidden = Tensor::zeros({all_tokens, shared_width}, type);
  const Tensor* in_bias = shared_.in_bias ? &shared_.in_bias->compute : nullptr;
  if (gated_mlp_) {
    linear_forward(h_all, shared_.in_weight->compute, in_bias, a.shared_in);
    linear_forward(h_all, shared_.up_weight->compute,
                   shared_.up_bias ? &shared_.up_bias->compute : nullptr, a.shared_up);
    detail::gated_activation_forward(model_, a.shared_in, a.shared_up, a.shared_hidden);
  } else {
    detail::linear_activation_forward(model_.mlp_activation, h_all, shared_.in_weight->compute,
                                      in_bias, a.shared_in, a.shared_hidden);
  }
  Tensor partial = Tensor::zeros({all_tokens, hidden}, type);
  linear_forward(a.shared_hidden, shared_.output_weight->compute, nullptr, partial);
  // Summed over tp onto this rank's tokens (partial itself on one rank without tp).
  a.shared_out = tp_.active() ? Tensor::zeros({tokens, hidden}, type) : partial;
  reduce_sequence(tp_, partial, a.shared_out);
  if (shared_.output_bias) {
    for (std::int64_t s = 0; s < moe_.num_shared_experts; ++s) {
      bias_forward(a.shared_out, slice(shared_.output_bias->compute, s, {hidden}));
    }
  }
  if (shared_gate_) {
    a.shared_gate = Tensor::zeros({tokens, 1}, type);
    linear_forward(h, shared_gate_->compute, nullptr, a.shared_gate);
  }
  dispatch_floating(type, "moe_shared_combine", [&]<class T>() {
    T* gate = shared_gate_ ? a.shared_gate.data<T>() : nullptr;
    const T* shared = a.shared_out.data<T>();
    T* out = y.data<T>();
    for (std::int64_t t = 0; t < tokens; ++t) {
      T factor = 1;
      if (gate) factor = gate[t] = T(1) / (T(1) + std::exp(-gate[t]));
      for (std::int64_t i = 0; i < hidden; ++i)
        out[t * hidden + i] += factor * shared[t * hidden + i];
    }
  });
}

void MoeMlp::backward(const Tensor& dy, const Tensor& h_all, const MoeActivations& a,
                      double auxiliary_scale, Tensor& dh) const {
  const TokenRouting& routing = a.routing;
  // The step's loads count each trained micro-batch once: here, not in a forward that
  // recomputation or evaluation may run again.
  for (std::size_t e = 0; e < step_loads_.size(); ++e) {
    step_loads_[e] += static_cast<double>(routing.tokens_per_expert[e]);
  }
  const std::int64_t tokens = tp_.local_tokens(h_all.size(0)), hidden = model_.hidden_size;
  const Tensor h = rows(h_all, tp_.first_local_token(h_all.size(0)), tokens);
  const std::int64_t rows_dispatched = routing.dispatched_count();
  const std::int64_t width = width_;
  const ScalarType type = h.scalar_type();
  Tensor d_weights = Tensor::zeros({tokens, moe_.experts_per_token}, type);
  Tensor d_expert_out = Tensor::zeros({rows_dispatched, hidden}, type);
  // The combine: ∂/∂weight is the output's dot with dy, ∂/∂output the weight times dy.
  dispatch_floating(type, "moe_combine_backward", [&]<class T>() {
    const T* weights = routing.weights.data<T>();
    const T* expert_out = a.expert_out.data<T>();
    const T* grad = dy.data<T>();
    T* d_weight = d_weights.data<T>();
    T* d_out = d_expert_out.data<T>();
    for (std::int64_t r = 0; r < rows_dispatched; ++r) {
      const std::int64_t pair = routing.dispatched[r];
      const T* g = grad + routing.token_of(r) * hidden;
      const T* o = expert_out + r * hidden;
      T dot = 0;
      for (std::int64_t i = 0; i < hidden; ++i) {
        dot += g[i] * o[i];
        d_out[r * hidden + i] = weights[pair] * g[i];
      }
      d_weight[pair] = dot;
    }
  });
  // The experts' backward on the member holding them, output projection first.
  // Under etp the output gradients of the etp group's rows, each member's part of the width.
  const Tensor d_computed_out =
      gather_rows_over_width(receive_output_gradients(d_expert_out, a), a);
  const std::int64_t rows_computed = a.computed_in.size(0);
  Tensor d_hidden_out = Tensor::zeros({rows_computed, width}, type);
  Tensor d_in = Tensor::zeros({rows_computed, width}, type);
  Tensor d_up = gated_mlp_ ? Tensor::zeros({rows_computed, width}, type) : Tensor();
  Tensor d_computed_in = Tensor::zeros({rows_computed, hidden}, type);
  auto each_expert = [&](auto&& body) {
    for (std::int64_t e = 0; e < local_experts_; ++e) {
      const std::int64_t first = a.computed_offsets[e];
      const std::int64_t count = a.computed_offsets[e + 1] - first;
      if (count == 0) continue;
      const MlpView w = expert_view(width_, hidden, e, kCompute, experts_);
      MlpView g = expert_view(width_, hidden, e, kGradient, experts_);
      body(first, count, w, g);
    }
  };
  each_expert([&](std::int64_t first, std::int64_t count, const MlpView& w, MlpView& g) {
    const Tensor d_out = rows(d_computed_out, first, count);
    Tensor d_hidden = rows(d_hidden_out, first, count);
    linear_backward_input(d_out, w.output_weight, d_hidden, GradientWrite::overwrite);
    linear_backward_parameters(d_out, rows(a.hidden_out, first, count), g.output_weight,
                               g.output_bias.numel() > 0 ? &g.output_bias : nullptr);
  });
  if (rows_computed > 0) {
    if (gated_mlp_) {
      detail::gated_activation_backward(model_, d_hidden_out, a.hidden_in, a.up, d_in, d_up);
    } else {
      detail::activation_backward(model_.mlp_activation, d_hidden_out, a.hidden_in, d_in,
                                  GradientWrite::overwrite);
    }
  }
  each_expert([&](std::int64_t first, std::int64_t count, const MlpView& w, MlpView& g) {
    const Tensor x = rows(a.computed_in, first, count);
    Tensor d_x = rows(d_computed_in, first, count);
    const Tensor d_in_rows = rows(d_in, first, count);
    linear_backward_input(d_in_rows, w.in_weight, d_x, GradientWrite::overwrite);
    linear_backward_parameters(d_in_rows, x, g.in_weight,
                               g.in_bias.numel() > 0 ? &g.in_bias : nullptr);
    if (gated_mlp_) {
      const Tensor d_up_rows = rows(d_up, first, count);
      linear_backward_input(d_up_rows, w.up_weight, d_x, GradientWrite::accumulate);
      linear_backward_parameters(d_up_rows, x, g.up_weight,
                                 g.up_bias.numel() > 0 ? &g.up_bias : nullptr);
    }
  });
  // Partial input gradients over the width, summed back to this member's rows, then home.
  const Tensor d_dispatched = return_input_gradients(sum_over_width(d_computed_in, a), a);
  // Unpermute the input gradients: each dispatched row adds to its token.
  dh.fill_zero();
  dispatch_floating(type, "moe_dispatch_backward", [&]<class T>() {
    const T* source = d_dispatched.data<T>();
    T* target = dh.data<T>();
    for (std::int64_t r = 0; r < rows_dispatched; ++r) {
      T* row = target + routing.token_of(r) * hidden;
      for (std::int64_t i = 0; i < hidden; ++i) row[i] += source[r * hidden + i];
    }
  });
  if (shared_.in_weight != nullptr) shared_backward(dy, h_all, h, a, dh);
  // The router: the combine weights' gradient and the auxiliary losses reach its logits.
  Tensor d_logits = Tensor::zeros({tokens, moe_.num_experts}, type);
  route_tokens_backward(a.logits, routing, moe_, d_weights, auxiliary_scale, d_logits);
  linear_backward(d_logits, h, router_->compute, &dh, router_->gradient,
                  router_bias_ ? &router_bias_->gradient : nullptr);
}

void MoeMlp::shared_backward(const Tensor& dy, const Tensor& h_all, const Tensor& h,
                             const MoeActivations& a, Tensor& dh) const {
  const std::int64_t all_tokens = h_all.size(0), tokens = h.size(0);
  const std::int64_t hidden = model_.hidden_size;
  const ScalarType type = h.scalar_type();
  // y += gate · shared: the shared MLP sees gate · dy, the gate logit dy·shared · σ'(logit).
  Tensor d_shared = Tensor::zeros({tokens, hidden}, type);
  Tensor d_gate_logit = shared_gate_ ? Tensor::zeros({tokens, 1}, type) : Tensor();
  dispatch_floating(type, "moe_shared_combine_backward", [&]<class T>() {
    const T* grad = dy.data<T>();
    const T* shared = a.shared_out.data<T>();
    const T* gate = shared_gate_ ? a.shared_gate.data<T>() : nullptr;
    T* d_out = d_shared.data<T>();
    for (std::int64_t t = 0; t < tokens; ++t) {
      const T factor = gate ? gate[t] : T(1);
      T dot = 0;
      for (std::int64_t i = 0; i < hidden; ++i) {
        d_out[t * hidden + i] = factor * grad[t * hidden + i];
        dot += grad[t * hidden + i] * shared[t * hidden + i];
      }
      if (gate) d_gate_logit.data<T>()[t] = dot * gate[t] * (T(1) - gate[t]);
    }
  });
  if (shared_gate_) {
    linear_backward(d_gate_logit, h, shared_gate_->compute, &dh, shared_gate_->gradient, nullptr);
  }
  if (shared_.output_bias) {
    for (std::int64_t s = 0; s < moe_.num_shared_experts; ++s) {
      Tensor bias_gradient = slice(shared_.output_bias->gradient, s, {hidden});
      bias_backward(d_shared, bias_gradient);
    }
  }
  // Back through the row-parallel output on all the group's tokens; the column-parallel inputs'
  // gradients are partial sums over tp, reduce-scattered to this rank's tokens. On one rank the
  // gradients add into dh directly.
  Tensor d_shared_all = tp_.shards_tokens() ? Tensor::zeros({all_tokens, hidden}, type) : d_shared;
  gather_sequence(tp_, d_shared, d_shared_all);
  const std::int64_t shared_width = shared_.in_weight->shape[0];
  Tensor d_shared_hidden = Tensor::zeros({all_tokens, shared_width}, type);
  linear_backward(d_shared_all, a.shared_hidden, shared_.output_weight->compute, &d_shared_hidden,
                  shared_.output_weight->gradient, nullptr);
  Tensor d_h_partial = tp_.active() ? Tensor::zeros({all_tokens, hidden}, type) : dh;
  Tensor d_shared_in = Tensor::zeros({all_tokens, shared_width}, type);
  if (gated_mlp_) {
    Tensor d_shared_up = Tensor::zeros({all_tokens, shared_width}, type);
    detail::gated_activation_backward(model_, d_shared_hidden, a.shared_in, a.shared_up,
                                      d_shared_in, d_shared_up);
    linear_backward(d_shared_up, h_all, shared_.up_weight->compute, &d_h_partial,
                    shared_.up_weight->gradient,
                    shared_.up_bias ? &shared_.up_bias->gradient : nullptr);
  } else {
    detail::activation_backward(model_.mlp_activation, d_shared_hidden, a.shared_in, d_shared_in,
                                GradientWrite::overwrite);
  }
  linear_backward(d_shared_in, h_all, shared_.in_weight->compute, &d_h_partial,
                  shared_.in_weight->gradient,
                  shared_.in_bias ? &shared_.in_bias->gradient : nullptr);
  if (!tp_.active()) return;
  Tensor d_h_shared = Tensor::zeros({tokens, hidden}, type);
  reduce_sequence(tp_, d_h_partial, d_h_shared);
  residual_forward(dh, d_h_shared, dh);
}

void MoeMlp::gather_over_width(MoeActivations& a) const {
  if (!ep_.splits_width()) {
    a.computed_in = a.expert_in;
    a.computed_offsets = a.local_offsets;
    return;
  }
  // The etp group holds the same experts, each member its part of their width; each member
  // received its own rows for them. Every member computes every member's rows: first the counts
  // per expert, then the rows (an all-gather of unequal blocks, as an all-to-all), regrouped
  // expert-major as the experts compute them.
  Communicator& group = *ep_.width_group;
  const int members = group.size();
  Tensor counts = Tensor::zeros({local_experts_}, ScalarType::int32);
  for (std::int64_t e = 0; e < local_experts_; ++e) {
    counts.data<std::int32_t>()[e] =
        static_cast<std::int32_t>(a.local_offsets[e + 1] - a.local_offsets[e]);
  }
  Tensor all_counts = Tensor::zeros({members * local_experts_}, ScalarType::int32);
  group.all_gather(counts, all_counts);
  const std::int32_t* count_of = all_counts.data<std::int32_t>();  // [member, local expert]
  ExpertExchange& exchange = a.width_exchange;
  exchange.send_rows.assign(static_cast<std::size_t>(members), a.expert_in.size(0));
  regroup_by_expert(count_of, members, local_experts_, exchange, a.computed_offsets);
  a.computed_in = gather_rows_over_width(a.expert_in, a);
}

Tensor MoeMlp::gather_rows_over_width(const Tensor& own, const MoeActivations& a) const {
  if (!ep_.splits_width()) return own;
  Communicator& group = *ep_.width_group;
  const int members = group.size();
  const std::int64_t hidden = model_.hidden_size;
  const ExpertExchange& exchange = a.width_exchange;
  const std::int64_t own_rows = own.size(0);
  // One copy of this member's rows for every member (itself included).
  Tensor leaving = Tensor::zeros({members * own_rows, hidden}, own.scalar_type());
  for (int m = 0; m < members; ++m) rows(leaving, m * own_rows, own_rows).copy_from(own);
  const std::int64_t received = static_cast<std::int64_t>(exchange.order.size());
  Tensor arrived = Tensor::zeros({received, hidden}, own.scalar_type());
  group.all_to_all(leaving, elements(exchange.send_rows, hidden), arrived,
                   elements(exchange.receive_rows, hidden));
  Tensor computed = Tensor::zeros({received, hidden}, own.scalar_type());
  gather_rows(arrived, exchange.order, computed);
  return computed;
}

Tensor MoeMlp::sum_over_width(const Tensor& computed, const MoeActivations& a) const {
  if (!ep_.splits_width()) return computed;
  // Each member's partial sums of every member's rows go back to their member (member-major),
  // which adds the parts in member order: a reduce-scatter of unequal blocks.
  Communicator& group = *ep_.width_group;
  const int members = group.size();
  const std::int64_t hidden = model_.hidden_size;
  const ExpertExchange& exchange = a.width_exchange;
  Tensor leaving = Tensor::zeros_like(computed);
  scatter_rows(computed, exchange.order, leaving);
  const std::int64_t own_rows = a.expert_in.size(0);
  Tensor arrived = Tensor::zeros({members * own_rows, hidden}, computed.scalar_type());
  group.all_to_all(leaving, elements(exchange.receive_rows, hidden), arrived,
                   elements(exchange.send_rows, hidden));
  Tensor own = Tensor::zeros({own_rows, hidden}, computed.scalar_type());
  for (int m = 0; m < members; ++m) {
    const Tensor part = rows(arrived, m * own_rows, own_rows);
    residual_forward(own, part, own);
  }
  return own;
}

void MoeMlp::dispatch(MoeActivations& a) const {
  const TokenRouting& routing = a.routing;
  if (!ep_.active()) {
    a.expert_in = a.dispatched_in;
    a.local_offsets = routing.expert_offsets;
    return;
  }
  // Each member's experts are a range, so the rows for member m are one block of the dispatch
  // order. First the counts: member m learns how many rows each member sends each of its experts.
  const int members = ep_.size();
  const std::int64_t hidden = model_.hidden_size;
  ExpertExchange& exchange = a.exchange;
  exchange.send_rows.assign(static_cast<std::size_t>(members), 0);
  Tensor counts = Tensor::zeros({moe_.num_experts}, ScalarType::int32);
  for (std::int64_t e = 0; e < moe_.num_experts; ++e) {
    const std::int64_t rows_of_expert = routing.expert_offsets[e + 1] - routing.expert_offsets[e];
    counts.data<std::int32_t>()[e] = static_cast<std::int32_t>(rows_of_expert);
    exchange.send_rows[static_cast<std::size_t>(e / local_experts_)] += rows_of_expert;
  }
  Tensor received_counts = Tensor::zeros({members * local_experts_}, ScalarType::int32);
  const std::vector<std::int64_t> per_member(static_cast<std::size_t>(members), local_experts_);
  ep_.group->all_to_all(counts, per_member, received_counts, per_member);
  // Received rows are member-major, then expert; this member computes them expert-major.
  const std::int32_t* count_of = received_counts.data<std::int32_t>();  // [member, local expert]
  const std::int64_t received =
      regroup_by_expert(count_of, members, local_experts_, exchange, a.local_offsets);
  Tensor arrived = Tensor::zeros({received, hidden}, a.dispatched_in.scalar_type());
  ep_.group->all_to_all(a.dispatched_in, elements(exchange.send_rows, hidden), arrived,
                        elements(exchange.receive_rows, hidden));
  a.expert_in = Tensor::zeros({received, hidden}, a.dispatched_in.scalar_type());
  gather_rows(arrived, exchange.order, a.expert_in);
}

void MoeMlp::return_outputs(MoeActivations& a) const {
  if (!ep_.active()) {
    a.expert_out = a.expert_out_local;
    return;
  }
  const std::int64_t hidden = model_.hidden_size;
  const ExpertExchange& exchange = a.exchange;
  Tensor leaving = Tensor::zeros_like(a.expert_out_local);
  scatter_rows(a.expert_out_local, exchange.order, leaving);
  a.expert_out = Tensor::zeros_like(a.dispatched_in);
  ep_.group->all_to_all(leaving, elements(exchange.receive_rows, hidden), a.expert_out,
                        elements(exchange.send_rows, hidden));
}

Tensor MoeMlp::receive_output_gradients(const Tensor& d_expert_out, const MoeActivations& a) const {
  if (!ep_.active()) return d_expert_out;
  const std::int64_t hidden = model_.hidden_size;
  const ExpertExchange& exchange = a.exchange;
  Tensor arrived = Tensor::zeros_like(a.expert_in);
  ep_.group->all_to_all(d_expert_out, elements(exchange.send_rows, hidden), arrived,
                        elements(exchange.receive_rows, hidden));
  Tensor d_local = Tensor::zeros_like(a.expert_in);
  gather_rows(arrived, exchange.order, d_local);
  return d_local;
}

Tensor MoeMlp::return_input_gradients(const Tensor& d_expert_in, const MoeActivations& a) const {
  if (!ep_.active()) return d_expert_in;
  const std::int64_t hidden = model_.hidden_size;
  const ExpertExchange& exchange = a.exchange;
  Tensor leaving = Tensor::zeros_like(d_expert_in);
  scatter_rows(d_expert_in, exchange.order, leaving);
  Tensor d_dispatched = Tensor::zeros_like(a.dispatched_in);
  ep_.group->all_to_all(leaving, elements(exchange.receive_rows, hidden), d_dispatched,
                        elements(exchange.send_rows, hidden));
  return d_dispatched;
}

}  // namespace strata::executor
