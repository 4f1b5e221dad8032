#include "strata/simulator/simulation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

#include "strata/costmodels/framework_behaviour.h"
#include "strata/schedule/action.h"
#include "strata/schemas/mesh_ranks.h"

namespace strata::simulator {
namespace {

using schedule::Action;
using schedule::ActionType;
using schemas::MeshAxis;

constexpr double kNotYet = -1;

struct Interval {
  double start = 0;
  double end = 0;
};

// A message on its way: when it lands and how long it was on the wire.
struct Arrival {
  double time = kNotYet;
  double transfer_s = 0;
  std::int64_t flow = -1;
};

struct RankState {
  std::int64_t label = 0;  // world rank (full) or pipeline rank (symmetric), for the timeline
  int pipe = 0;
  std::int64_t replica = 0;
  std::int64_t dp_group = 0;
  const std::vector<Action>* actions = nullptr;
  std::size_t next = 0;
  std::size_t dp_posts = 0;
  double compute_free = 0;
  double send_free = 0;
  TimeBreakdown time;
  double memory = 0;
  double memory_peak = 0;
  int in_flight = 0;
  int in_flight_peak = 0;
  bool waiting = false;
  bool recorded = true;  // its slices and memory go into the timeline
  std::int64_t pending_flow = -1;
  std::vector<double> stage_ready;      // ZeRO-3: when each stage's weights are gathered
  std::vector<Interval> last_gradient;  // per stage: its last gradient pass
  std::vector<Interval> compute_busy;   // kept only when overlap slows compute
};

struct PendingCollective {
  int stage = 0;
  bool unshard = false;
  std::vector<double> ready;  // per bucket: the latest member's ready time
  // When the members stop computing and wait: the part of a collective the communicator does not
  // advance during compute (1 − communicator_progress_during_compute) runs only from then on.
  double waited = 0;
  std::size_t posted = 0;
};

struct DpGroup {
  std::vector<std::size_t> members;
  std::vector<PendingCollective> queue;
  std::size_t resolved = 0;
  double free = 0;
  std::vector<Interval> busy;
};

struct Rendezvous {
  std::vector<std::size_t> arrived;
};

double overlap_s(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  double total = 0;
  std::size_t j = 0;
  for (const Interval& x : a) {
    while (j < b.size() && b[j].end <= x.start) ++j;
    for (std::size_t k = j; k < b.size() && b[k].start < x.end; ++k) {
      total += std::max(0.0, std::min(x.end, b[k].end) - std::max(x.start, b[k].start));
    }
  }
  return total;
}

class Engine {
 public:
  Engine(const schemas::Plan& plan, const schedule::PipelineSchedule& schedule,
         const costmodels::PlanCosts& costs, const SimulationOptions& options)
      : plan_(plan), schedule_(schedule), costs_(costs), options_(options) {
    stages_ = schedule.num_stages();
    micro_batches_ = schedule.num_micro_batches;
    track_overlap_ = costs.dp_overlap_slowdown > 0;
    sends_block_compute_ =
        costmodels::framework_behaviour(plan.framework).pipeline_sends_block_compute;
    if (options.mode == SimulationMode::symmetric) {
      replicas_ = 1;
      for (int pipe = 0; pipe < schedule.pp; ++pipe) add_rank(pipe, pipe, 0, pipe);
      groups_.resize(static_cast<std::size_t>(schedule.pp));
    } else {
      const schemas::Mesh& mesh = plan.mesh;
      replicas_ = mesh.tp * mesh.cp * mesh.dp;
      // The gradient-reduction groups are the executor's (ProcessGroups::gradient_reduction):
      // the mesh's dp × cp groups, numbered as schemas::mesh_groups lists them.
      const std::vector<std::vector<std::int64_t>> reduction_groups =
          schemas::mesh_groups(mesh, {MeshAxis::dp, MeshAxis::cp});
      std::vector<std::int64_t> group_of(static_cast<std::size_t>(mesh.world_size()), 0);
      for (std::size_t g = 0; g < reduction_groups.size(); ++g) {
        for (const std::int64_t member : reduction_groups[g]) {
          group_of[static_cast<std::size_t>(member)] = static_cast<std::int64_t>(g);
        }
      }
      groups_.resize(reduction_groups.size());
      for (std::int64_t world = 0; world < mesh.world_size(); ++world) {
        const schemas::MeshCoordinates c = schemas::mesh_coordinates(mesh, world);
        const auto at = [&](MeshAxis axis) { return c[static_cast<std::size_t>(axis)]; };
        const std::int64_t replica =
            at(MeshAxis::tp) + mesh.tp * (at(MeshAxis::cp) + mesh.cp * at(MeshAxis::dp));
        add_rank(world, static_cast<int>(at(MeshAxis::pp)), replica,
                 group_of[static_cast<std::size_t>(world)]);
      }
    }
    for (std::size_t i = 0; i < ranks_.size(); ++i) {
      groups_[static_cast<std::size_t>(ranks_[i].dp_group)].members.push_back(i);
    }
    const std::size_t slots = static_cast<std::size_t>(replicas_) * stages_ * micro_batches_;
    forward_end_.assign(slots, kNotYet);
    input_grad_end_.assign(slots, kNotYet);
    forward_arrival_.assign(slots, {});
    backward_arrival_.assign(slots, {});
    if (options.record_timeline) {
      const std::int64_t limit = options.timeline_rank_limit;
      for (RankState& rank : ranks_) {
        rank.recorded = limit <= 0 || rank.replica * schedule.pp + rank.pipe < limit;
        timeline_.rank_names.push_back(rank.recorded ? rank_name(rank) : std::string());
      }
    }
  }

  SimulationResult run() {
    bool progress = true;
    while (progress) {
      progress = false;
      for (std::size_t i = 0; i < ranks_.size(); ++i) {
        RankState& rank = ranks_[i];
        while (!rank.waiting && rank.next < rank.actions->size()) {
          if (!execute(i)) break;
          progress = true;
        }
      }
    }
    for (const RankState& rank : ranks_) {
      if (rank.next < rank.actions->size()) {
        throw std::logic_error(fmt::format("simulation stalled: {} waits at {}", rank_name(rank),
                                           schedule::to_string((*rank.actions)[rank.next])));
      }
    }
    return result();
  }

 private:
  void add_rank(std::int64_t label, int pipe, std::int64_t replica, std::int64_t group) {
    RankState rank;
    rank.label = label;
    rank.pipe = pipe;
    rank.replica = replica;
    rank.dp_group = group;
    rank.actions = &schedule_.ranks[static_cast<std::size_t>(pipe)];
    rank.stage_ready.assign(static_cast<std::size_t>(schedule_.num_stages()), 0.0);
    rank.last_gradient.assign(static_cast<std::size_t>(schedule_.num_stages()), {});
    ranks_.push_back(std::move(rank));
  }

  std::string rank_name(const RankState& rank) const {
    if (options_.mode == SimulationMode::symmetric) {
      return fmt::format("pipeline rank {}", rank.pipe);
    }
    const schemas::MeshCoordinates c = schemas::mesh_coordinates(plan_.mesh, rank.label);
    return fmt::format("rank {} (tp {}, cp {}, dp {}, pp {})", rank.label, c[0], c[1], c[2], c[3]);
  }

  std::size_t slot(std::int64_t replica, int stage, int micro_batch) const {
    return (static_cast<std::size_t>(replica) * stages_ + static_cast<std::size_t>(stage)) *
               micro_batches_ +
           static_cast<std::size_t>(micro_batch);
  }

  void record(const RankState& rank, Stream stream, std::string name, double start, double end,
              std::int64_t flow_out = -1, std::int64_t flow_in = -1) {
    if (!options_.record_timeline || !rank.recorded) return;
    timeline_.slices.push_back(
        {rank.label, stream, std::move(name), start, end - start, flow_out, flow_in});
  }

  void change_memory(RankState& rank, double time, double delta) {
    rank.memory += delta;
    rank.memory_peak = std::max(rank.memory_peak, rank.memory);
    if (options_.record_timeline && rank.recorded) {
      const double base = costs_.rank_states[static_cast<std::size_t>(rank.pipe)].total();
      timeline_.memory.push_back({rank.label, time, base + rank.memory});
    }
  }

  // Runs a compute pass on the rank's compute stream from `start`.
  double run_compute(RankState& rank, const Action& action, double start, double duration) {
    const double end = start + duration;
    rank.compute_free = end;
    if (track_overlap_) rank.compute_busy.push_back({start, end});
    record(rank, Stream::compute, schedule::to_string(action), start, end, -1, rank.pending_flow);
    rank.pending_flow = -1;
    return end;
  }

  bool execute(std::size_t index) {
    RankState& rank = ranks_[index];
    const Action& action = (*rank.actions)[rank.next];
    const costmodels::StageCosts* stage =
        action.stage >= 0 ? &costs_.stages[static_cast<std::size_t>(action.stage)] : nullptr;
    switch (action.type) {
      case ActionType::forward: {
        const double ready = rank.stage_ready[static_cast<std::size_t>(action.stage)];
        if (ready == kNotYet) return false;
        if (ready > rank.compute_free) {
          rank.time.dp_comm_s += ready - rank.compute_free;
          rank.compute_free = ready;
        }
        const costmodels::PassTime& pass = stage->passes.forward;
        rank.time.compute_s += pass.compute_s;
        rank.time.tp_comm_s += pass.tp_comm_s;
        rank.time.cp_comm_s += pass.cp_comm_s;
        rank.time.ep_comm_s += pass.ep_comm_s;
        rank.time.dp_comm_s += pass.dp_comm_s;
        rank.time.host_issue_s += pass.host_wait_s();
        const double start = rank.compute_free;
        change_memory(rank, start, stage->activations.stored);
        rank.in_flight_peak = std::max(rank.in_flight_peak, ++rank.in_flight);
        forward_end_[slot(rank.replica, action.stage, action.micro_batch)] =
            run_compute(rank, action, start, pass.total_s());
        break;
      }
      case ActionType::backward:
      case ActionType::backward_input:
      case ActionType::backward_weight: {
        const costmodels::PassCosts& passes = stage->passes;
        const bool input = action.type != ActionType::backward_weight;
        const bool weight = action.type != ActionType::backward_input;
        double duration = 0;
        if (input) {
          rank.time.recompute_s += passes.recompute.total_s();
          rank.time.compute_s += passes.backward_input.compute_s;
          rank.time.tp_comm_s += passes.backward_input.tp_comm_s;
          rank.time.cp_comm_s += passes.backward_input.cp_comm_s;
          rank.time.ep_comm_s += passes.backward_input.ep_comm_s;
          rank.time.dp_comm_s += passes.backward_input.dp_comm_s;
          rank.time.host_issue_s += passes.backward_input.host_wait_s();
          duration += passes.recompute.total_s() + passes.backward_input.total_s();
          rank.memory_peak = std::max(rank.memory_peak, rank.memory + stage->activations.working);
        }
        if (weight) {
          rank.time.compute_s += passes.backward_weight.compute_s;
          rank.time.tp_comm_s += passes.backward_weight.tp_comm_s;
          rank.time.dp_comm_s += passes.backward_weight.dp_comm_s;
          rank.time.host_issue_s += passes.backward_weight.host_wait_s();
          duration += passes.backward_weight.total_s();
        }
        const double start = rank.compute_free;
        const double end = run_compute(rank, action, start, duration);
        if (input) {
          input_grad_end_[slot(rank.replica, action.stage, action.micro_batch)] = end;
          --rank.in_flight;
        }
        if (weight) rank.last_gradient[static_cast<std::size_t>(action.stage)] = {start, end};
        const costmodels::LayerActivationBytes& bytes = stage->activations;
        if (action.type == ActionType::backward) change_memory(rank, end, -bytes.stored);
        if (action.type == ActionType::backward_input) {
          change_memory(rank, end, bytes.weight_inputs - bytes.stored);
        }
        if (action.type == ActionType::backward_weight) {
          change_memory(rank, end, -bytes.weight_inputs);
        }
        break;
      }
      case ActionType::send_forward:
      case ActionType::send_backward: {
        const bool forward = action.type == ActionType::send_forward;
        const double produced =
            (forward ? forward_end_
                     : input_grad_end_)[slot(rank.replica, action.stage, action.micro_batch)];
        const double transfer = forward ? stage->send_forward_s : stage->send_backward_s;
        double start = std::max(rank.send_free, produced);
        if (sends_block_compute_) start = std::max(start, rank.compute_free);
        const double end = start + transfer;
        rank.send_free = end;
        if (sends_block_compute_) {
          // The stack waits for the send before its next instruction
          // (costmodels/framework_behaviour.h).
          rank.time.pp_comm_s += end - rank.compute_free;
          rank.compute_free = end;
        }
        const std::int64_t flow = next_flow_++;
        const int to_stage = forward ? action.stage + 1 : action.stage - 1;
        (forward ? forward_arrival_
                 : backward_arrival_)[slot(rank.replica, to_stage, action.micro_batch)] = {
            end, transfer, flow};
        record(rank, Stream::pipeline, schedule::to_string(action), start, end, flow);
        break;
      }
      case ActionType::recv_forward:
      case ActionType::recv_backward: {
        const Arrival& arrival =
            (action.type == ActionType::recv_forward
                 ? forward_arrival_
                 : backward_arrival_)[slot(rank.replica, action.stage, action.micro_batch)];
        if (arrival.time == kNotYet) return false;
        const double wait = arrival.time - rank.compute_free;
        if (wait > 0) {
          rank.time.pp_comm_s += std::min(wait, arrival.transfer_s);
          rank.compute_free = arrival.time;
        }
        rank.pending_flow = arrival.flow;
        break;
      }
      case ActionType::reduce_grad: {
        const Interval& pass = rank.last_gradient[static_cast<std::size_t>(action.stage)];
        const std::size_t buckets = stage->gradient_buckets_s.size();
        std::vector<double> ready(buckets, rank.compute_free);
        // Overlapped, buckets fill as the last backward pass of the stage walks back through its
        // layers. Otherwise (or where a custom schedule put the action after later compute)
        // every bucket is ready when the action is reached.
        if (plan_.overlap_grad_reduce && rank.compute_free <= pass.end) {
          for (std::size_t j = 0; j < buckets; ++j) {
            ready[j] = pass.start + (pass.end - pass.start) * static_cast<double>(j + 1) /
                                        static_cast<double>(buckets);
          }
        }
        post(index, action.stage, false, ready, rank.compute_free);
        break;
      }
      case ActionType::unshard:
        rank.stage_ready[static_cast<std::size_t>(action.stage)] = kNotYet;
        change_memory(rank, rank.compute_free, stage->unshard_bytes);
        post(index, action.stage, true, {rank.compute_free}, rank.compute_free);
        break;
      case ActionType::reshard:
        change_memory(rank, rank.compute_free, -stage->unshard_bytes);
        break;
      case ActionType::tied_embedding_grad:
        return arrive(index, fmt::format("tied {}", rank.replica), 2);
      case ActionType::optimizer_step:
        return arrive(index, "step", ranks_.size());
    }
    ++rank.next;
    return true;
  }

  void post(std::size_t index, int stage, bool unshard, const std::vector<double>& ready,
            double waited) {
    RankState& rank = ranks_[index];
    DpGroup& group = groups_[static_cast<std::size_t>(rank.dp_group)];
    const std::size_t k = rank.dp_posts++;
    if (group.queue.size() <= k) {
      group.queue.push_back({stage, unshard, std::vector<double>(ready.size(), 0.0), 0});
    }
    PendingCollective& pending = group.queue[k];
    for (std::size_t j = 0; j < ready.size(); ++j) {
      pending.ready[j] = std::max(pending.ready[j], ready[j]);
    }
    pending.waited = std::max(pending.waited, waited);
    ++pending.posted;
    while (group.resolved < group.queue.size() &&
           group.queue[group.resolved].posted == group.members.size()) {
      resolve(group, group.queue[group.resolved++]);
    }
  }

  void resolve(DpGroup& group, const PendingCollective& pending) {
    const costmodels::StageCosts& stage = costs_.stages[static_cast<std::size_t>(pending.stage)];
    // A gradient bucket's all-reduce advances only by the communicator's progress share p while
    // its members compute (Open MPI without a progress thread: near 0, inside MPI calls only);
    // the rest runs once they wait. NCCL and every preset: p = 1, all of it beside the compute.
    const double progress =
        pending.unshard ? 1.0 : plan_.cluster.communicator_progress_during_compute.value_or(1.0);
    for (std::size_t j = 0; j < pending.ready.size(); ++j) {
      const double duration = pending.unshard ? stage.unshard_s : stage.gradient_buckets_s[j];
      const double start = std::max(group.free, pending.ready[j]);
      group.free = start + progress * duration;
      group.busy.push_back({start, group.free});
      if (progress < 1) {
        const double rest_start = std::max(group.free, pending.waited);
        group.free = rest_start + (1 - progress) * duration;
        group.busy.push_back({rest_start, group.free});
      }
      for (std::size_t member : group.members) {
        RankState& rank = ranks_[member];
        if (pending.unshard) rank.stage_ready[static_cast<std::size_t>(pending.stage)] = group.free;
        record(rank, Stream::data_parallel,
               pending.unshard ? fmt::format("UNSHARD {}", pending.stage)
                               : fmt::format("REDUCE_GRAD {} bucket {}", pending.stage, j),
               start, group.free);
      }
    }
  }

  // A rendezvous: returns true (progress) on arrival; the last to arrive releases everyone.
  bool arrive(std::size_t index, const std::string& key, std::size_t participants) {
    Rendezvous& meeting = rendezvous_[key];
    meeting.arrived.push_back(index);
    ranks_[index].waiting = true;
    if (meeting.arrived.size() < participants) return true;
    const bool step = key == "step";
    double start = 0;
    std::vector<double> ready(meeting.arrived.size());
    for (std::size_t i = 0; i < meeting.arrived.size(); ++i) {
      RankState& rank = ranks_[meeting.arrived[i]];
      ready[i] = rank.compute_free;
      if (step) {
        const DpGroup& group = groups_[static_cast<std::size_t>(rank.dp_group)];
        const double slowdown =
            track_overlap_ ? costs_.dp_overlap_slowdown * overlap_s(rank.compute_busy, group.busy)
                           : 0.0;
        const double with_slowdown = rank.compute_free + slowdown;
        const double exposed = std::max(0.0, group.free - with_slowdown);
        rank.time.dp_comm_s += slowdown + exposed;
        ready[i] = std::max({with_slowdown, group.free, rank.send_free});
      }
      start = std::max(start, ready[i]);
    }
    for (std::size_t i = 0; i < meeting.arrived.size(); ++i) {
      RankState& rank = ranks_[meeting.arrived[i]];
      const Action& action = (*rank.actions)[rank.next];
      const double duration = step ? costs_.optimizer_step_s[static_cast<std::size_t>(rank.pipe)]
                                   : costs_.tied_embedding_grad_s;
      (step ? rank.time.optimizer_s : rank.time.pp_comm_s) += duration;
      rank.compute_free = start + duration;
      record(rank, step ? Stream::compute : Stream::data_parallel, schedule::to_string(action),
             start, rank.compute_free);
      rank.waiting = false;
      ++rank.next;
    }
    meeting.arrived.clear();
    return true;
  }

  SimulationResult result() {
    SimulationResult result;
    for (const RankState& rank : ranks_) {
      result.step_time_s = std::max(result.step_time_s, rank.compute_free);
    }
    const std::size_t pp = static_cast<std::size_t>(schedule_.pp);
    result.breakdown.resize(pp);
    result.memory.resize(pp);
    result.peak_micro_batches_in_flight.resize(pp);
    for (RankState& rank : ranks_) {
      if (rank.replica != 0) continue;
      const std::size_t pipe = static_cast<std::size_t>(rank.pipe);
      TimeBreakdown& time = rank.time;
      time.bubble_s = 0;
      time.bubble_s = std::max(0.0, result.step_time_s - time.sum());
      result.breakdown[pipe] = time;
      const costmodels::RankStateMemory& state = costs_.rank_states[pipe];
      RankMemory& memory = result.memory[pipe];
      memory.weights_bytes = state.weights_bytes;
      memory.gradients_bytes = state.gradients_bytes;
      memory.optimizer_bytes = state.optimizer_bytes;
      memory.communicator_bytes = state.communicator_bytes;
      memory.activations_peak_bytes = rank.memory_peak;
      memory.peak_bytes = state.total() + rank.memory_peak;
      memory.capacity_bytes = costs_.capacity_bytes;
      result.peak_micro_batches_in_flight[pipe] = rank.in_flight_peak;
      result.bubble_fraction += time.bubble_s / result.step_time_s / static_cast<double>(pp);
    }
    result.simulated_ranks = static_cast<std::int64_t>(ranks_.size());
    result.timeline = std::move(timeline_);
    return result;
  }

  const schemas::Plan& plan_;
  const schedule::PipelineSchedule& schedule_;
  const costmodels::PlanCosts& costs_;
  const SimulationOptions& options_;
  std::size_t stages_ = 0;
  std::size_t micro_batches_ = 0;
  std::int64_t replicas_ = 1;
  bool track_overlap_ = false;
  bool sends_block_compute_ = false;
  std::vector<RankState> ranks_;
  std::vector<DpGroup> groups_;
  std::vector<double> forward_end_;
  std::vector<double> input_grad_end_;
  std::vector<Arrival> forward_arrival_;
  std::vector<Arrival> backward_arrival_;
  std::map<std::string, Rendezvous> rendezvous_;
  std::int64_t next_flow_ = 0;
  Timeline timeline_;
};

}  // namespace

double TimeBreakdown::sum() const {
  return compute_s + recompute_s + tp_comm_s + cp_comm_s + ep_comm_s + host_issue_s + pp_comm_s +
         dp_comm_s + optimizer_s + bubble_s;
}

SimulationResult simulate(const schemas::Plan& plan, const schedule::PipelineSchedule& schedule,
                          const costmodels::PlanCosts& costs, const SimulationOptions& options) {
  return Engine(plan, schedule, costs, options).run();
}

}  // namespace strata::simulator
