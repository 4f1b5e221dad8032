#include "strata/executor/ops/convert.h"

#include "cuda/convert.cuh"
#include "strata/executor/ops/dispatch.h"
#include "strata/executor/tensor/bfloat16.h"

namespace strata::executor {
namespace {

double read_element(const Tensor& tensor, std::int64_t i) {
  switch (tensor.scalar_type()) {
    case ScalarType::float32:
      return tensor.data<float>()[i];
    case ScalarType::float64:
      return tensor.data<double>()[i];
    case ScalarType::bfloat16:
      return bfloat16_to_float(tensor.data<BFloat16>()[i]);
    case ScalarType::int32:
      break;
  }
  return 0;
}

void write_element(Tensor& tensor, std::int64_t i, double value) {
  switch (tensor.scalar_type()) {
    case ScalarType::float32:
      tensor.data<float>()[i] = static_cast<float>(value);
      return;
    case ScalarType::float64:
      tensor.data<double>()[i] = value;
      return;
    case ScalarType::bfloat16:
      tensor.data<BFloat16>()[i] = float_to_bfloat16(static_cast<float>(value));
      return;
    case ScalarType::int32:
      return;
  }
}

}  // namespace

void convert(const Tensor& source, Tensor& destination) {
  check_same_numel("convert", source, destination);
  STRATA_CHECK(
      source.scalar_type() != ScalarType::int32 && destination.scalar_type() != ScalarType::int32,
      "convert: floating types only, got {} → {}", scalar_type_name(source.scalar_type()),
      scalar_type_name(destination.scalar_type()));
  if (source.scalar_type() == destination.scalar_type()) {
    destination.copy_from(source);
    return;
  }
  if (on_cuda("convert", {&source, &destination})) {
    check_cuda_types("convert", {&source}, {});
    check_cuda_types("convert", {&destination}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_convert(source.raw(), source.scalar_type(), destination.raw(),
                           destination.scalar_type(), source.numel());
    }
    return;
  }
  for (std::int64_t i = 0; i < source.numel(); ++i) {
    write_element(destination, i, read_element(source, i));
  }
}

}  // namespace strata::executor
