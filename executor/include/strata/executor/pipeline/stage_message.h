// What travels from one pipeline stage to the next with a micro-batch: its activations and the
// pass-through tensors — values produced before a stage boundary and consumed after it — that the
// model description declares. The runtime sends and receives them all, stage after stage; no
// layer is wrapped to carry them (DeepSpeed's pipeline engine needs such wrappers for every
// tensor that skips a stage: an attention mask, position ids). Used by the pipeline runtime.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "strata/executor/tensor/tensor.h"
#include "strata/schemas/model_config.h"

namespace strata::executor {

// A tensor of [planes · micro-batch, sequence] elements produced on the first stage and passed
// along.
struct PassThroughTensor {
  std::string name;
  ScalarType type = ScalarType::int32;
  std::int64_t planes = 1;
};

// For the models the executor builds: the targets, read with the token ids by the first stage's
// data loader and consumed by the loss on the last stage (so that only the first stage reads the
// data) — with D MTP modules, 1 + D planes: the targets and the tokens 1..D further ahead
// (stack_future_labels), rolled over whole sequences before cp takes each rank's share. A model
// with packed sequences would add its position ids and document boundaries here.
std::vector<PassThroughTensor> pass_through_tensors(const schemas::ModelConfig& model);

// MPI tags of one message's tensors: unique per (direction, stage, micro-batch, tensor) within a
// step, so that messages between the same two ranks never match the wrong receive (interleaved
// stages put several stage pairs on one rank pair). `tensor` 0 is the activation (or gradient).
int stage_message_tag(bool backward, int stage, int num_stages, int micro_batch, int tensor,
                      int tensors_per_message);

}  // namespace strata::executor
