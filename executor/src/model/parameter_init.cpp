#include "strata/executor/model/parameter_init.h"

#include <algorithm>

#include "strata/executor/random/counter_random.h"
#include "strata/executor/tensor/bfloat16.h"

namespace strata::executor {

double initial_value(const InitRule& rule, std::uint64_t seed, std::string_view name,
                     std::uint64_t global_index) {
  switch (rule.kind) {
    case InitKind::zeros:
      return 0.0;
    case InitKind::ones:
      return 1.0;
    case InitKind::normal:
      return rule.std * random_normal(RandomStream{seed, stream_of_name(name)}, global_index);
  }
  return 0.0;
}

void initialize_elements(Tensor& shard, const InitRule& rule, std::uint64_t seed,
                         std::string_view name, std::uint64_t first_global_index) {
  STRATA_CHECK(shard.device() == Device::cpu, "parameter {} is initialised in host memory", name);
  STRATA_CHECK(shard.scalar_type() != ScalarType::int32, "parameter {} cannot be int32", name);
  const RandomStream stream{seed, stream_of_name(name)};  // hashed once, not per element
  // Every element is a pure function of its index: threads split them with the same result.
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < shard.numel(); ++i) {
    const std::uint64_t index = first_global_index + static_cast<std::uint64_t>(i);
    const double value = rule.kind == InitKind::normal ? rule.std * random_normal(stream, index)
                                                       : initial_value(rule, seed, name, index);
    switch (shard.scalar_type()) {
      case ScalarType::float32:
        shard.data<float>()[i] = static_cast<float>(value);
        break;
      case ScalarType::float64:
        shard.data<double>()[i] = value;
        break;
      case ScalarType::bfloat16:
        shard.data<BFloat16>()[i] = float_to_bfloat16(static_cast<float>(value));
        break;
      case ScalarType::int32:  // refused above; a throw inside the parallel loop would abort
        break;
    }
  }
}

void initialize_slice(Tensor& destination, std::int64_t destination_offset,
                      const ParameterEntry& entry, std::int64_t first, std::int64_t last,
                      std::uint64_t seed) {
  for (const ElementRun& run : entry.runs) {
    const std::int64_t begin = std::max(first, run.local_offset);
    const std::int64_t end = std::min(last, run.local_offset + run.length);
    if (begin >= end) continue;
    Tensor part = destination.view(destination_offset + (begin - first), {end - begin});
    initialize_elements(part, entry.spec.init, seed, entry.spec.name,
                        static_cast<std::uint64_t>(run.global_offset + (begin - run.local_offset)));
  }
}

}  // namespace strata::executor
