// Exports one reference case for torch_reference.py: a model's initial weights, one batch, the
// loss and every gradient Strata computes for it, and the losses of 10 AdamW steps on that batch
// (with warm-up, cosine decay and clipping). Usage:
//   export_reference_case MODEL OUT_DIR      (MODEL: a preset name or a model file)
#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/executor/model/transformer.h"
#include "strata/executor/ops/top_k_router.h"
#include "strata/executor/optim/learning_rate_schedule.h"
#include "strata/executor/optim/optimizer_step.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/model_config.h"

using namespace strata;
using namespace strata::executor;

namespace {

constexpr std::int64_t kBatch = 2;
constexpr std::int64_t kSeq = 64;
constexpr int kSteps = 10;
constexpr std::uint64_t kSeed = 2024;

std::string raw_bytes(const Tensor& tensor) {
  return std::string(static_cast<const char*>(tensor.raw()), tensor.bytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: export_reference_case MODEL OUT_DIR\n");
    return 2;
  }
  const schemas::ModelConfig model = schemas::resolve_model(argv[1]);
  const std::filesystem::path out = argv[2];
  std::filesystem::create_directories(out);
  Transformer transformer(model, ScalarType::float32, kSeed);
  ParameterStore& parameters = transformer.parameters();

  // A deterministic batch that uses the whole vocabulary. With multi-token prediction it is shaped
  // as a language model's data is — each sequence's targets are its inputs one token on, then one
  // more — because the executor reads the tokens further ahead from the targets and PyTorch from
  // the inputs; without it the targets are a sequence of their own.
  Tensor inputs = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
  Tensor targets = Tensor::zeros({kBatch, kSeq}, ScalarType::int32);
  const auto token = [&](std::int64_t i, std::int64_t stride, std::int64_t offset) {
    return static_cast<std::int32_t>((i * stride + offset) % model.vocab_size);
  };
  std::vector<int> input_list, target_list;
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t t = 0; t < kSeq; ++t) {
      const std::int64_t i = b * kSeq + t;
      if (model.mtp) {
        inputs.data<std::int32_t>()[i] = token(b * (kSeq + 1) + t, 37, 11);
        targets.data<std::int32_t>()[i] = token(b * (kSeq + 1) + t + 1, 37, 11);
      } else {
        inputs.data<std::int32_t>()[i] = token(i, 37, 11);
        targets.data<std::int32_t>()[i] = token(i, 53, 5);
      }
      input_list.push_back(inputs.data<std::int32_t>()[i]);
      target_list.push_back(targets.data<std::int32_t>()[i]);
    }
  }
  schemas::write_file_atomically(out / "weights.bin", raw_bytes(parameters.values()));

  const double loss_scale = 1.0 / static_cast<double>(kBatch * kSeq);
  const DropoutContext no_dropout{};
  parameters.zero_gradients();
  const double loss = transformer.forward_backward(inputs, targets, loss_scale, no_dropout);
  schemas::write_file_atomically(out / "gradients.bin", raw_bytes(parameters.gradients()));
  transformer.take_expert_bias_loads();  // the steps below count their own choices

  // 10 optimizer steps on the same batch: losses before each update.
  const AdamWConfig adamw{.beta1 = 0.9, .beta2 = 0.95, .epsilon = 1e-8, .weight_decay = 0.1};
  const LearningRateSchedule schedule{
      .peak = 1e-3, .minimum = 1e-4, .warmup_steps = 2, .total_steps = kSteps};
  constexpr double kMaxNorm = 1.0;
  OptimizerMoments moments = OptimizerMoments::zeros_like(parameters);
  std::vector<double> losses, norms;
  for (int step = 0; step < kSteps; ++step) {
    parameters.zero_gradients();
    losses.push_back(transformer.forward_backward(inputs, targets, loss_scale, no_dropout));
    norms.push_back(optimizer_step(parameters, moments, schedule.at(step), step, adamw, kMaxNorm));
    // Auxiliary-loss-free balancing after the update, as the trainer's pipeline runtime does it.
    for (Transformer::ExpertBiasLoads& layer : transformer.take_expert_bias_loads()) {
      const std::vector<double> delta =
          expert_bias_step(layer.loads, model.moe->router.expert_bias_update_rate);
      float* bias = layer.bias->value.data<float>();
      for (std::size_t e = 0; e < delta.size(); ++e) bias[e] += static_cast<float>(delta[e]);
    }
  }

  nlohmann::json layout = nlohmann::json::array();
  for (const ParameterEntry& entry : parameters.entries()) {
    layout.push_back({{"name", entry.spec.name},
                      {"shape", entry.spec.shape},
                      {"offset", entry.offset},
                      {"weight_decay", entry.spec.weight_decay}});
  }
  const nlohmann::json document{
      {"model", schemas::model_to_json(model)},
      {"parameters", layout},
      {"batch", {{"inputs", input_list}, {"targets", target_list}, {"shape", {kBatch, kSeq}}}},
      {"loss", loss},
      {"optimizer",
       {{"beta1", adamw.beta1},
        {"beta2", adamw.beta2},
        {"epsilon", adamw.epsilon},
        {"weight_decay", adamw.weight_decay},
        {"peak_lr", schedule.peak},
        {"min_lr", schedule.minimum},
        {"warmup_steps", schedule.warmup_steps},
        {"total_steps", schedule.total_steps},
        {"max_grad_norm", kMaxNorm}}},
      {"adamw_losses", losses},
      {"adamw_gradient_norms", norms}};
  schemas::write_file_atomically(out / "case.json", document.dump(1) + "\n");
  fmt::print("exported {} ({} parameters) to {}\n", model.name, parameters.total_elements(),
             out.string());
  return 0;
}
