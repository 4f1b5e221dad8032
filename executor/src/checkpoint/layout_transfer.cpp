#include "strata/executor/checkpoint/layout_transfer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

#include "strata/executor/check.h"
#include "strata/executor/checkpoint/checkpoint_layout.h"
#include "strata/executor/model/transformer.h"

namespace strata::executor {
namespace {

// A run of a parameter's elements that one rank holds under the old layout.
struct HeldRun {
  std::int64_t global_start = 0;
  std::int64_t length = 0;
  std::int64_t rank = 0;
  std::int64_t offset = 0;  // in that rank's state tensor
  std::int64_t global_end() const { return global_start + length; }
};

// One parameter's runs under the old layout, for the values or for the moments, indexed so that
// the runs holding an element and a rank's next run are found without scanning every rank's
// (a switch of a large world asks for each element on each of its new holders).
struct ParameterHolders {
  std::vector<HeldRun> runs;        // by global_start, then in the order they were added
  std::vector<std::int64_t> reach;  // reach[i]: the furthest global_end of runs[0..i]
  std::map<std::int64_t, std::vector<std::int64_t>> starts_by_rank;  // each rank's, ascending

  void index() {
    std::stable_sort(runs.begin(), runs.end(), [](const HeldRun& a, const HeldRun& b) {
      return a.global_start < b.global_start;
    });
    reach.resize(runs.size());
    std::int64_t furthest = std::numeric_limits<std::int64_t>::min();
    for (std::size_t i = 0; i < runs.size(); ++i) {
      furthest = std::max(furthest, runs[i].global_end());
      reach[i] = furthest;
      starts_by_rank[runs[i].rank].push_back(runs[i].global_start);
    }
  }
  // Calls `visit` with every run that holds element `position`.
  template <typename Visit>
  void holding(std::int64_t position, Visit&& visit) const {
    auto i = static_cast<std::size_t>(std::upper_bound(runs.begin(), runs.end(), position,
                                                       [](std::int64_t at, const HeldRun& run) {
                                                         return at < run.global_start;
                                                       }) -
                                      runs.begin());
    while (i > 0 && reach[i - 1] > position) {
      --i;
      if (runs[i].global_end() > position) visit(runs[i]);
    }
  }
  // Where `rank`'s first run starting past `position` starts; `end` if none starts before it.
  std::int64_t next_start(std::int64_t rank, std::int64_t position, std::int64_t end) const {
    const auto found = starts_by_rank.find(rank);
    if (found == starts_by_rank.end()) return end;
    const auto next = std::upper_bound(found->second.begin(), found->second.end(), position);
    return next == found->second.end() ? end : std::min(end, *next);
  }
};
using HeldRuns = std::vector<ParameterHolders>;

void add_held(const std::vector<FileSegment>& segments, std::int64_t rank, HeldRuns& held) {
  for (const FileSegment& segment : segments) {
    held[segment.parameter].runs.push_back(
        {segment.global_offset, segment.length, rank, segment.file_offset});
  }
}

}  // namespace

LayoutTransfer::LayoutTransfer(const schemas::ModelConfig& model, const nlohmann::json& from,
                               const nlohmann::json& to, std::int64_t world_size,
                               TransferDetail detail)
    : world_size_(world_size),
      detail_(detail),
      sent_(static_cast<std::size_t>(world_size), 0),
      received_(static_cast<std::size_t>(world_size), 0),
      target_values_(static_cast<std::size_t>(world_size), 0),
      target_moments_(static_cast<std::size_t>(world_size), 0) {
  STRATA_CHECK(world_size >= 1, "a transfer over {} ranks", world_size);
  // A plan of one rank has the one-device layout (null), any other plan a parallel one.
  STRATA_CHECK(from.is_null() == (world_size == 1) && to.is_null() == (world_size == 1),
               "a transfer over {} ranks from a {} layout to a {} layout", world_size,
               from.is_null() ? "one-device" : "parallel",
               to.is_null() ? "one-device" : "parallel");
  const std::size_t parameters = transformer_parameters(model).size();
  HeldRuns held_values(parameters), held_moments(parameters);
  for (std::int64_t rank = 0; rank < world_size; ++rank) {
    const RankCheckpointLayout layout = rank_state_layout(model, from, rank);
    add_held(layout.values, rank, held_values);
    add_held(layout.moments, rank, held_moments);
  }
  for (ParameterHolders& holders : held_values) holders.index();
  for (ParameterHolders& holders : held_moments) holders.index();
  // Takes [global, global + length) of parameter `parameter` for `target` at `offset` from the
  // old holders: the target itself wherever it holds the elements, else the least-asked holder.
  const auto cover = [&](const HeldRuns& held, bool moments, std::int64_t target,
                         const FileSegment& want) {
    const ParameterHolders& holders = held[want.parameter];
    const std::int64_t weight = moments ? 2 : 1;
    std::int64_t position = want.global_offset;
    const std::int64_t end = want.global_offset + want.length;
    while (position < end) {
      const HeldRun* own = nullptr;
      const HeldRun* chosen = nullptr;
      holders.holding(position, [&](const HeldRun& run) {
        if (run.rank == target) own = &run;
        if (chosen == nullptr ||
            sent_[static_cast<std::size_t>(run.rank)] <
                sent_[static_cast<std::size_t>(chosen->rank)] ||
            (sent_[static_cast<std::size_t>(run.rank)] ==
                 sent_[static_cast<std::size_t>(chosen->rank)] &&
             run.rank < chosen->rank)) {
          chosen = &run;
        }
      });
      if (own != nullptr) chosen = own;
      // Where the target's own run starts next, past `position`: a piece from another rank stops
      // there.
      const std::int64_t next_own = holders.next_start(target, position, end);
      STRATA_CHECK(chosen != nullptr,
                   "element {} of parameter {} is held by no rank of the old layout", position,
                   want.parameter);
      std::int64_t stop = std::min(end, chosen->global_end());
      if (chosen->rank != target) stop = std::min(stop, next_own);
      const std::int64_t length = stop - position;
      const TransferPiece piece{chosen->rank,
                                target,
                                moments,
                                chosen->offset + (position - chosen->global_start),
                                want.file_offset + (position - want.global_offset),
                                length};
      if (piece.source_rank != target) {
        sent_[static_cast<std::size_t>(piece.source_rank)] += weight * length;
        received_[static_cast<std::size_t>(target)] += weight * length;
        elements_between_[piece.source_rank * world_size_ + target] += weight * length;
      }
      if (detail_ == TransferDetail::totals) {
        position = stop;
        continue;
      }
      TransferPiece* last = pieces_.empty() ? nullptr : &pieces_.back();
      if (last != nullptr && last->source_rank == piece.source_rank &&
          last->target_rank == piece.target_rank && last->moments == piece.moments &&
          last->source_offset + last->length == piece.source_offset &&
          last->target_offset + last->length == piece.target_offset) {
        last->length += length;
      } else {
        pieces_.push_back(piece);
      }
      position = stop;
    }
  };
  for (std::int64_t target = 0; target < world_size; ++target) {
    const RankCheckpointLayout layout = rank_state_layout(model, to, target);
    target_values_[static_cast<std::size_t>(target)] = layout.values_elements;
    target_moments_[static_cast<std::size_t>(target)] = layout.moments_elements;
    for (const FileSegment& segment : layout.values) cover(held_values, false, target, segment);
    for (const FileSegment& segment : layout.moments) cover(held_moments, true, target, segment);
  }
}

std::int64_t LayoutTransfer::sent_elements(std::int64_t rank) const {
  return sent_.at(static_cast<std::size_t>(rank));
}

std::int64_t LayoutTransfer::received_elements(std::int64_t rank) const {
  return received_.at(static_cast<std::size_t>(rank));
}

std::int64_t LayoutTransfer::target_values_elements(std::int64_t rank) const {
  return target_values_.at(static_cast<std::size_t>(rank));
}

std::int64_t LayoutTransfer::target_moments_elements(std::int64_t rank) const {
  return target_moments_.at(static_cast<std::size_t>(rank));
}

void LayoutTransfer::run(Communicator& world, const RankState& from, const RankState& to) const {
  run_part(world, StatePart::values, *from.values, *to.values);
  run_part(world, StatePart::first_moments, *from.first_moments, *to.first_moments);
  run_part(world, StatePart::second_moments, *from.second_moments, *to.second_moments);
}

void LayoutTransfer::run_part(Communicator& world, StatePart part, const Tensor& from,
                              Tensor& to) const {
  STRATA_CHECK(world.size() == world_size_, "a transfer planned for {} ranks run on {}",
               world_size_, world.size());
  STRATA_CHECK(detail_ == TransferDetail::pieces, "a transfer planned for its totals only is run");
  const ScalarType type = to.scalar_type();
  STRATA_CHECK(
      from.scalar_type() == type && from.device() == Device::cpu && to.device() == Device::cpu,
      "a layout transfer of state tensors of one type on the host");
  const std::int64_t me = world.rank();
  const std::size_t element = scalar_bytes(type);
  const auto bytes_at = [element](const Tensor& tensor, std::int64_t offset) {
    return static_cast<std::byte*>(const_cast<void*>(tensor.raw())) +
           static_cast<std::size_t>(offset) * element;
  };
  // A moments piece moves the same offsets of each half; a values piece, of the values.
  const bool moments = part != StatePart::values;
  const auto in_part = [moments](const TransferPiece& piece) { return piece.moments == moments; };
  // Pieces that stay on this rank: copies.
  for (const TransferPiece& piece : pieces_) {
    if (!in_part(piece) || piece.source_rank != me || piece.target_rank != me) continue;
    std::memmove(bytes_at(to, piece.target_offset), bytes_at(from, piece.source_offset),
                 static_cast<std::size_t>(piece.length) * element);
  }
  if (world_size_ == 1) return;
  // The rest in one all-to-all: per peer, its pieces in plan order (both sides know the plan).
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(world_size_), 0);
  std::vector<std::int64_t> receive_counts(static_cast<std::size_t>(world_size_), 0);
  for (const TransferPiece& piece : pieces_) {
    if (!in_part(piece) || piece.source_rank == piece.target_rank) continue;
    if (piece.source_rank == me) {
      send_counts[static_cast<std::size_t>(piece.target_rank)] += piece.length;
    }
    if (piece.target_rank == me) {
      receive_counts[static_cast<std::size_t>(piece.source_rank)] += piece.length;
    }
  }
  const auto starts = [](const std::vector<std::int64_t>& counts) {
    std::vector<std::int64_t> start(counts.size(), 0);
    for (std::size_t i = 1; i < counts.size(); ++i) start[i] = start[i - 1] + counts[i - 1];
    return start;
  };
  std::vector<std::int64_t> send_cursor = starts(send_counts);
  std::vector<std::int64_t> receive_cursor = starts(receive_counts);
  const std::int64_t send_total = send_cursor.back() + send_counts.back();
  const std::int64_t receive_total = receive_cursor.back() + receive_counts.back();
  Tensor send = Tensor::zeros({std::max<std::int64_t>(send_total, 1)}, type);
  Tensor receive = Tensor::zeros({std::max<std::int64_t>(receive_total, 1)}, type);
  for (const TransferPiece& piece : pieces_) {
    if (!in_part(piece) || piece.source_rank != me || piece.target_rank == me) continue;
    std::int64_t& cursor = send_cursor[static_cast<std::size_t>(piece.target_rank)];
    std::memcpy(bytes_at(send, cursor), bytes_at(from, piece.source_offset),
                static_cast<std::size_t>(piece.length) * element);
    cursor += piece.length;
  }
  world.all_to_all(send, send_counts, receive, receive_counts);
  for (const TransferPiece& piece : pieces_) {
    if (!in_part(piece) || piece.target_rank != me || piece.source_rank == me) continue;
    std::int64_t& cursor = receive_cursor[static_cast<std::size_t>(piece.source_rank)];
    std::memcpy(bytes_at(to, piece.target_offset), bytes_at(receive, cursor),
                static_cast<std::size_t>(piece.length) * element);
    cursor += piece.length;
  }
}

}  // namespace strata::executor
