#include "strata/executor/ops/top_k_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

using schemas::MoeConfig;
using schemas::RouterScoreFunction;

void check_logits(const char* op, const Tensor& logits, const MoeConfig& moe) {
  STRATA_CHECK(logits.dim() == 2 && logits.size(1) == moe.num_experts,
               "{}: logits {} for {} experts", op, shape_to_string(logits.shape()),
               moe.num_experts);
  STRATA_CHECK(logits.device() == Device::cpu, "{}: mixture-of-experts layers run on the CPU", op);
}

// log Σ_e exp(l_e) of one token's logits, and its softmax into `probabilities` when given.
template <class T>
T log_sum_exp(const T* logits, std::int64_t experts, T* probabilities) {
  const T top = *std::max_element(logits, logits + experts);
  T sum = 0;
  for (std::int64_t e = 0; e < experts; ++e) sum += std::exp(logits[e] - top);
  if (probabilities != nullptr) {
    for (std::int64_t e = 0; e < experts; ++e) probabilities[e] = std::exp(logits[e] - top) / sum;
  }
  return top + std::log(sum);
}

// Fills `order`'s first k entries with the token's chosen experts by decreasing choice key (ties
// to the lower index), within its best groups under group-limited routing.
template <class T>
void choose_experts(const T* key, const MoeConfig& moe, std::int64_t k,
                    std::vector<std::int32_t>& order) {
  const auto better = [&](std::int32_t a, std::int32_t b) {
    return key[a] != key[b] ? key[a] > key[b] : a < b;
  };
  const std::int64_t experts = static_cast<std::int64_t>(order.size());
  const std::int64_t groups = moe.router.expert_groups;
  std::iota(order.begin(), order.end(), 0);
  if (groups > 1) {
    const std::int64_t per_group = experts / groups;
    const std::int64_t counted = std::max<std::int64_t>(1, k / moe.router.groups_per_token);
    std::vector<T> group_key(static_cast<std::size_t>(groups));
    for (std::int64_t g = 0; g < groups; ++g) {
      auto first = order.begin() + g * per_group;
      std::partial_sort(first, first + counted, first + per_group, better);
      group_key[g] = std::accumulate(first, first + counted, T(0),
                                     [&](T sum, std::int32_t e) { return sum + key[e]; });
    }
    std::vector<std::int32_t> group_order(static_cast<std::size_t>(groups));
    std::iota(group_order.begin(), group_order.end(), 0);
    std::partial_sort(group_order.begin(), group_order.begin() + moe.router.groups_per_token,
                      group_order.end(), [&](std::int32_t a, std::int32_t b) {
                        return group_key[a] != group_key[b] ? group_key[a] > group_key[b] : a < b;
                      });
    // The chosen groups' experts first, then a top-k among them alone.
    std::vector<std::int32_t> candidates;
    for (std::int64_t i = 0; i < moe.router.groups_per_token; ++i) {
      for (std::int64_t e = 0; e < per_group; ++e) {
        candidates.push_back(static_cast<std::int32_t>(group_order[i] * per_group + e));
      }
    }
    std::copy(candidates.begin(), candidates.end(), order.begin());
    std::partial_sort(order.begin(), order.begin() + k,
                      order.begin() + static_cast<std::int64_t>(candidates.size()), better);
    return;
  }
  std::partial_sort(order.begin(), order.begin() + k, order.end(), better);
}

template <class T>
void route(const Tensor& logits_tensor, const MoeConfig& moe, const Tensor* expert_bias,
           TokenRouting& r) {
  const std::int64_t tokens = r.tokens, experts = r.experts, k = r.top_k;
  const T* logits = logits_tensor.data<T>();
  T* scores = r.scores.data<T>();
  T* weights = r.weights.data<T>();
  const bool softmax = moe.router.score_function == RouterScoreFunction::softmax;
  std::vector<std::int32_t> order(static_cast<std::size_t>(experts));
  std::vector<T> key(static_cast<std::size_t>(experts));
  const T* bias = expert_bias != nullptr ? expert_bias->data<T>() : nullptr;
  double squared_log_sum_exp = 0;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* row = logits + t * experts;
    T* score = scores + t * experts;
    if (softmax) {
      const T lse = log_sum_exp(row, experts, score);
      squared_log_sum_exp += static_cast<double>(lse) * static_cast<double>(lse);
    } else {
      for (std::int64_t e = 0; e < experts; ++e) score[e] = T(1) / (T(1) + std::exp(-row[e]));
      if (moe.router.z_loss_coefficient != 0) {
        const T lse = log_sum_exp<T>(row, experts, nullptr);
        squared_log_sum_exp += static_cast<double>(lse) * static_cast<double>(lse);
      }
    }
    // The k best by choice key; equal keys go to the lower expert index, so the choice is the
    // same on every rank and in every run.
    for (std::int64_t e = 0; e < experts; ++e) key[e] = bias ? score[e] + bias[e] : score[e];
    choose_experts(key.data(), moe, k, order);
    T chosen_sum = 0;
    for (std::int64_t slot = 0; slot < k; ++slot) chosen_sum += score[order[slot]];
    for (std::int64_t slot = 0; slot < k; ++slot) {
      const std::int32_t e = order[static_cast<std::size_t>(slot)];
      r.expert[t * k + slot] = e;
      const T chosen = score[e];
      weights[t * k + slot] = static_cast<T>(moe.router.scaling_factor) *
                              (moe.router.normalize_top_k ? chosen / chosen_sum : chosen);
      ++r.tokens_per_expert[e];
    }
  }
  // Capacity, then the dispatch order: each expert's pairs in token order.
  std::vector<std::vector<std::int64_t>> per_expert(static_cast<std::size_t>(experts));
  std::int64_t capacity = tokens * k;
  if (moe.capacity_factor) {
    capacity =
        static_cast<std::int64_t>(std::ceil(*moe.capacity_factor * static_cast<double>(tokens) *
                                            static_cast<double>(k) / static_cast<double>(experts)));
  }
  for (std::int64_t pair = 0; pair < tokens * k; ++pair) {
    auto& taken = per_expert[static_cast<std::size_t>(r.expert[pair])];
    const bool keep = static_cast<std::int64_t>(taken.size()) < capacity;
    r.kept[pair] = keep ? 1 : 0;
    if (keep) taken.push_back(pair);
  }
  r.expert_offsets.assign(1, 0);
  for (const auto& taken : per_expert) {
    r.dispatched.insert(r.dispatched.end(), taken.begin(), taken.end());
    r.expert_offsets.push_back(static_cast<std::int64_t>(r.dispatched.size()));
  }
  // The auxiliary losses' values.
  const double coefficient = moe.router.aux_loss_coefficient;
  if (coefficient != 0) {
    double balance = 0;
    for (std::int64_t e = 0; e < experts; ++e) {
      double mean_probability = 0;
      for (std::int64_t t = 0; t < tokens; ++t) {
        const T* score = scores + t * experts;
        const T normaliser = softmax ? T(1) : std::accumulate(score, score + experts, T(0));
        mean_probability += static_cast<double>(score[e] / normaliser);
      }
      mean_probability /= static_cast<double>(tokens);
      const double share =
          static_cast<double>(r.tokens_per_expert[e]) / static_cast<double>(tokens * k);
      balance += share * mean_probability;
    }
    r.load_balancing_loss = coefficient * static_cast<double>(experts) * balance;
  }
  r.z_loss = moe.router.z_loss_coefficient * squared_log_sum_exp / static_cast<double>(tokens);
  r.balance_counts = r.tokens_per_expert;
  r.balance_tokens = tokens;
}

template <class T>
void route_backward(const Tensor& logits_tensor, const TokenRouting& r, const MoeConfig& moe,
                    const Tensor& d_weights_tensor, double auxiliary_scale,
                    Tensor& d_logits_tensor) {
  const std::int64_t tokens = r.tokens, experts = r.experts, k = r.top_k;
  const T* logits = logits_tensor.data<T>();
  const T* scores = r.scores.data<T>();
  const T* d_weights = d_weights_tensor.data<T>();
  T* d_logits = d_logits_tensor.data<T>();
  const bool softmax = moe.router.score_function == RouterScoreFunction::softmax;
  const T scale = static_cast<T>(moe.router.scaling_factor);
  // ∂(auxiliary_scale · load balancing)/∂P̂[t, e] is the same for every token. Each expert's
  // share of choices is the pooled statistic's; auxiliary_scale / tokens is the step's weight of
  // one token (the loss scale), so ranks that split a micro-batch each take their tokens' part
  // of the pooled loss's gradient, and their parts sum to it.
  std::vector<T> d_balance(static_cast<std::size_t>(experts), T(0));
  if (moe.router.aux_loss_coefficient != 0) {
    for (std::int64_t e = 0; e < experts; ++e) {
      const double share =
          static_cast<double>(r.balance_counts[e]) / static_cast<double>(r.balance_tokens * k);
      d_balance[e] =
          static_cast<T>(auxiliary_scale * moe.router.aux_loss_coefficient *
                         static_cast<double>(experts) * share / static_cast<double>(tokens));
    }
  }
  const T d_z = static_cast<T>(auxiliary_scale * moe.router.z_loss_coefficient * 2.0 /
                               static_cast<double>(tokens));
  std::vector<T> d_score(static_cast<std::size_t>(experts));
  std::vector<T> probabilities(static_cast<std::size_t>(experts));
  for (std::int64_t t = 0; t < tokens; ++t) {
    const T* score = scores + t * experts;
    const std::int32_t* chosen = r.expert.data() + t * k;
    const T* d_weight = d_weights + t * k;
    std::fill(d_score.begin(), d_score.end(), T(0));
    // Through the combine weights: w_j = scale · c_j / Σ c (or scale · c_j).
    if (moe.router.normalize_top_k) {
      T chosen_sum = 0, weighted = 0;
      for (std::int64_t slot = 0; slot < k; ++slot) {
        chosen_sum += score[chosen[slot]];
        weighted += d_weight[slot] * score[chosen[slot]];
      }
      for (std::int64_t slot = 0; slot < k; ++slot) {
        d_score[chosen[slot]] +=
            scale * (d_weight[slot] / chosen_sum - weighted / (chosen_sum * chosen_sum));
      }
    } else {
      for (std::int64_t slot = 0; slot < k; ++slot) d_score[chosen[slot]] += scale * d_weight[slot];
    }
    // Through P̂: the probabilities themselves, or the sigmoid scores over their sum.
    if (softmax) {
      for (std::int64_t e = 0; e < experts; ++e) d_score[e] += d_balance[e];
    } else if (moe.router.aux_loss_coefficient != 0) {
      const T sum = std::accumulate(score, score + experts, T(0));
      T projected = 0;
      for (std::int64_t e = 0; e < experts; ++e) projected += d_balance[e] * score[e] / sum;
      for (std::int64_t e = 0; e < experts; ++e) d_score[e] += (d_balance[e] - projected) / sum;
    }
    T* d_row = d_logits + t * experts;
    if (softmax) {
      T projected = 0;
      for (std::int64_t e = 0; e < experts; ++e) projected += d_score[e] * score[e];
      for (std::int64_t e = 0; e < experts; ++e) d_row[e] = score[e] * (d_score[e] - projected);
    } else {
      for (std::int64_t e = 0; e < experts; ++e) {
        d_row[e] = d_score[e] * score[e] * (T(1) - score[e]);
      }
    }
    if (d_z != T(0)) {
      const T lse = log_sum_exp(logits + t * experts, experts, probabilities.data());
      for (std::int64_t e = 0; e < experts; ++e) d_row[e] += d_z * lse * probabilities[e];
    }
  }
}

}  // namespace

std::vector<double> expert_bias_step(const std::vector<double>& loads, double rate) {
  const double mean =
      std::accumulate(loads.begin(), loads.end(), 0.0) / static_cast<double>(loads.size());
  std::vector<double> step(loads.size());
  for (std::size_t e = 0; e < loads.size(); ++e) {
    step[e] = loads[e] < mean ? rate : loads[e] > mean ? -rate : 0.0;
  }
  return step;
}

void route_tokens(const Tensor& logits, const MoeConfig& moe, TokenRouting& routing,
                  const Tensor* expert_bias) {
  check_logits("route_tokens", logits, moe);
  STRATA_CHECK(moe.router.expert_bias == (expert_bias != nullptr) &&
                   (expert_bias == nullptr || (expert_bias->numel() == moe.num_experts &&
                                               expert_bias->scalar_type() == logits.scalar_type())),
               "route_tokens: an expert bias {} for a router {}",
               expert_bias ? shape_to_string(expert_bias->shape()) : "absent",
               moe.router.expert_bias ? "with one" : "without one");
  const std::int64_t tokens = logits.size(0), experts = moe.num_experts;
  const std::int64_t k = moe.experts_per_token;
  routing = TokenRouting{};
  routing.tokens = tokens;
  routing.experts = experts;
  routing.top_k = k;
  routing.scores = Tensor::zeros({tokens, experts}, logits.scalar_type());
  routing.weights = Tensor::zeros({tokens, k}, logits.scalar_type());
  routing.expert.assign(static_cast<std::size_t>(tokens * k), 0);
  routing.kept.assign(static_cast<std::size_t>(tokens * k), 0);
  routing.tokens_per_expert.assign(static_cast<std::size_t>(experts), 0);
  routing.dispatched.reserve(static_cast<std::size_t>(tokens * k));
  dispatch_floating(logits.scalar_type(), "route_tokens",
                    [&]<class T>() { route<T>(logits, moe, expert_bias, routing); });
}

void route_tokens_backward(const Tensor& logits, const TokenRouting& routing, const MoeConfig& moe,
                           const Tensor& d_weights, double auxiliary_scale, Tensor& d_logits) {
  check_logits("route_tokens_backward", logits, moe);
  check_cpu_same_type("route_tokens_backward", {&logits, &routing.scores, &d_weights, &d_logits});
  STRATA_CHECK(d_weights.numel() == routing.tokens * routing.top_k &&
                   d_logits.numel() == logits.numel() && logits.size(0) == routing.tokens,
               "route_tokens_backward: {} weight gradients and {} logit gradients for {} tokens",
               d_weights.numel(), d_logits.numel(), routing.tokens);
  dispatch_floating(logits.scalar_type(), "route_tokens_backward", [&]<class T>() {
    route_backward<T>(logits, routing, moe, d_weights, auxiliary_scale, d_logits);
  });
}

}  // namespace strata::executor
