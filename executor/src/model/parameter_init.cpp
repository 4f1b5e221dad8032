#include "strata/executor/model/parameter_init.h"

#include "strata/executor/random/counter_random.h"

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
  const RandomStream stream{seed, stream_of_name(name)};  // hashed once, not per element
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
      case ScalarType::int32:
        STRATA_CHECK(false, "parameter {} cannot be int32", name);
    }
  }
}

}  // namespace strata::executor
