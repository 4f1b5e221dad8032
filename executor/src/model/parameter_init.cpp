#include "strata/executor/model/parameter_init.h"

#include <algorithm>
#include <array>

#include "strata/executor/random/counter_random.h"
#include "strata/executor/tensor/bfloat16.h"

namespace strata::executor {

void initialize_elements(Tensor& shard, const InitRule& rule, std::uint64_t seed,
                         std::string_view name, std::uint64_t first_global_index) {
  STRATA_CHECK(shard.device() == Device::cpu, "parameter {} is initialised in host memory", name);
  STRATA_CHECK(shard.scalar_type() != ScalarType::int32, "parameter {} cannot be int32", name);
  const RandomStream stream{seed, stream_of_name(name)};  // hashed once, not per element
  const std::int64_t count = shard.numel();
  if (count == 0) return;
  // Every element is a pure function of its index: threads take whole generator blocks (aligned
  // to the parameter's global indices, so no block is drawn twice) with the same result.
  const auto first_block = static_cast<std::int64_t>(first_global_index / kNormalBlock);
  const auto last_block = static_cast<std::int64_t>(
      (first_global_index + static_cast<std::uint64_t>(count) - 1) / kNormalBlock);
  const auto scale = static_cast<float>(rule.std);
#pragma omp parallel for schedule(static)
  for (std::int64_t block = first_block; block <= last_block; ++block) {
    std::array<float, kNormalBlock> values;
    const std::int64_t block_begin = block * kNormalBlock;
    // This block's part of the shard, in the shard's and in the block's positions.
    const std::int64_t begin =
        std::max<std::int64_t>(block_begin, static_cast<std::int64_t>(first_global_index));
    const std::int64_t end = std::min<std::int64_t>(
        block_begin + kNormalBlock, static_cast<std::int64_t>(first_global_index) + count);
    const std::int64_t length = end - begin;
    const std::int64_t shard_offset = begin - static_cast<std::int64_t>(first_global_index);
    float* drawn = values.data() + (begin - block_begin);
    switch (rule.kind) {
      case InitKind::normal:
        random_normal_block(stream, static_cast<std::uint64_t>(block), values.data());
        for (std::int64_t i = 0; i < length; ++i) drawn[i] *= scale;
        break;
      case InitKind::zeros:
      case InitKind::ones:
        std::fill_n(drawn, length, rule.kind == InitKind::ones ? 1.0f : 0.0f);
        break;
    }
    switch (shard.scalar_type()) {
      case ScalarType::float32:
        std::copy_n(drawn, length, shard.data<float>() + shard_offset);
        break;
      case ScalarType::float64:
        std::copy_n(drawn, length, shard.data<double>() + shard_offset);
        break;
      case ScalarType::bfloat16:
        for (std::int64_t i = 0; i < length; ++i) {
          shard.data<BFloat16>()[shard_offset + i] = float_to_bfloat16(drawn[i]);
        }
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
