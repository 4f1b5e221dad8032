#include "strata/executor/checkpoint/layout_transfer.h"

#include <algorithm>
#include <cstring>

#include "strata/executor/check.h"

namespace strata::executor {
namespace {

// Copies a box of `rows` × `cols` elements of `element` bytes between two state buffers (or a
// state buffer and a packed one, whose pitch is `cols`): one copy where both are contiguous.
void copy_box(std::byte* to, std::int64_t to_pitch, const std::byte* from, std::int64_t from_pitch,
              std::int64_t rows, std::int64_t cols, std::size_t element) {
  const auto row_bytes = static_cast<std::size_t>(cols) * element;
  if ((to_pitch == cols && from_pitch == cols) || rows == 1) {
    std::memmove(to, from, static_cast<std::size_t>(rows) * row_bytes);
    return;
  }
  for (std::int64_t row = 0; row < rows; ++row) {
    std::memmove(to + static_cast<std::size_t>(row * to_pitch) * element,
                 from + static_cast<std::size_t>(row * from_pitch) * element, row_bytes);
  }
}

}  // namespace

LayoutTransfer::LayoutTransfer(const schemas::ModelConfig& model,
                               const std::optional<layout::StateLayout>& from,
                               const std::optional<layout::StateLayout>& to,
                               std::int64_t world_size)
    : plan_(model, from, to, world_size) {}

void LayoutTransfer::run(Communicator& world, const RankState& from, const RankState& to) const {
  run_part(world, StatePart::values, *from.values, *to.values);
  run_part(world, StatePart::first_moments, *from.first_moments, *to.first_moments);
  run_part(world, StatePart::second_moments, *from.second_moments, *to.second_moments);
}

void LayoutTransfer::run_part(Communicator& world, StatePart part, const Tensor& from,
                              Tensor& to) const {
  const std::int64_t world_size = plan_.world_size();
  STRATA_CHECK(world.size() == world_size, "a transfer planned for {} ranks run on {}", world_size,
               world.size());
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
  // A moments box moves the same offsets of each half; a values box, of the values.
  const bool moments = part != StatePart::values;
  const std::vector<layout::TransferBox>& boxes = plan_.boxes();
  const auto in_part = [moments](const layout::TransferBox& box) { return box.moments == moments; };
  // Boxes that stay on this rank: copies.
  for (const layout::TransferBox& box : boxes) {
    if (!in_part(box) || box.source_rank != me || box.target_rank != me) continue;
    copy_box(bytes_at(to, box.target_offset), box.target_pitch, bytes_at(from, box.source_offset),
             box.source_pitch, box.rows, box.cols, element);
  }
  if (world_size == 1) return;
  // The rest in one all-to-all: per peer, its boxes packed in plan order (both sides know the
  // plan).
  std::vector<std::int64_t> send_counts(static_cast<std::size_t>(world_size), 0);
  std::vector<std::int64_t> receive_counts(static_cast<std::size_t>(world_size), 0);
  for (const layout::TransferBox& box : boxes) {
    if (!in_part(box) || box.source_rank == box.target_rank) continue;
    if (box.source_rank == me) {
      send_counts[static_cast<std::size_t>(box.target_rank)] += box.elements();
    }
    if (box.target_rank == me) {
      receive_counts[static_cast<std::size_t>(box.source_rank)] += box.elements();
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
  for (const layout::TransferBox& box : boxes) {
    if (!in_part(box) || box.source_rank != me || box.target_rank == me) continue;
    std::int64_t& cursor = send_cursor[static_cast<std::size_t>(box.target_rank)];
    copy_box(bytes_at(send, cursor), box.cols, bytes_at(from, box.source_offset), box.source_pitch,
             box.rows, box.cols, element);
    cursor += box.elements();
  }
  world.all_to_all(send, send_counts, receive, receive_counts);
  for (const layout::TransferBox& box : boxes) {
    if (!in_part(box) || box.target_rank != me || box.source_rank == me) continue;
    std::int64_t& cursor = receive_cursor[static_cast<std::size_t>(box.source_rank)];
    copy_box(bytes_at(to, box.target_offset), box.target_pitch, bytes_at(receive, cursor), box.cols,
             box.rows, box.cols, element);
    cursor += box.elements();
  }
}

}  // namespace strata::executor
