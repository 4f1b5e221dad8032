// ScalarType and Device: what a tensor's elements are and where they live. Plain enums with no
// other dependency, so that the CUDA launchers (compiled by nvcc) share them with the host code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::executor {

// float64 exists for the finite-difference tests of every op; CPU training is float32. bfloat16
// is the CUDA backend's activation and working-weight type (with float32 master weights and
// gradients); the CPU ops refuse it.
enum class ScalarType { float32, float64, int32, bfloat16 };
// Where storage lives: host memory, or the current CUDA device (when the CUDA backend is built).
enum class Device { cpu, cuda };

constexpr std::size_t scalar_bytes(ScalarType type) {
  switch (type) {
    case ScalarType::float32:
    case ScalarType::int32:
      return 4;
    case ScalarType::float64:
      return 8;
    case ScalarType::bfloat16:
      return 2;
  }
  return 0;
}

constexpr const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::float32:
      return "float32";
    case ScalarType::float64:
      return "float64";
    case ScalarType::int32:
      return "int32";
    case ScalarType::bfloat16:
      return "bfloat16";
  }
  return "?";
}

constexpr const char* device_name(Device device) { return device == Device::cuda ? "cuda" : "cpu"; }

}  // namespace strata::executor
