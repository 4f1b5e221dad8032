// LayoutTransfer: a run's state moved from one layout to another in memory, with collectives
// only — the checkpoint resharder's coverage logic (checkpoint_layout.h) without the files. Each
// rank's state tensors are what its checkpoint files would hold: its values (whole store, or its
// ZeRO-3 shards) and each half of its AdamW moments (whole, or its ZeRO ≥ 1 shards), every element
// a known element of the whole model. Every element a rank holds under the new layout is taken
// from a rank that held it under the old one: the rank itself wherever it can (so a pair of
// identical placements moves nothing), otherwise the holder that has been asked for least so far
// (replicas share the sending). No rank ever holds more of the model than its two layouts' state
// plus the pieces in flight, and no file is written.
//
// Every rank computes the same plan from the two layout blocks alone, so the exchange of each
// state part (values, first moments, second moments) is one all-to-all of each rank's pieces,
// packed in plan order.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "strata/executor/distributed/communicator.h"
#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// `length` elements from `source_offset` of the source rank's state tensor to `target_offset` of
// the target rank's: of the values, or of both moments' halves (the same offsets in each).
struct TransferPiece {
  std::int64_t source_rank = 0;
  std::int64_t target_rank = 0;
  bool moments = false;
  std::int64_t source_offset = 0;
  std::int64_t target_offset = 0;
  std::int64_t length = 0;
};

// One of a rank's three state tensors.
enum class StatePart { values, first_moments, second_moments };

// A rank's state tensors: its values and the two halves of its AdamW moments, as the sharded
// optimizer holds them (ShardedOptimizer::values_state and moments_state).
struct RankState {
  Tensor* values = nullptr;
  Tensor* first_moments = nullptr;
  Tensor* second_moments = nullptr;
};

// What a transfer keeps of its plan: every piece, to run it; or only the elements between each
// pair of ranks, to price it (a large world's plan has millions of pieces: a row-split weight is
// a run per row on each rank).
enum class TransferDetail { pieces, totals };

class LayoutTransfer {
 public:
  // `from` and `to`: checkpoint layout blocks (checkpoint_layout_of; null: one device) of the
  // same model on `world_size` ranks.
  LayoutTransfer(const schemas::ModelConfig& model, const nlohmann::json& from,
                 const nlohmann::json& to, std::int64_t world_size,
                 TransferDetail detail = TransferDetail::pieces);

  // Every piece, grouped by target rank, then in the order that rank's state is filled; empty
  // for a transfer of TransferDetail::totals, which cannot run.
  const std::vector<TransferPiece>& pieces() const { return pieces_; }
  // Elements (a moments piece counts both halves) from each source rank to each other target
  // rank, keyed source · world_size + target; pairs that exchange nothing are absent.
  const std::unordered_map<std::int64_t, std::int64_t>& elements_between() const {
    return elements_between_;
  }
  // Elements `rank` sends to and receives from other ranks (a moments piece counts both halves).
  std::int64_t sent_elements(std::int64_t rank) const;
  std::int64_t received_elements(std::int64_t rank) const;
  // The sizes of `rank`'s state tensors under the new layout (values; one half of the moments).
  std::int64_t target_values_elements(std::int64_t rank) const;
  std::int64_t target_moments_elements(std::int64_t rank) const;

  // This rank's part, collective over `world` (the job's communicator, every rank calling it):
  // `to` is filled from every rank's `from`, part by part. All six tensors have one floating type.
  void run(Communicator& world, const RankState& from, const RankState& to) const;
  // One part of it, an all-to-all of its own: a caller can free each old tensor as soon as its
  // part has moved (Trainer::switch_to does, so that two layouts' whole state never coexist).
  void run_part(Communicator& world, StatePart part, const Tensor& from, Tensor& to) const;

 private:
  std::int64_t world_size_;
  TransferDetail detail_;
  std::vector<TransferPiece> pieces_;
  std::unordered_map<std::int64_t, std::int64_t> elements_between_;
  std::vector<std::int64_t> sent_, received_;
  std::vector<std::int64_t> target_values_, target_moments_;
};

}  // namespace strata::executor
