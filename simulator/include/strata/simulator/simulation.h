// The discrete-event simulation of one training step: it executes the plan's per-rank action
// lists (the schedule IR the executor runs) on modelled resources and reports when each rank
// finishes, where its time went and how much memory it peaked at.
//
// Each rank has three in-order streams: compute (forward, backward, recompute, with tensor- and
// context-parallel communication inside the passes, on the critical path as in Megatron-LM),
// pipeline (sends; a receive holds the compute stream until its data has arrived) and data
// parallel (gradient buckets, ZeRO-3 gathers; they overlap compute and slow it by the GPU
// profile's compute_slowdown_under_communication). With the plan's overlap_grad_reduce a stage's
// buckets become ready one by one during its last backward; without it, all at once after the
// rank's whole backward. Collectives of a group start when every member has asked for them;
// TIED_GRAD and STEP are rendezvous.
//
// Symmetric mode simulates one representative per pipeline rank: the tp, cp and dp replicas run
// identical action lists at identical costs, so they finish together. Full mode simulates every
// rank of the world, with real groups and partners; the two must agree (tests check it).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/costmodels/plan_costs.h"
#include "strata/schedule/pipeline_schedule.h"
#include "strata/schemas/plan.h"
#include "strata/simulator/timeline.h"

namespace strata::simulator {

enum class SimulationMode { symmetric, full };

struct SimulationOptions {
  SimulationMode mode = SimulationMode::symmetric;
  bool record_timeline = false;
  // Full mode: record the timeline of at most this many ranks (0: every rank) — every pipeline
  // rank of the first replica, then of the next, in replica order — so that a picture of a step
  // of thousands of ranks stays a picture. The step is still simulated on every rank.
  std::int64_t timeline_rank_limit = 0;
};

// Where one rank's step time went. Every field is time on the rank's critical (compute) stream,
// so the fields sum to the step time.
struct TimeBreakdown {
  double compute_s = 0;    // forward and backward kernels
  double recompute_s = 0;  // forward passes run again before backward
  double tp_comm_s = 0;
  double cp_comm_s = 0;  // what ring attention could not hide
  double ep_comm_s = 0;  // MoE token dispatch and combine not hidden by compute
  // The device idle while an eager stack's host issues the kernels (PassTime::host_wait_s):
  // passes whose kernels run faster than the host launches them.
  double host_issue_s = 0;
  double pp_comm_s = 0;  // waiting for an activation or gradient still on the wire
  double dp_comm_s = 0;  // gradient reduction (and ZeRO gathers) not hidden by compute,
                         // incl. the slowdown of compute it overlaps
  double optimizer_s = 0;
  double bubble_s = 0;  // idle: waiting for other stages to compute
  double sum() const;
};

struct RankMemory {
  double weights_bytes = 0;
  double gradients_bytes = 0;
  double optimizer_bytes = 0;
  double communicator_bytes = 0;      // the communicator's temporaries (RankStateMemory)
  double activations_peak_bytes = 0;  // incl. ZeRO-3 gathered weights and working buffers
  double peak_bytes = 0;
  double capacity_bytes = 0;
  bool fits() const { return peak_bytes <= capacity_bytes; }
};

struct SimulationResult {
  double step_time_s = 0;
  // Per pipeline rank (in full mode: the replica with tp = cp = dp = 0).
  std::vector<TimeBreakdown> breakdown;
  std::vector<RankMemory> memory;
  std::vector<int> peak_micro_batches_in_flight;
  double bubble_fraction = 0;  // mean over pipeline ranks of bubble / step time
  std::int64_t simulated_ranks = 0;
  Timeline timeline;
};

SimulationResult simulate(const schemas::Plan& plan, const schedule::PipelineSchedule& schedule,
                          const costmodels::PlanCosts& costs, const SimulationOptions& options);

}  // namespace strata::simulator
