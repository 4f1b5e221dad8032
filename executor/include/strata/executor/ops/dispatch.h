// Dispatch from a tensor's scalar type and device to an op's templated implementation, and the
// argument checks every op shares. Used by the op files in executor/src/ops/.
#pragma once

#include <initializer_list>

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
      break;
  }
  STRATA_CHECK(false, "{} needs float32 or float64 tensors, got {}", op, scalar_type_name(type));
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

inline void check_same_numel(const char* op, const Tensor& a, const Tensor& b) {
  STRATA_CHECK(a.numel() == b.numel(), "{}: {} and {} differ in size", op,
               shape_to_string(a.shape()), shape_to_string(b.shape()));
}

}  // namespace strata::executor
