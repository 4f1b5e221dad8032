// The blocks of causal attention a context-parallel rank computes against one source rank's
// keys: shared by both ways cp attention gets those keys (ring_attention.h,
// all_gather_attention.h); the list itself is visible_attention_blocks (context_parallel.h).
#pragma once

#include <cstdint>

#include "strata/executor/model/context_parallel.h"
#include "strata/executor/ops/attention_block.h"

namespace strata::executor::detail {

// Calls visit(block) for every block of this rank's queries (a local sequence of local_seq
// tokens) against the keys of `source`'s chunks that the causal mask (and `shape`'s sliding
// window) lets them see.
template <class Visit>
void for_each_visible_block(const ContextParallelism& cp, const AttentionShape& shape,
                            std::int64_t local_seq, std::int64_t source, Visit&& visit) {
  for (const AttentionBlock& block :
       visible_attention_blocks(cp.size(), cp.rank(), local_seq, source, shape.window)) {
    visit(block);
  }
}

}  // namespace strata::executor::detail
