// Dispatch from a tensor's scalar type and device to an op's templated implementation, and the
// argument checks every op shares. Used by the op files in executor/src/ops/.
//
// Each op's public function is the seam between backends: when its tensors are on the GPU it
// checks them and calls the op's CUDA launcher (declared in src/ops/cuda/<op>.cuh, plain
// pointers and sizes), inside `if constexpr (kCudaBackendBuilt)` so that a CPU-only build never
// references one; otherwise it runs the CPU implementation beside it.
#pragma once

#include <initializer_list>

#include "strata/executor/cuda/cuda_device.h"
#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// Runs fn.template operator()<T>() for T = float or double; other types are a caller's bug.
template <class Function>
decltype(auto) dispatch_floating(ScalarType type, const char* op, Function&& function) {
  switch (type) {
    case ScalarType::float32:
      return function.template operator()<float>();
    case ScalarType::float64:
      return function.template operator()<double>();
    case ScalarType::int32:
    case ScalarType::bfloat16:  // the CUDA backend's type; CPU ops compute in float32/float64
      break;
  }
  STRATA_CHECK(false, "{} needs float32 or float64 tensors on the CPU, got {}", op,
               scalar_type_name(type));
  return function.template operator()<float>();
}

// Every tensor on the CPU with the first one's floating type. The CUDA backend adds its branch
// where this check is called.
inline void check_cpu_same_type(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = *tensors.begin();
  for (const Tensor* tensor : tensors) {
    if (tensor == nullptr) continue;
    STRATA_CHECK(tensor->device() == Device::cpu, "{}: only the CPU backend is built", op);
    STRATA_CHECK(tensor->scalar_type() == first->scalar_type(), "{}: mixes {} and {}", op,
                 scalar_type_name(first->scalar_type()), scalar_type_name(tensor->scalar_type()));
  }
}

// True when the op's tensors are on the GPU, false when they are in host memory; a mixture is a
// caller's bug. Null entries (absent biases) are skipped.
inline bool on_cuda(const char* op, std::initializer_list<const Tensor*> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor* tensor : tensors) {
    if (tensor == nullptr) continue;
    if (first == nullptr) first = tensor;
    STRATA_CHECK(tensor->device() == first->device(), "{}: mixes {} and {} tensors", op,
                 device_name(first->device()), device_name(tensor->device()));
  }
  return first != nullptr && first->device() == Device::cuda;
}

// The CUDA backend's types: activations and working weights are float32 or bfloat16, all of one
// type; statistics (norm means, log-sum-exps, losses) and parameter gradients are float32 — the
// fp32 master-gradient accumulation of mixed-precision training. Returns the activation type.
inline ScalarType check_cuda_types(const char* op, std::initializer_list<const Tensor*> activations,
                                   std::initializer_list<const Tensor*> float32_tensors) {
  const ScalarType type = (*activations.begin())->scalar_type();
  STRATA_CHECK(type == ScalarType::float32 || type == ScalarType::bfloat16,
               "{}: the CUDA backend computes in float32 or bfloat16, not {}", op,
               scalar_type_name(type));
  for (const Tensor* tensor : activations) {
    if (tensor == nullptr) continue;
    STRATA_CHECK(tensor->scalar_type() == type, "{}: mixes {} and {}", op, scalar_type_name(type),
                 scalar_type_name(tensor->scalar_type()));
  }
  for (const Tensor* tensor : float32_tensors) {
    if (tensor == nullptr) continue;
    STRATA_CHECK(tensor->scalar_type() == ScalarType::float32, "{}: {} {} must be float32", op,
                 scalar_type_name(tensor->scalar_type()), shape_to_string(tensor->shape()));
  }
  return type;
}

inline void check_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.numel() == b.numel(), "{}: {} and {} differ in size", op,
               shape_to_string(a.shape()), shape_to_string(b.shape()));
}

}  // namespace strata::executor
