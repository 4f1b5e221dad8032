// Collectives of numbers and small records, typed: what ranks tell each other about a step (a
// loss, the slowest time), a checkpoint (which files each wrote, their sizes and CRCs) or a trace
// (the actions each ran) travels as the C++ value it is, not packed by hand into float64 tensors.
// Records are trivially copyable structs moved as bytes (every rank runs the same binary).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "strata/executor/distributed/communicator.h"

namespace strata::executor {

// Every member's `values` reduced element-wise by `op`, on every member.
template <std::size_t N>
std::array<double, N> all_reduce_values(Communicator& group, std::array<double, N> values,
                                        ReduceOp op) {
  Tensor buffer = Tensor::zeros({static_cast<std::int64_t>(N)}, ScalarType::float64);
  std::copy(values.begin(), values.end(), buffer.data<double>());
  group.all_reduce(buffer, op);
  std::copy(buffer.data<double>(), buffer.data<double>() + N, values.begin());
  return values;
}

inline double all_reduce_value(Communicator& group, double value, ReduceOp op) {
  return all_reduce_values<1>(group, {value}, op)[0];
}

// The same for a vector whose length every member agrees on.
inline std::vector<double> all_reduce_vector(Communicator& group, std::vector<double> values,
                                             ReduceOp op) {
  Tensor buffer = Tensor::zeros({static_cast<std::int64_t>(values.size())}, ScalarType::float64);
  std::copy(values.begin(), values.end(), buffer.data<double>());
  group.all_reduce(buffer, op);
  std::copy(buffer.data<double>(), buffer.data<double>() + values.size(), values.begin());
  return values;
}

namespace detail {

// A record's bytes in whole int32 elements (the communicators move int32 tensors verbatim).
template <class Record>
constexpr std::int64_t record_words() {
  return static_cast<std::int64_t>((sizeof(Record) + sizeof(std::int32_t) - 1) /
                                   sizeof(std::int32_t));
}

}  // namespace detail

// Every member's `mine`, by rank, on every member.
template <class Record>
std::vector<Record> all_gather_records(Communicator& group, const Record& mine) {
  static_assert(std::is_trivially_copyable_v<Record>, "records move as bytes");
  constexpr std::int64_t words = detail::record_words<Record>();
  Tensor part = Tensor::zeros({words}, ScalarType::int32);
  std::memcpy(part.raw(), &mine, sizeof(Record));
  Tensor whole = Tensor::zeros({words * group.size()}, ScalarType::int32);
  group.all_gather(part, whole);
  std::vector<Record> all(static_cast<std::size_t>(group.size()));
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    std::memcpy(static_cast<void*>(&all[rank]),
                whole.data<std::int32_t>() + static_cast<std::int64_t>(rank) * words,
                sizeof(Record));
  }
  return all;
}

// `root`'s `value`, on every member.
template <class Record>
Record broadcast_record(Communicator& group, Record value, int root) {
  static_assert(std::is_trivially_copyable_v<Record>, "records move as bytes");
  Tensor buffer = Tensor::zeros({detail::record_words<Record>()}, ScalarType::int32);
  std::memcpy(buffer.raw(), &value, sizeof(Record));
  group.broadcast(buffer, root);
  std::memcpy(static_cast<void*>(&value), buffer.raw(), sizeof(Record));
  return value;
}

// Every member's list of records (of any lengths), by rank, on every member.
template <class Record>
std::vector<std::vector<Record>> all_gather_record_lists(Communicator& group,
                                                         const std::vector<Record>& mine) {
  static_assert(std::is_trivially_copyable_v<Record>, "records move as bytes");
  const std::vector<std::int64_t> lengths =
      all_gather_records<std::int64_t>(group, static_cast<std::int64_t>(mine.size()));
  const std::int64_t longest =
      std::max<std::int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  constexpr std::int64_t words = detail::record_words<Record>();
  Tensor part = Tensor::zeros({longest * words}, ScalarType::int32);
  if (!mine.empty()) std::memcpy(part.raw(), mine.data(), mine.size() * sizeof(Record));
  Tensor whole = Tensor::zeros({longest * words * group.size()}, ScalarType::int32);
  group.all_gather(part, whole);
  std::vector<std::vector<Record>> all(static_cast<std::size_t>(group.size()));
  for (std::size_t rank = 0; rank < all.size(); ++rank) {
    all[rank].resize(static_cast<std::size_t>(lengths[rank]));
    if (lengths[rank] == 0) continue;
    std::memcpy(static_cast<void*>(all[rank].data()),
                whole.data<std::int32_t>() + static_cast<std::int64_t>(rank) * longest * words,
                all[rank].size() * sizeof(Record));
  }
  return all;
}

}  // namespace strata::executor
