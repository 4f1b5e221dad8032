// `strata sample (--checkpoint DIR | --init-llmc FILE)`: text from a trained model, as llm.c
// prints after training. A text prompt is read as bytes (the byte tokenizer of `strata data
// --text`); token ids come with --prompt-tokens, and an llm.c tokenizer file (--tokenizer)
// decodes GPT-2 tokens — it has no merge rules, so it cannot encode a text prompt; without a
// prompt it starts from its <|endoftext|>, as llm.c does.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_checks.h"
#include "commands.h"
#include "strata/executor/checkpoint/checkpoint.h"
#include "strata/executor/checkpoint/checkpoint_directory.h"
#include "strata/executor/checkpoint/llmc_checkpoint.h"
#include "strata/executor/data/byte_tokenizer.h"
#include "strata/executor/data/llmc_tokenizer.h"
#include "strata/executor/generate/text_generation.h"
#include "strata/schemas/input_error.h"

namespace strata::tools {
namespace {

constexpr std::int64_t kMostNewTokens = 1'000'000;

std::vector<std::int32_t> parse_token_ids(const std::string& text) {
  std::vector<std::int32_t> tokens;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string_view piece(text.data() + begin, end - begin);
    std::int32_t token = -1;
    const auto [stop, error] = std::from_chars(piece.data(), piece.data() + piece.size(), token);
    if (piece.empty() || stop != piece.data() + piece.size() || error != std::errc() || token < 0) {
      throw schemas::InputError(
          "--prompt-tokens", "",
          fmt::format("\"{}\" is not a token id (give ids like 50256,464,3290)",
                      shorten_value(std::string(piece))));
    }
    tokens.push_back(token);
    begin = end + 1;
  }
  return tokens;
}

// What the text output shows of a decoded piece: as llm.c's safe_printf, a lone byte that is
// neither printable nor white space (a control code) is left out.
std::string printable(const std::string& piece) {
  if (piece.size() == 1) {
    const auto byte = static_cast<unsigned char>(piece[0]);
    if (!std::isprint(byte) && !std::isspace(byte)) return {};
  }
  return piece;
}

// The model a sample is drawn from, with its weights.
struct LoadedModel {
  schemas::ModelConfig config;
  std::unique_ptr<executor::Transformer> transformer;
  std::string source;
};

LoadedModel load_model(const SampleOptions& options) {
  LoadedModel loaded;
  executor::TransformerOptions no_initialisation;
  no_initialisation.initialize_values = false;  // every value is read next
  if (options.init_llmc) {
    loaded.source = *options.init_llmc;
    loaded.config = executor::read_llmc_model_config(*options.init_llmc);
    loaded.transformer = std::make_unique<executor::Transformer>(
        loaded.config, executor::ScalarType::float32, 0, executor::Device::cpu, no_initialisation);
    executor::read_llmc_parameters(*options.init_llmc, loaded.config,
                                   loaded.transformer->parameters());
    return loaded;
  }
  std::filesystem::path checkpoint = *options.checkpoint;
  if (!std::filesystem::exists(checkpoint / "state.json")) {
    // A --checkpoint-dir: its newest complete checkpoint.
    if (!std::filesystem::is_directory(checkpoint)) {
      throw schemas::InputError(checkpoint.string(), "", "no such checkpoint directory");
    }
    const auto latest = executor::latest_checkpoint(checkpoint);
    if (!latest) throw schemas::InputError(checkpoint.string(), "", "holds no checkpoint");
    checkpoint = *latest;
  }
  loaded.source = checkpoint.string();
  loaded.config = executor::read_checkpoint_model(checkpoint);
  loaded.transformer = std::make_unique<executor::Transformer>(
      loaded.config, executor::ScalarType::float32, 0, executor::Device::cpu, no_initialisation);
  executor::read_checkpoint_values(checkpoint, loaded.config, loaded.transformer->parameters());
  return loaded;
}

}  // namespace

CLI::App* add_sample_command(CLI::App& app, SampleOptions& options) {
  CLI::App* command = app.add_subcommand(
      "sample", "Generate text from a checkpoint or an llm.c model file (on the CPU)");
  CLI::Option* checkpoint = command->add_option(
      "--checkpoint", options.checkpoint,
      "A checkpoint (DIR/step_N) or a --checkpoint-dir (its newest checkpoint)");
  command->add_option("--init-llmc", options.init_llmc, "An llm.c GPT-2 model file")
      ->excludes(checkpoint);
  CLI::Option* prompt =
      command->add_option("--prompt", options.prompt, "Text to continue, read as bytes");
  command
      ->add_option("--prompt-tokens", options.prompt_tokens,
                   "Token ids to continue, comma-separated (default with --tokenizer: its "
                   "<|endoftext|>)")
      ->excludes(prompt);
  command->add_option("--tokenizer", options.tokenizer,
                      "llm.c's gpt2_tokenizer.bin: print GPT-2 tokens as text (else ids)");
  command->add_option("--tokens", options.tokens, "New tokens to generate")
      ->check(whole_number_from(1, kMostNewTokens))
      ->capture_default_str();
  command
      ->add_option("--temperature", options.temperature,
                   "Softmax temperature (0: always the most likely token)")
      ->check(number_from(0, 100))
      ->capture_default_str();
  command->add_option("--top-k", options.top_k, "Draw from the K most likely tokens (0: all)")
      ->check(whole_number_from(0, std::int64_t{1} << 24))
      ->capture_default_str();
  command->add_option("--seed", options.seed, "Seed of the draws")
      ->check(seed_value())
      ->capture_default_str();
  command
      ->add_option_function<std::string>(
          "--log-format",
          [&options](const std::string& name) {
            options.log_format = name == "json" ? LogFormat::json : LogFormat::text;
          },
          "text (default: the text as it is drawn) or json (one object at the end)")
      ->check(CLI::IsMember({"text", "json"}))
      ->option_text("text|json");
  return command;
}

int run_sample(const SampleOptions& options) {
  if (!options.checkpoint && !options.init_llmc) {
    throw schemas::InputError("command line", "", "give --checkpoint DIR or --init-llmc FILE");
  }
  if (options.prompt && options.tokenizer) {
    throw schemas::InputError("--prompt", "",
                              "llm.c's tokenizer file only decodes (it holds no merge rules): "
                              "give the prompt as --prompt-tokens");
  }
  std::optional<executor::LlmcTokenizer> tokenizer;
  if (options.tokenizer) tokenizer = executor::read_llmc_tokenizer(*options.tokenizer);
  LoadedModel model = load_model(options);
  const std::int64_t vocab = model.config.vocab_size;
  if (tokenizer && static_cast<std::int64_t>(tokenizer->pieces.size()) < vocab) {
    throw schemas::InputError(*options.tokenizer, "header[2] (vocab_size)",
                              fmt::format("{} tokens, fewer than the model's vocabulary of {}",
                                          tokenizer->pieces.size(), vocab));
  }
  std::vector<std::int32_t> prompt;
  if (options.prompt) {
    for (std::uint16_t byte : executor::tokenize_bytes(*options.prompt)) prompt.push_back(byte);
  } else if (options.prompt_tokens) {
    prompt = parse_token_ids(*options.prompt_tokens);
  } else if (tokenizer) {
    prompt.push_back(tokenizer->end_of_text);
  } else {
    throw schemas::InputError("command line", "",
                              "give --prompt TEXT or --prompt-tokens IDS (or --tokenizer FILE to "
                              "start from its <|endoftext|>)");
  }
  if (prompt.empty()) throw schemas::InputError("--prompt", "", "is empty");
  for (std::int32_t token : prompt) {
    if (token >= vocab) {
      throw schemas::InputError(
          options.prompt ? "--prompt" : "--prompt-tokens", "",
          fmt::format("token {} is outside {}'s vocabulary of {}{}", token, model.config.name,
                      vocab, options.prompt ? " (a text prompt is read as bytes)" : ""));
    }
  }
  // How a token reads: the tokenizer's piece; a byte after a text prompt (⟨id⟩ for an id
  // past the bytes); else its id, space-separated.
  const bool as_bytes = options.prompt.has_value();
  const auto piece_of = [&](std::int32_t token) -> std::string {
    if (tokenizer) return tokenizer->pieces[static_cast<std::size_t>(token)];
    if (!as_bytes) return fmt::format(" {}", token);
    if (token < executor::kByteVocabularySize) return std::string(1, static_cast<char>(token));
    return fmt::format("⟨{}⟩", token);
  };
  const bool text = options.log_format == LogFormat::text;
  if (text) {
    for (std::int32_t token : prompt) fmt::print("{}", printable(piece_of(token)));
    std::fflush(stdout);
  }
  const executor::GenerationOptions generation{options.tokens, options.temperature, options.top_k,
                                               options.seed};
  const auto start = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> generated =
      executor::generate_tokens(*model.transformer, prompt, generation, [&](std::int32_t token) {
        if (!text) return;
        fmt::print("{}", printable(piece_of(token)));
        std::fflush(stdout);
      });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (text) {
    fmt::print("\n");
    return 0;
  }
  nlohmann::json line{{"model", model.config.name},
                      {"source", model.source},
                      {"prompt_tokens", prompt},
                      {"tokens", generated},
                      {"temperature", options.temperature},
                      {"top_k", options.top_k},
                      {"seed", options.seed},
                      {"seconds", seconds},
                      {"tokens_per_s", static_cast<double>(generated.size()) / seconds}};
  if (tokenizer || as_bytes) {
    std::string decoded;
    for (std::int32_t token : generated) decoded += piece_of(token);
    line["text"] = decoded;
  }
  // Generated bytes need not be UTF-8: invalid sequences are written as U+FFFD.
  std::cout << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
  return 0;
}

}  // namespace strata::tools
