#include "checkpoint_files.h"

#include <fmt/format.h>

#include <boost/crc.hpp>

#include "strata/schemas/input_error.h"
#include "strata/schemas/json_file.h"

namespace strata::executor {

namespace fs = std::filesystem;
using nlohmann::json;

Tensor on_host(const Tensor& tensor) {
  return tensor.device() == Device::cpu ? tensor : tensor.to(Device::cpu);
}

std::string crc32_hex(const void* data, std::size_t bytes) {
  boost::crc_32_type crc;
  crc.process_bytes(data, bytes);
  return fmt::format("{:08x}", crc.checksum());
}

json write_tensor_file(const fs::path& path, const std::vector<const Tensor*>& tensors) {
  std::string contents;
  for (const Tensor* tensor : tensors) {
    contents.append(static_cast<const char*>(tensor->raw()), tensor->bytes());
  }
  schemas::write_file_atomically(path, contents);
  return json{{"bytes", contents.size()}, {"crc32", crc32_hex(contents.data(), contents.size())}};
}

std::string read_checked_file(const fs::path& checkpoint, const json& state,
                              const std::string& name) {
  const fs::path path = checkpoint / name;
  const std::string source = path.string();
  if (!fs::exists(path)) throw schemas::InputError(source, "", "missing from the checkpoint");
  const json& entry = state.at("files").at(name);
  const std::size_t expected_bytes = entry.at("bytes").get<std::size_t>();
  const std::size_t actual_bytes = fs::file_size(path);
  if (actual_bytes != expected_bytes) {
    throw schemas::InputError(source, "",
                              fmt::format("{} bytes, state.json says {} (truncated or replaced)",
                                          actual_bytes, expected_bytes));
  }
  std::string contents = schemas::read_text_file(path);
  const std::string crc = crc32_hex(contents.data(), contents.size());
  if (crc != entry.at("crc32").get<std::string>()) {
    throw schemas::InputError(source, "",
                              fmt::format("CRC-32 {} differs from state.json's {} (corrupted)", crc,
                                          entry.at("crc32").get<std::string>()));
  }
  return contents;
}

void read_tensor_file(const fs::path& checkpoint, const json& state, const std::string& name,
                      const std::vector<Tensor*>& tensors) {
  std::string contents = read_checked_file(checkpoint, state, name);
  std::size_t wanted_bytes = 0;
  for (const Tensor* tensor : tensors) wanted_bytes += tensor->bytes();
  if (contents.size() != wanted_bytes) {
    throw schemas::InputError(
        (checkpoint / name).string(), "",
        fmt::format("{} bytes, the model's parameters need {}", contents.size(), wanted_bytes));
  }
  std::size_t offset = 0;
  for (Tensor* tensor : tensors) {
    const Tensor bytes = Tensor::borrow(contents.data() + offset, tensor->shape(),
                                        tensor->scalar_type(), Device::cpu);
    tensor->copy_from(bytes);
    offset += tensor->bytes();
  }
}

}  // namespace strata::executor
