// Token files in llm.c's format: a header of 256 int32 (magic 20240520, version 1, token count,
// the rest zero), then the tokens as uint16. Used by `strata data` (writing), the batch sampler
// and `strata train` (reading), and readable by llm.c's own loaders and vice versa.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace strata::executor {

inline constexpr std::int32_t kTokenFileMagic = 20240520;
inline constexpr std::int32_t kTokenFileVersion = 1;
inline constexpr std::size_t kTokenFileHeaderInts = 256;

struct TokenFile {
  std::filesystem::path path;
  std::vector<std::uint16_t> tokens;
  std::uint16_t largest_token() const;
  // The CRC-32 of the tokens (as 8 hex digits): what a checkpoint records of its data.
  std::string tokens_crc32() const;
};

// Refuses, naming the file (schemas::InputError): a missing or unreadable file, a header with
// the wrong magic or version, and a token count the file's size does not hold.
TokenFile read_token_file(const std::filesystem::path& path);
// Writes header and tokens to a temporary file, then renames it into place.
void write_token_file(const std::filesystem::path& path, std::span<const std::uint16_t> tokens);

}  // namespace strata::executor
