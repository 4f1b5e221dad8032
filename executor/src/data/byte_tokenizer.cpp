#include "strata/executor/data/byte_tokenizer.h"

#include "strata/executor/check.h"

namespace strata::executor {

std::vector<std::uint16_t> tokenize_bytes(std::string_view text) {
  std::vector<std::uint16_t> tokens;
  tokens.reserve(text.size());
  for (char byte : text) tokens.push_back(static_cast<unsigned char>(byte));
  return tokens;
}

std::string detokenize_bytes(const std::vector<std::uint16_t>& tokens) {
  std::string text;
  text.reserve(tokens.size());
  for (std::uint16_t token : tokens) {
    STRATA_CHECK(token < kByteVocabularySize, "token {} is not a byte", token);
    text.push_back(static_cast<char>(token));
  }
  return text;
}

}  // namespace strata::executor
