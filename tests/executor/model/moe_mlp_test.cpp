// The mixture-of-experts MLP: every parameter's gradient and the input's against finite
// differences of the layer (router losses included), for both MLP kinds, with and without
// capacity dropping, shared experts and their gate; and the layout of its parameters.
#include "strata/executor/model/moe_mlp.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "strata/schemas/presets.h"
#include "tensor_testing.h"
#include "threaded_communicator.h"

namespace strata::executor {
namespace {

using schemas::ModelConfig;

// A MoE layer small enough to difference every parameter: 4 experts, top 2.
ModelConfig small_moe_model(bool llama) {
  ModelConfig model = schemas::model_preset("moe-tiny");
  model.hidden_size = 8;
  model.mlp_activation = llama ? schemas::MlpActivation::swiglu : schemas::MlpActivation::gelu;
  model.mlp_bias = !llama;
  schemas::MoeConfig& moe = *model.moe;
  moe.num_experts = 4;
  moe.experts_per_token = 2;
  moe.expert_ffn_hidden_size = 6;
  moe.num_shared_experts = llama ? 1 : 2;
  moe.shared_expert_ffn_hidden_size = 4;
  moe.shared_expert_gate = !llama;
  moe.router.score_function =
      llama ? schemas::RouterScoreFunction::softmax : schemas::RouterScoreFunction::sigmoid;
  moe.router.scaling_factor = llama ? 1.0 : 2.5;
  moe.capacity_factor = llama ? std::nullopt : std::optional<double>(1.0);
  return model;
}

struct MoeCase {
  ModelConfig model;
  ParameterStore store;
  TensorParallelism tp;  // one rank
  MoeMlp mlp;
  MoeCase(ModelConfig config, std::uint32_t seed)
      : model(std::move(config)),
        store(moe_mlp_parameters(model, 1), ScalarType::float64),
        mlp(model, 1, store, tp) {
    // Weights of std 0.5, so that routing is decided and capacity binds.
    store.values().copy_from(
        testing::random_tensor(store.values().shape(), ScalarType::float64, seed, 0.5));
  }
};

TEST(MoeMlp, GradientsMatchFiniteDifferences) {
  for (bool llama : {true, false}) {
    MoeCase c(small_moe_model(llama), llama ? 11 : 12);
    constexpr std::int64_t kTokens = 10;
    constexpr double kAuxiliaryScale = 0.8;
    const std::int64_t hidden = c.model.hidden_size;
    Tensor h = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 21);
    const Tensor dy = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 22);
    Tensor y = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
    MoeActivations a;
    auto objective = [&] {
      MoeActivations scratch;
      c.mlp.forward(h, y, scratch);
      return testing::weighted_sum(y, dy) +
             kAuxiliaryScale * (scratch.routing.load_balancing_loss + scratch.routing.z_loss);
    };
    c.mlp.forward(h, y, a);
    if (!llama) {
      // The capacity (⌈1 · 10 · 2 / 4⌉ = 5 pairs per expert) must drop something here, or the
      // dropping path goes untested.
      EXPECT_LT(a.routing.dispatched_count(), kTokens * 2);
    }
    Tensor dh = testing::random_tensor(h.shape(), ScalarType::float64, 23);  // overwritten
    c.store.zero_gradients();
    c.mlp.backward(dy, h, a, kAuxiliaryScale, dh);
    testing::expect_gradient_matches(h, dh, objective, llama ? "dh (llama)" : "dh (gpt)", 1e-5);
    const Tensor analytic = c.store.gradients().to(Device::cpu);
    testing::expect_gradient_matches(c.store.values(), analytic, objective,
                                     llama ? "parameters (llama)" : "parameters (gpt)", 1e-5);
  }
}

TEST(MoeMlp, ParametersAreStackedPerExpertAndSharedExpertsSideBySide) {
  const ModelConfig model = small_moe_model(false);
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<std::string> tensor_parallel, expert_width;
  for (const ParameterSpec& spec : moe_mlp_parameters(model, 3)) {
    names.push_back(spec.name);
    shapes.push_back(spec.shape);
    tensor_parallel.push_back(spec.tensor_parallel.kind == PlacementKind::shard
                                  ? "S" + std::to_string(spec.tensor_parallel.dim)
                                  : "R");
    if (spec.expert_parallel.kind == PlacementKind::shard) {
      expert_width.push_back(spec.expert_tensor_parallel.kind == PlacementKind::shard
                                 ? "S" + std::to_string(spec.expert_tensor_parallel.dim)
                                 : "R");
    }
  }
  EXPECT_EQ(names, (std::vector<std::string>{
                       "layers.3.mlp.router.weight", "layers.3.mlp.experts.fc.weight",
                       "layers.3.mlp.experts.fc.bias", "layers.3.mlp.experts.output.weight",
                       "layers.3.mlp.experts.output.bias", "layers.3.mlp.shared.fc.weight",
                       "layers.3.mlp.shared.fc.bias", "layers.3.mlp.shared.output.weight",
                       "layers.3.mlp.shared.output.bias", "layers.3.mlp.shared_gate.weight"}));
  EXPECT_EQ(shapes[1], (Shape{4, 6, 8}));
  EXPECT_EQ(shapes[3], (Shape{4, 8, 6}));
  EXPECT_EQ(shapes[5], (Shape{8, 8}));  // 2 shared experts of width 4
  EXPECT_EQ(shapes[8], (Shape{2, 8}));  // each shared expert's own output bias
  // Over tp: the router and the routed experts whole on every rank (expert parallelism splits
  // those), the shared experts column- then row-parallel as a dense MLP, their output biases and
  // gate whole.
  EXPECT_EQ(tensor_parallel,
            (std::vector<std::string>{"R", "R", "R", "R", "R", "S0", "S0", "S1", "R", "R"}));
  // Over etp, each routed expert's width: fc rows and bias, output columns; its output bias whole.
  EXPECT_EQ(expert_width, (std::vector<std::string>{"S1", "S1", "S2", "R"}));
}

TEST(MoeMlp, AnExpertComputesOnlyTheTokensRoutedToIt) {
  // Zero one expert's output weights: the tokens it served lose exactly its weighted share.
  MoeCase c(small_moe_model(true), 31);
  constexpr std::int64_t kTokens = 10;
  const std::int64_t hidden = c.model.hidden_size;
  const Tensor h = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 32);
  Tensor before = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
  Tensor after = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
  MoeActivations a;
  c.mlp.forward(h, before, a);
  ParameterEntry& output = c.store.entry("layers.1.mlp.experts.output.weight");
  const std::int64_t per_expert = output.value.numel() / 4;
  std::fill_n(output.value.data<double>() + 2 * per_expert, per_expert, 0.0);
  MoeActivations unused;
  c.mlp.forward(h, after, unused);
  int served_tokens = 0;
  for (std::int64_t t = 0; t < kTokens; ++t) {
    const auto* chosen = a.routing.expert.data() + t * 2;
    const bool served = chosen[0] == 2 || chosen[1] == 2;
    double change = 0;
    for (std::int64_t i = 0; i < hidden; ++i) {
      change +=
          std::abs(before.data<double>()[t * hidden + i] - after.data<double>()[t * hidden + i]);
    }
    EXPECT_EQ(change > 0, served) << "token " << t;
    served_tokens += served ? 1 : 0;
  }
  EXPECT_GT(served_tokens, 0);
}

// Copies each of `to`'s slices from the whole parameters in `from` (a one-rank store of the same
// specs), through the slices' element runs.
void copy_slices(const ParameterStore& from, ParameterStore& to) {
  for (ParameterEntry& entry : to.entries()) {
    const ParameterEntry& whole = from.entry(entry.spec.name);
    for (const ElementRun& run : entry.runs) {
      std::copy_n(whole.value.data<double>() + run.global_offset, run.length,
                  entry.value.data<double>() + run.local_offset);
    }
  }
}

// Expert parallelism at the layer: each of ep · etp members routes its own tokens and holds E/ep
// experts, each of them 1/etp of its width (etp the faster axis, as in the expert mesh). Every
// member's output and input gradient must be the one-rank layer's on its tokens, its router and
// shared-expert gradients those of its tokens alone, and its part of the experts' gradients the
// one-rank gradients summed over every member's tokens (the output bias, whole on each etp
// member, too). gpt: biases, a gate and capacity dropping per member.
TEST(MoeMlp, ExpertParallelMembersComputeTheOneRankLayer) {
  for (bool llama : {true, false}) {
    for (const auto& [ep, etp] : std::vector<std::pair<int, int>>{{2, 1}, {4, 1}, {1, 2}, {2, 2}}) {
      const int members = ep * etp;
      const ModelConfig model = small_moe_model(llama);
      const std::vector<ParameterSpec> specs = moe_mlp_parameters(model, 1);
      ParameterStore whole(specs, ScalarType::float64);
      whole.values().copy_from(
          testing::random_tensor(whole.values().shape(), ScalarType::float64, 41, 0.5));
      const TensorParallelism one_rank;
      const MoeMlp reference(model, 1, whole, one_rank);
      constexpr std::int64_t kTokens = 10;
      const std::int64_t hidden = model.hidden_size;
      auto tokens_of = [&](int member) {
        return testing::random_tensor({kTokens, hidden}, ScalarType::float64, 100 + member);
      };
      auto gradient_of = [&](int member) {
        return testing::random_tensor({kTokens, hidden}, ScalarType::float64, 200 + member);
      };
      // The one-rank layer on each member's tokens: outputs, input gradients, and parameter
      // gradients per member (the experts' are summed over members below).
      std::vector<Tensor> outputs, input_gradients, parameter_gradients;
      Tensor expert_sum = Tensor::zeros(whole.gradients().shape(), ScalarType::float64);
      for (int member = 0; member < members; ++member) {
        const Tensor h = tokens_of(member);
        Tensor y = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
        Tensor dh = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
        MoeActivations a;
        reference.forward(h, y, a);
        whole.zero_gradients();
        reference.backward(gradient_of(member), h, a, 0.8, dh);
        outputs.push_back(y);
        input_gradients.push_back(dh);
        parameter_gradients.push_back(whole.gradients().to(Device::cpu));
        for (std::int64_t i = 0; i < expert_sum.numel(); ++i) {
          expert_sum.data<double>()[i] += whole.gradients().data<double>()[i];
        }
      }
      testing::run_on_threads(members, [&](Communicator& group) {
        const int member = group.rank();
        const std::unique_ptr<Communicator> width_group = group.split(member / etp, member % etp);
        const std::unique_ptr<Communicator> expert_group = group.split(member % etp, member / etp);
        StoreOptions options;
        options.expert_parallel_rank = member / etp;
        options.expert_parallel_size = ep;
        options.expert_tensor_parallel_rank = member % etp;
        options.expert_tensor_parallel_size = etp;
        ParameterStore mine(specs, ScalarType::float64, Device::cpu, std::nullopt, options);
        copy_slices(whole, mine);
        const TensorParallelism one_rank;
        const MoeMlp layer(model, 1, mine, one_rank,
                           ExpertParallelism{ep > 1 ? expert_group.get() : nullptr,
                                             etp > 1 ? width_group.get() : nullptr});
        const Tensor h = tokens_of(member);
        Tensor y = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
        Tensor dh = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
        MoeActivations a;
        layer.forward(h, y, a);
        layer.backward(gradient_of(member), h, a, 0.8, dh);
        const std::string what =
            fmt::format("{}, ep {} etp {}, member {}", llama ? "llama" : "gpt", ep, etp, member);
        EXPECT_LE(testing::max_relative_difference(y, outputs[member]), 1e-12) << what;
        EXPECT_LE(testing::max_relative_difference(dh, input_gradients[member]), 1e-12) << what;
        for (const ParameterEntry& entry : mine.entries()) {
          const bool routed = entry.spec.expert_parallel.kind == PlacementKind::shard;
          const Tensor& expected = routed ? expert_sum : parameter_gradients[member];
          const std::int64_t base = whole.entry(entry.spec.name).offset;
          for (const ElementRun& run : entry.runs) {
            for (std::int64_t i = 0; i < run.length; ++i) {
              const double want = expected.data<double>()[base + run.global_offset + i];
              const double got = entry.gradient.data<double>()[run.local_offset + i];
              ASSERT_NEAR(got, want, 1e-12 * std::max(1.0, std::abs(want)))
                  << what << ", " << entry.spec.name << " element " << run.global_offset + i;
            }
          }
        }
      });
    }
  }
}

// Tensor parallelism with sequence parallelism at the layer: each of tp members routes its own
// rows of the group's tokens (the experts whole on each member, or split over the tp pair as the
// ep group), and the shared experts are column- then row-parallel. Each member's output and input
// gradient must be the one-rank layer's on its rows; the shared experts' gradients the one-rank
// slices; the router's, the gate's and the output biases' summed over members the one-rank
// gradients (each member saw its tokens), and the routed experts' the same summed over the ranks
// holding them. The load-balancing statistic is pooled over the group, so the router's auxiliary
// gradient is the one-rank layer's. Dropless routing: a capacity counts each rank's tokens.
TEST(MoeMlp, SequenceParallelMembersComputeTheOneRankLayer) {
  for (bool llama : {true, false}) {
    for (int ep : {1, 2}) {
      constexpr int kTp = 2;
      ModelConfig model = small_moe_model(llama);
      model.moe->capacity_factor.reset();
      const std::vector<ParameterSpec> specs = moe_mlp_parameters(model, 1);
      ParameterStore whole(specs, ScalarType::float64);
      whole.values().copy_from(
          testing::random_tensor(whole.values().shape(), ScalarType::float64, 51, 0.5));
      const TensorParallelism one_rank;
      const MoeMlp reference(model, 1, whole, one_rank);
      constexpr std::int64_t kTokens = 12;
      constexpr double kAuxiliaryScale = 0.8;
      const std::int64_t hidden = model.hidden_size;
      const Tensor h = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 52);
      const Tensor dy = testing::random_tensor({kTokens, hidden}, ScalarType::float64, 53);
      Tensor y = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
      Tensor dh = Tensor::zeros({kTokens, hidden}, ScalarType::float64);
      MoeActivations a;
      reference.forward(h, y, a);
      whole.zero_gradients();
      reference.backward(dy, h, a, kAuxiliaryScale, dh);
      const std::int64_t local = kTokens / kTp;
      const auto rows_of = [&](const Tensor& t, int member) {
        return t.view(member * local * hidden, {local, hidden});
      };
      testing::run_on_threads(kTp, [&](Communicator& group) {
        const int member = group.rank();
        const TensorParallelism tp{&group, /*sequence_parallel=*/true, {}};
        StoreOptions options;
        options.tensor_parallel_rank = member;
        options.tensor_parallel_size = kTp;
        options.expert_parallel_rank = ep > 1 ? member : 0;
        options.expert_parallel_size = ep;
        ParameterStore mine(specs, ScalarType::float64, Device::cpu, std::nullopt, options);
        copy_slices(whole, mine);
        const MoeMlp layer(model, 1, mine, tp, ExpertParallelism{ep > 1 ? &group : nullptr});
        Tensor my_y = Tensor::zeros({local, hidden}, ScalarType::float64);
        Tensor my_dh = Tensor::zeros({local, hidden}, ScalarType::float64);
        MoeActivations mine_a;
        layer.forward(h, my_y, mine_a);
        mine.zero_gradients();
        // The step weighs each token alike: a member's share of the scale is its share of tokens.
        layer.backward(rows_of(dy, member), h, mine_a, kAuxiliaryScale / kTp, my_dh);
        const std::string what =
            fmt::format("{}, tp {} ep {}, member {}", llama ? "llama" : "gpt", kTp, ep, member);
        EXPECT_LE(testing::max_relative_difference(my_y, rows_of(y, member)), 1e-12) << what;
        EXPECT_LE(testing::max_relative_difference(my_dh, rows_of(dh, member)), 1e-12) << what;
        for (ParameterEntry& entry : mine.entries()) {
          const bool split = entry.spec.tensor_parallel.kind == PlacementKind::shard ||
                             (ep > 1 && entry.spec.expert_parallel.kind == PlacementKind::shard);
          if (!split) group.all_reduce(entry.gradient, ReduceOp::sum);
          const ParameterEntry& expected = whole.entry(entry.spec.name);
          for (const ElementRun& run : entry.runs) {
            for (std::int64_t i = 0; i < run.length; ++i) {
              const double want = expected.gradient.data<double>()[run.global_offset + i];
              const double got = entry.gradient.data<double>()[run.local_offset + i];
              ASSERT_NEAR(got, want, 1e-12 * std::max(1.0, std::abs(want)))
                  << what << ", " << entry.spec.name << " element " << run.global_offset + i;
            }
          }
        }
      });
    }
  }
}

}  // namespace
}  // namespace strata::executor
