// PipelineSchedule: the per-rank action lists of one training step — what each pipeline rank
// does, in order. Every tp, cp and dp replica of a pipeline rank runs the same list, so the
// schedule has one list per pipeline rank. Built by the generators and the CSV reader of this
// component; run by the simulator (predicted) and the executor (for real).
#pragma once

#include <string>
#include <vector>

#include "strata/schedule/action.h"

namespace strata::schedule {

// Stage s (one model chunk) lives on pipeline rank s mod pp as its chunk s / pp:
//
//   pp = 4, vpp = 2:  rank 0 holds stages 0 and 4, rank 1 stages 1 and 5, ...
//   activations flow 0 -> 1 -> 2 -> 3 -> 4 -> ... -> 7, gradients back.
struct PipelineSchedule {
  int pp = 1;
  int vpp = 1;
  int num_micro_batches = 1;
  std::vector<std::vector<Action>> ranks;  // ranks[r]: the actions of pipeline rank r, in order

  int num_stages() const { return pp * vpp; }
  int rank_of_stage(int stage) const { return stage % pp; }
  bool operator==(const PipelineSchedule&) const = default;
};

// Compute orders (F, B, I, W only) of the built-in schedules. Sends and receives are added by
// add_communication. Preconditions are those the plan validator enforces (pp, vpp, m ≥ 1;
// interleaving needs vpp > 1 and m a multiple of pp).
//
// GPipe: all forwards, then all backwards, chunk by chunk.
PipelineSchedule gpipe_schedule(int pp, int vpp, int num_micro_batches);
// 1F1B (PipeDream-Flush, Megatron-LM): rank r runs min(pp − r − 1, m) warm-up forwards, then
// alternates one forward and one backward, then drains the remaining backwards. Rank r holds at
// most min(pp − r, m) micro-batches' activations.
PipelineSchedule one_f_one_b_schedule(int pp, int num_micro_batches);
// Interleaved 1F1B (Narayanan et al. 2021; Megatron-LM's warm-up counts): the m·vpp
// (micro-batch, chunk) units run in groups of pp micro-batches per chunk; rank r warms up with
// min(2·(pp − r − 1) + (vpp − 1)·pp, m·vpp) forwards.
PipelineSchedule interleaved_one_f_one_b_schedule(int pp, int vpp, int num_micro_batches);
// ZB-H1 (Qi et al. 2024): 1F1B's order with each backward split into I (input gradient, on the
// cross-stage critical path) and W (weight gradient). Rank r defers its weight gradients by
// pp − r − 1 micro-batches: after I(j) it runs W(j − (pp − r − 1)), and the deferred W's close the
// step, filling the time 1F1B spends waiting for gradients. Activations in flight as in 1F1B.
PipelineSchedule zb_h1_schedule(int pp, int num_micro_batches);

// Inserts the sends and receives between stages: RECV_F before a forward of every stage but the
// first and SEND_F after it on every stage but the last; RECV_B before a backward (B or I) of
// every stage but the last and SEND_B after it on every stage but the first. Sends never block
// (the executor posts them asynchronously); a receive waits for its send.
void add_communication(PipelineSchedule& schedule);

// What a step does besides the pipeline, in the IR so that the simulator and the executor agree
// on where it happens.
struct StepActions {
  bool unshard_parameters = false;  // ZeRO-3: gather each stage's parameters before it is used
  bool reduce_gradients = false;    // dp·cp > 1: reduce each stage's gradients
  // Where the reduction starts: after each stage's last backward, so that it overlaps the rank's
  // remaining backwards (Megatron-Core's --overlap-grad-reduce), or after the rank's whole
  // backward (Megatron-LM's default, DeepSpeed's pipeline engine).
  bool overlap_gradient_reduction = true;
  bool tied_embedding = false;  // tied embeddings (all-reduced only when pp > 1)
};
// Adds UNSHARD before a stage's first action and RESHARD after its last; REDUCE_GRAD after a
// stage's last backward (B or W) and the sends that follow it, or, without overlap, at the end
// of the rank in the order its stages finished; TIED_GRAD at the end of the ranks of the first
// and the last stage, and STEP at the end of every rank.
void add_step_actions(PipelineSchedule& schedule, const StepActions& step);

}  // namespace strata::schedule
