// llm.c's GPT-2 tokenizer file (gpt2_tokenizer.bin, written by llm.c's train_gpt2.py): the bytes of
// every token, for decoding generated token ids into text. Decoding only, as in llm.c — the file
// holds no merge rules, so text cannot be encoded with it.
//
//   header   256 × uint32: magic 20240328, version (1 or 2), vocab_size, (version 2) the
//            <|endoftext|> id; version 1 means GPT-2's 50256
//   tokens   per token: one length byte (≥ 1), then that many bytes
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace strata::executor {

inline constexpr std::uint32_t kLlmcTokenizerMagic = 20240328;

struct LlmcTokenizer {
  std::vector<std::string> pieces;  // by token id
  std::int32_t end_of_text = 0;     // <|endoftext|>, where llm.c starts unconditional generation
  std::string source;               // the file, for messages

  // The text of `tokens`, refusing an id past the table.
  std::string decode(const std::vector<std::int32_t>& tokens) const;
};

// Reads a tokenizer file, refusing (InputError naming the file and the field) a wrong magic or
// version, a zero-length token, an end-of-text id outside the table or a truncated file.
LlmcTokenizer read_llmc_tokenizer(const std::filesystem::path& path);

}  // namespace strata::executor
