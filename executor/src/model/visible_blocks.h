// The blocks of causal attention a context-parallel rank computes against one source rank's
// keys: shared by both ways cp attention gets those keys (ring_attention.h,
// all_gather_attention.h).
//
// Query chunk q meets key chunks k < q whole, k = q causally (the diagonal) and k > q not at all.
// With the load-balanced split (context_parallel.h) every rank computes the same number of blocks.
#pragma once

#include <cstdint>

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/attention_block.h"

namespace strata::executor::detail {

// Calls visit(block) for every block of this rank's queries (a local sequence of local_seq
// tokens) against the keys of `source`'s chunks that the causal mask lets them see.
template <class Visit>
void for_each_visible_block(const ContextParallelism& cp, std::int64_t local_seq,
                            std::int64_t source, Visit&& visit) {
  const std::int64_t chunk = local_seq / 2;
  for (std::int64_t query_half = 0; query_half < 2; ++query_half) {
    const std::int64_t query_chunk = cp.chunk_of(cp.rank(), query_half);
    for (std::int64_t key_half = 0; key_half < 2; ++key_half) {
      const std::int64_t key_chunk = cp.chunk_of(source, key_half);
      if (key_chunk > query_chunk) continue;
      visit(AttentionBlock{query_half * chunk, key_half * chunk, chunk,
                           key_chunk == query_chunk ? BlockMask::causal : BlockMask::full});
    }
  }
}

}  // namespace strata::executor::detail
