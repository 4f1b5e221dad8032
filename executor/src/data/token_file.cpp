#include "strata/executor/data/token_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/crc.hpp>
#include <cstring>
#include <fstream>
#include <string>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::executor {

std::uint16_t TokenFile::largest_token() const {
  return tokens.empty() ? 0 : *std::max_element(tokens.begin(), tokens.end());
}

std::string TokenFile::tokens_crc32() const {
  boost::crc_32_type crc;
  crc.process_bytes(tokens.data(), tokens.size() * sizeof(std::uint16_t));
  return fmt::format("{:08x}", crc.checksum());
}

TokenFile read_token_file(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream stream(path, std::ios::binary);
  if (!stream) throw schemas::InputError(source, "", "cannot open the token file");
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  stream.read(reinterpret_cast<char*>(header.data()), sizeof(header));
  if (stream.gcount() != static_cast<std::streamsize>(sizeof(header))) {
    throw schemas::InputError(
        source, "header",
        fmt::format("{} bytes, shorter than llm.c's 1024-byte header", stream.gcount()));
  }
  if (header[0] != kTokenFileMagic) {
    throw schemas::InputError(
        source, "header[0]",
        fmt::format("magic {} is not llm.c's token-file magic {}", header[0], kTokenFileMagic));
  }
  if (header[1] != kTokenFileVersion) {
    throw schemas::InputError(
        source, "header[1]",
        fmt::format("version {} (only version {}: uint16 tokens)", header[1], kTokenFileVersion));
  }
  const std::int64_t count = header[2];
  const std::uintmax_t size = std::filesystem::file_size(path);
  const std::uintmax_t expected =
      sizeof(header) + 2 * static_cast<std::uintmax_t>(std::max<std::int64_t>(count, 0));
  if (count < 0 || size != expected) {
    throw schemas::InputError(source, "header[2]",
                              fmt::format("says {} tokens ({} bytes with the header), the file has "
                                          "{} bytes",
                                          count, expected, size));
  }
  TokenFile file{path, std::vector<std::uint16_t>(static_cast<std::size_t>(count))};
  stream.read(reinterpret_cast<char*>(file.tokens.data()), static_cast<std::streamsize>(2 * count));
  if (!stream) throw schemas::InputError(source, "", "read failed");
  return file;
}

void write_token_file(const std::filesystem::path& path, std::span<const std::uint16_t> tokens) {
  if (tokens.size() > static_cast<std::size_t>(INT32_MAX)) {
    throw schemas::InputError(path.string(), "",
                              "more than 2^31 tokens do not fit llm.c's int32 token count");
  }
  std::array<std::int32_t, kTokenFileHeaderInts> header{};
  header[0] = kTokenFileMagic;
  header[1] = kTokenFileVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());
  std::string contents(sizeof(header) + 2 * tokens.size(), '\0');
  std::memcpy(contents.data(), header.data(), sizeof(header));
  std::memcpy(contents.data() + sizeof(header), tokens.data(), 2 * tokens.size());
  schemas::write_file_atomically(path, contents);
}

}  // namespace strata::executor
