#include "strata/executor/model/tensor_parallel.h"

namespace strata::executor {

void gather_sequence(const TensorParallelism& tp, const Tensor& local, Tensor& full) {
  if (tp.shards_tokens()) {
    tp.group->all_gather(local, full);
  } else if (full.raw() != local.raw()) {
    full.copy_from(local);
  }
}

void reduce_sequence(const TensorParallelism& tp, Tensor& partial, Tensor& local) {
  if (tp.shards_tokens()) {
    tp.group->reduce_scatter(partial, local);
    return;
  }
  if (tp.active()) tp.group->all_reduce(partial, ReduceOp::sum);
  if (local.raw() != partial.raw()) local.copy_from(partial);
}

}  // namespace strata::executor
