// Action: one step of a pipeline rank's program — a forward or backward of one micro-batch on one
// stage, a send or receive between stages, or a per-step collective. Shared by the simulator, the
// planner and the executor, which run the same action lists.
#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace strata::schedule {

// Spelled as in PyTorch pipelining's schedule grammar, "[stage][TYPE][micro-batch]":
//   2F0   forward of micro-batch 0 on stage 2       1B3  full backward (input and weight grads)
//   1I3   backward for the input gradient only      0W1  backward for the weight gradient only
//   1SEND_F3 / 2RECV_F3   activations of micro-batch 3 from stage 1 to stage 2
//   2SEND_B3 / 1RECV_B3   the gradient of those activations, back from stage 2 to stage 1
// and, once per step and stage (no micro-batch):
//   0UNSHARD / 0RESHARD   ZeRO-3 all-gather of stage 0's parameters / freeing the gathered copy
//   0REDUCE_GRAD          data-parallel reduction of stage 0's gradients
//   0TIED_GRAD            all-reduce of the tied embedding's gradient between the first and the
//                         last stage (written once on each of the two stages)
//   STEP                  the optimizer step (with the global gradient-norm reduction before it)
enum class ActionType {
  forward,
  backward,
  backward_input,
  backward_weight,
  send_forward,
  recv_forward,
  send_backward,
  recv_backward,
  unshard,
  reshard,
  reduce_grad,
  tied_embedding_grad,
  optimizer_step,
};

struct Action {
  ActionType type = ActionType::forward;
  int stage = -1;        // virtual stage, 0 .. pp·vpp − 1; −1 for STEP
  int micro_batch = -1;  // −1 for the per-step actions

  auto operator<=>(const Action&) const = default;
};

std::string_view action_type_token(ActionType type);  // "F", "SEND_F", "STEP", ...
std::string to_string(const Action& action);
// The inverse of to_string; nullopt when `text` is not an action.
std::optional<Action> parse_action(std::string_view text);

bool is_compute(ActionType type);   // F, B, I, W
bool is_backward(ActionType type);  // B or I: the part that sends a gradient upstream
bool has_micro_batch(ActionType type);

}  // namespace strata::schedule
