// The byte-level tokenizer: one token per byte, vocabulary 256. Used by `strata data --text` to
// make small data sets from any text, for models with vocab_size ≥ 256 (gpt-tiny, llama-tiny).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::executor {

inline constexpr std::int64_t kByteVocabularySize = 256;

std::vector<std::uint16_t> tokenize_bytes(std::string_view text);
std::string detokenize_bytes(const std::vector<std::uint16_t>& tokens);

}  // namespace strata::executor
