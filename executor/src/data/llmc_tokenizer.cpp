#include "strata/executor/data/llmc_tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "strata/schemas/input_error.h"

namespace strata::executor {

std::string LlmcTokenizer::decode(const std::vector<std::int32_t>& tokens) const {
  std::string text;
  for (std::int32_t token : tokens) {
    if (token < 0 || static_cast<std::size_t>(token) >= pieces.size()) {
      throw schemas::InputError(
          source, "",
          fmt::format("token {} is outside its table of {} tokens", token, pieces.size()));
    }
    text += pieces[static_cast<std::size_t>(token)];
  }
  return text;
}

LlmcTokenizer read_llmc_tokenizer(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw schemas::InputError(name, "", fmt::format("cannot open: {}", std::strerror(errno)));
  std::array<std::uint32_t, 256> header{};
  file.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  if (!file) throw schemas::InputError(name, "header", "shorter than the 1024-byte header");
  if (header[0] != kLlmcTokenizerMagic) {
    throw schemas::InputError(
        name, "header[0]",
        fmt::format("magic {} is not llm.c's tokenizer magic {}", header[0], kLlmcTokenizerMagic));
  }
  if (header[1] != 1 && header[1] != 2) {
    throw schemas::InputError(name, "header[1]",
                              fmt::format("version {} (known: 1, 2)", header[1]));
  }
  constexpr std::uint32_t kMostTokens = 1u << 24;  // far above any real vocabulary
  const std::uint32_t vocab = header[2];
  if (vocab == 0 || vocab > kMostTokens) {
    throw schemas::InputError(name, "header[2] (vocab_size)",
                              fmt::format("{} is not from 1 to {}", vocab, kMostTokens));
  }
  LlmcTokenizer tokenizer;
  tokenizer.source = name;
  const std::uint32_t end_of_text = header[1] == 1 ? 50256 : header[3];
  if (end_of_text >= vocab) {
    throw schemas::InputError(
        name, header[1] == 1 ? "header[2] (vocab_size)" : "header[3] (eot)",
        fmt::format("end-of-text id {} is outside the {} tokens", end_of_text, vocab));
  }
  tokenizer.end_of_text = static_cast<std::int32_t>(end_of_text);
  tokenizer.pieces.reserve(vocab);
  for (std::uint32_t i = 0; i < vocab; ++i) {
    unsigned char length = 0;
    file.read(reinterpret_cast<char*>(&length), 1);
    std::string piece(length, '\0');
    if (file) file.read(piece.data(), length);
    if (!file) {
      throw schemas::InputError(name, fmt::format("token {}", i),
                                fmt::format("the file ends before token {} of {}", i, vocab));
    }
    if (length == 0) {
      throw schemas::InputError(name, fmt::format("token {}", i), "has no bytes");
    }
    tokenizer.pieces.push_back(std::move(piece));
  }
  return tokenizer;
}

}  // namespace strata::executor
