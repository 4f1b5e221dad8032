// `strata data`: makes a token file in llm.c's format from any text with the byte-level
// tokenizer (vocabulary 256), for gpt-tiny, llama-tiny or any model with a vocabulary ≥ 256.
#include <fmt/format.h>

#include "commands.h"
#include "strata/executor/data/byte_tokenizer.h"
#include "strata/executor/data/token_file.h"
#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::tools {

CLI::App* add_data_command(CLI::App& app, DataOptions& options) {
  CLI::App* command = app.add_subcommand(
      "data", "Tokenize a text file byte by byte (vocabulary 256) into an llm.c token file");
  command->add_option("--text", options.text_path, "Text file to tokenize")->required();
  command->add_option("--out", options.out_path, "Token file to write (llm.c format)")->required();
  return command;
}

int run_data(const DataOptions& options) {
  const std::string text = schemas::read_text_file(options.text_path);
  if (text.empty()) throw schemas::InputError(options.text_path, "", "the text is empty");
  const std::vector<std::uint16_t> tokens = executor::tokenize_bytes(text);
  executor::write_token_file(options.out_path, tokens);
  fmt::print("wrote {} tokens (byte-level, vocabulary {}) to {}\n", tokens.size(),
             executor::kByteVocabularySize, options.out_path);
  return 0;
}

}  // namespace strata::tools
