#include "strata/executor/ops/embedding.h"

#include "cuda/embedding.cuh"
#include "eigen_maps.h"
#include "strata/executor/ops/dispatch.h"

namespace strata::executor {
namespace {

void check_ids(const Tensor& ids, std::int64_t vocab) {
  const std::int32_t* id = ids.data<std::int32_t>();
  for (std::int64_t n = 0; n < ids.numel(); ++n) {
    STRATA_CHECK(id[n] >= 0 && id[n] < vocab, "embedding: token {} outside vocabulary {}", id[n],
                 vocab);
  }
}

}  // namespace

void embedding_forward(const Tensor& ids, const Tensor& table, Tensor& out) {
  const std::int64_t hidden = table.size(1);
  STRATA_CHECK(out.numel() == ids.numel() * hidden, "embedding_forward: out {} for {} ids",
               shape_to_string(out.shape()), ids.numel());
  if (on_cuda("embedding_forward", {&ids, &table, &out})) {
    const ScalarType type = check_cuda_types("embedding_forward", {&table, &out}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_embedding_forward(ids.data<std::int32_t>(), table.raw(), out.raw(), ids.numel(),
                                     hidden, table.size(0), type);
    }
    return;
  }
  check_cpu_same_type("embedding_forward", {&table, &out});
  check_ids(ids, table.size(0));
  dispatch_floating(table.scalar_type(), "embedding_forward", [&]<class T>() {
    const auto rows = cpu::as_matrix<T>(table, hidden);
    auto out_rows = cpu::as_matrix<T>(out, hidden);
    const std::int32_t* id = ids.data<std::int32_t>();
    for (std::int64_t n = 0; n < ids.numel(); ++n) out_rows.row(n) = rows.row(id[n]);
  });
}

void embedding_backward(const Tensor& ids, const Tensor& dout, Tensor& dtable) {
  const std::int64_t hidden = dtable.size(1);
  STRATA_CHECK(dout.numel() == ids.numel() * hidden, "embedding_backward: dout {} for {} ids",
               shape_to_string(dout.shape()), ids.numel());
  if (on_cuda("embedding_backward", {&ids, &dout, &dtable})) {
    const ScalarType type = check_cuda_types("embedding_backward", {&dout}, {&dtable});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_embedding_backward(ids.data<std::int32_t>(), dout.raw(), dtable.data<float>(),
                                      ids.numel(), hidden, dtable.size(0), type);
    }
    return;
  }
  check_cpu_same_type("embedding_backward", {&dout, &dtable});
  check_ids(ids, dtable.size(0));
  dispatch_floating(dtable.scalar_type(), "embedding_backward", [&]<class T>() {
    auto rows = cpu::as_matrix<T>(dtable, hidden);
    const auto dout_rows = cpu::as_matrix<T>(dout, hidden);
    const std::int32_t* id = ids.data<std::int32_t>();
    for (std::int64_t n = 0; n < ids.numel(); ++n) rows.row(id[n]) += dout_rows.row(n);
  });
}

void vocab_parallel_embedding_forward(const Tensor& ids, const Tensor& table_shard,
                                      std::int64_t vocab_start, Tensor& out) {
  const std::int64_t hidden = table_shard.size(1);
  STRATA_CHECK(out.numel() == ids.numel() * hidden,
               "vocab_parallel_embedding_forward: out {} for {} ids", shape_to_string(out.shape()),
               ids.numel());
  if (on_cuda("vocab_parallel_embedding_forward", {&ids, &table_shard, &out})) {
    const ScalarType type =
        check_cuda_types("vocab_parallel_embedding_forward", {&table_shard, &out}, {});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_vocab_parallel_embedding_forward(ids.data<std::int32_t>(), table_shard.raw(),
                                                    vocab_start, table_shard.size(0), out.raw(),
                                                    ids.numel(), hidden, type);
    }
    return;
  }
  check_cpu_same_type("vocab_parallel_embedding_forward", {&table_shard, &out});
  const std::int64_t rows = table_shard.size(0);
  dispatch_floating(table_shard.scalar_type(), "vocab_parallel_embedding_forward", [&]<class T>() {
    const auto table = cpu::as_matrix<T>(table_shard, hidden);
    auto out_rows = cpu::as_matrix<T>(out, hidden);
    const std::int32_t* id = ids.data<std::int32_t>();
    for (std::int64_t n = 0; n < ids.numel(); ++n) {
      const std::int64_t local = id[n] - vocab_start;
      if (local >= 0 && local < rows) {
        out_rows.row(n) = table.row(local);
      } else {
        out_rows.row(n).setZero();
      }
    }
  });
}

void vocab_parallel_embedding_backward(const Tensor& ids, const Tensor& dout,
                                       std::int64_t vocab_start, Tensor& dtable_shard) {
  const std::int64_t hidden = dtable_shard.size(1);
  STRATA_CHECK(dout.numel() == ids.numel() * hidden,
               "vocab_parallel_embedding_backward: dout {} for {} ids",
               shape_to_string(dout.shape()), ids.numel());
  if (on_cuda("vocab_parallel_embedding_backward", {&ids, &dout, &dtable_shard})) {
    const ScalarType type =
        check_cuda_types("vocab_parallel_embedding_backward", {&dout}, {&dtable_shard});
    if constexpr (kCudaBackendBuilt) {
      cuda::launch_vocab_parallel_embedding_backward(
          ids.data<std::int32_t>(), dout.raw(), dtable_shard.data<float>(), vocab_start,
          dtable_shard.size(0), ids.numel(), hidden, type);
    }
    return;
  }
  check_cpu_same_type("vocab_parallel_embedding_backward", {&dout, &dtable_shard});
  const std::int64_t rows = dtable_shard.size(0);
  dispatch_floating(dtable_shard.scalar_type(), "vocab_parallel_embedding_backward",
                    [&]<class T>() {
                      auto table = cpu::as_matrix<T>(dtable_shard, hidden);
                      const auto dout_rows = cpu::as_matrix<T>(dout, hidden);
                      const std::int32_t* id = ids.data<std::int32_t>();
                      for (std::int64_t n = 0; n < ids.numel(); ++n) {
                        const std::int64_t local = id[n] - vocab_start;
                        if (local >= 0 && local < rows) table.row(local) += dout_rows.row(n);
                      }
                    });
}

}  // namespace strata::executor
