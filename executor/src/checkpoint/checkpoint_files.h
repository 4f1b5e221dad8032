// The binary files of a checkpoint: tensors written back to back in host byte order, and read
// back only after the file's size and CRC-32 match the entry state.json lists for it. Private to
// checkpoint/: every reader and writer of checkpoint files goes through these four functions.
#pragma once

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// The tensor in host memory: itself, or a copy of a device tensor (checkpoints hold host bytes,
// so a GPU run's checkpoint resumes on the CPU and back).
Tensor on_host(const Tensor& tensor);

// The CRC-32 of `bytes` bytes as state.json writes it: 8 lower-case hex digits.
std::string crc32_hex(const void* data, std::size_t bytes);

// Writes the host tensors one after another to `path` atomically; returns the file's entry in
// state.json's "files": {"bytes", "crc32"}.
nlohmann::json write_tensor_file(const std::filesystem::path& path,
                                 const std::vector<const Tensor*>& tensors);

// The contents of `checkpoint`/`name` after checking that it exists and that its size and CRC-32
// are the ones state.json's files/`name` lists (schemas::InputError naming the file otherwise).
std::string read_checked_file(const std::filesystem::path& checkpoint, const nlohmann::json& state,
                              const std::string& name);

// Reads `checkpoint`/`name` into `tensors`, in order, after read_checked_file's checks; the file
// must fill the tensors exactly.
void read_tensor_file(const std::filesystem::path& checkpoint, const nlohmann::json& state,
                      const std::string& name, const std::vector<Tensor*>& tensors);

}  // namespace strata::executor
