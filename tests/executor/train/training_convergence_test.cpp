// Training for real: a small GPT on a byte-level file of real English text (the GPL-3 that ships
// with every Debian system) must learn well below the uniform loss log(256) = 5.55, its loss on
// held-out text (the file's last tenth) must fall with it, and text sampled from it must be
// deterministic for a seed and read as English bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <numeric>
#include <set>
#include <vector>

#include "strata/executor/data/byte_tokenizer.h"
#include "strata/executor/generate/text_generation.h"
#include "strata/executor/train/trainer.h"
#include "strata/schemas/document_loader.h"
#include "strata/schemas/json_file.h"
#include "strata/schemas/plan_builder.h"
#include "strata/schemas/presets.h"

namespace strata::executor {
namespace {

constexpr const char* kDebianText = "/usr/share/common-licenses/GPL-3";

// The words of `text` (letters only, lower case).
std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  return words;
}

TEST(TrainingConvergence, ByteLevelGptLearnsEnglishWellBelowTheUniformLoss) {
  if (!std::filesystem::exists(kDebianText)) GTEST_SKIP() << kDebianText << " is not installed";
  const std::string text = schemas::read_text_file(kDebianText);
  const std::size_t held_out = text.size() * 9 / 10;
  const TokenFile data{kDebianText, tokenize_bytes(text.substr(0, held_out))};
  const TokenFile validation{"GPL-3 (last tenth)", tokenize_bytes(text.substr(held_out))};
  const schemas::ModelConfig model =
      schemas::load_model_file(std::string(STRATA_FIXTURES_DIR) + "/executor/gpt-micro.json");
  schemas::PlanKnobs knobs;
  knobs.seq_length = 64;
  knobs.micro_batch_size = 16;
  knobs.global_batch_size = 16;
  knobs.recompute = schemas::RecomputeGranularity::none;
  knobs.precision = schemas::Dtype::fp32;
  const schemas::Plan plan =
      schemas::build_plan(model, schemas::cluster_preset("cpu-local"), knobs, "test");
  TrainingOptions options;
  options.steps = 300;
  options.learning_rate = 3e-3;
  options.warmup_steps = 20;
  options.eval_every = 100;
  options.eval_batches = 8;
  Trainer trainer(plan, "test", data, options);
  trainer.set_validation_data(validation);
  std::vector<double> losses;
  std::vector<EvaluationRecord> evaluations;
  trainer.run([&](const StepRecord& record) { losses.push_back(record.loss); },
              [&](const EvaluationRecord& record) { evaluations.push_back(record); });
  const double first = losses.front();
  const double last_ten = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  // Measured 2.6–2.7 nats over the last steps (BENCHMARKS.md); a unigram byte model of English
  // sits near 3.0, uniform at 5.55.
  EXPECT_NEAR(first, 5.55, 0.1);
  EXPECT_LT(last_ten, 3.0);

  // Held-out text: validated at steps 0, 100, 200, 300, falling every time.
  ASSERT_EQ(evaluations.size(), 4u);
  EXPECT_NEAR(evaluations.front().loss, 5.55, 0.1);
  for (std::size_t i = 1; i < evaluations.size(); ++i) {
    EXPECT_LT(evaluations[i].loss, evaluations[i - 1].loss) << "at step " << evaluations[i].step;
  }
  EXPECT_LT(evaluations.back().loss, 3.2);

  // Sampling: the same seed, the same text; another seed, another text.
  const std::vector<std::int32_t> prompt{'T', 'h', 'e', ' '};
  const GenerationOptions sampling{.tokens = 300, .temperature = 0.6, .top_k = 0, .seed = 7};
  const std::vector<std::int32_t> sample = generate_tokens(trainer.model(), prompt, sampling);
  EXPECT_EQ(generate_tokens(trainer.model(), prompt, sampling), sample);
  // English bytes, measured over three seeds' samples: printable ASCII or white space (37% of
  // uniformly random bytes are); letters, white space and prose's punctuation (25% of random
  // bytes, 66% of random printable ones); and words of the training text's vocabulary (random
  // letters make almost none). This 0.13M-parameter model gives about 1.0, 0.97, 0.2 — its text
  // is English-like words, in capitals where the GPL's shouting sections taught it.
  std::string generated;
  for (std::uint64_t seed : {7, 8, 9}) {
    GenerationOptions options = sampling;
    options.seed = seed;
    const std::vector<std::int32_t> tokens = generate_tokens(trainer.model(), prompt, options);
    if (seed != 7) {
      EXPECT_NE(tokens, sample) << "seed " << seed << " drew seed 7's text";
    }
    for (std::int32_t token : tokens) generated.push_back(static_cast<char>(token));
    generated.push_back(' ');
  }
  const auto share = [&](auto&& counts) {
    return static_cast<double>(std::count_if(generated.begin(), generated.end(), counts)) /
           static_cast<double>(generated.size());
  };
  EXPECT_GE(share([](char c) {
              const auto byte = static_cast<unsigned char>(c);
              return byte < 128 && (std::isprint(byte) || std::isspace(byte));
            }),
            0.98)
      << generated;
  EXPECT_GE(share([](char c) {
              const auto byte = static_cast<unsigned char>(c);
              return std::isalpha(byte) || std::isspace(byte) ||
                     std::string_view(",.;:'\"()-").find(c) != std::string_view::npos;
            }),
            0.9)
      << generated;
  const std::vector<std::string> training_words = words_of(text.substr(0, held_out));
  const std::set<std::string> vocabulary(training_words.begin(), training_words.end());
  const std::vector<std::string> sampled_words = words_of(generated);
  ASSERT_GT(sampled_words.size(), 50u) << generated;
  const auto known = std::count_if(sampled_words.begin(), sampled_words.end(),
                                   [&](const std::string& word) { return vocabulary.count(word); });
  EXPECT_GE(static_cast<double>(known) / static_cast<double>(sampled_words.size()), 0.1)
      << generated;
}

}  // namespace
}  // namespace strata::executor
