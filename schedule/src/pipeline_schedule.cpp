#include "strata/schedule/pipeline_schedule.h"

#include <algorithm>

namespace strata::schedule {
namespace {

Action compute(ActionType type, int stage, int micro_batch) { return {type, stage, micro_batch}; }

PipelineSchedule empty_schedule(int pp, int vpp, int num_micro_batches) {
  PipelineSchedule schedule{pp, vpp, num_micro_batches, {}};
  schedule.ranks.resize(static_cast<std::size_t>(pp));
  return schedule;
}

}  // namespace

PipelineSchedule gpipe_schedule(int pp, int vpp, int num_micro_batches) {
  PipelineSchedule schedule = empty_schedule(pp, vpp, num_micro_batches);
  for (int rank = 0; rank < pp; ++rank) {
    std::vector<Action>& actions = schedule.ranks[rank];
    for (int chunk = 0; chunk < vpp; ++chunk) {
      for (int mb = 0; mb < num_micro_batches; ++mb) {
        actions.push_back(compute(ActionType::forward, chunk * pp + rank, mb));
      }
    }
    for (int chunk = vpp - 1; chunk >= 0; --chunk) {
      for (int mb = 0; mb < num_micro_batches; ++mb) {
        actions.push_back(compute(ActionType::backward, chunk * pp + rank, mb));
      }
    }
  }
  return schedule;
}

PipelineSchedule one_f_one_b_schedule(int pp, int num_micro_batches) {
  PipelineSchedule schedule = empty_schedule(pp, 1, num_micro_batches);
  for (int rank = 0; rank < pp; ++rank) {
    std::vector<Action>& actions = schedule.ranks[rank];
    const int warmup = std::min(pp - rank - 1, num_micro_batches);
    int next_forward = 0;
    int next_backward = 0;
    for (; next_forward < warmup; ++next_forward) {
      actions.push_back(compute(ActionType::forward, rank, next_forward));
    }
    while (next_forward < num_micro_batches) {
      actions.push_back(compute(ActionType::forward, rank, next_forward++));
      actions.push_back(compute(ActionType::backward, rank, next_backward++));
    }
    while (next_backward < num_micro_batches) {
      actions.push_back(compute(ActionType::backward, rank, next_backward++));
    }
  }
  return schedule;
}

PipelineSchedule interleaved_one_f_one_b_schedule(int pp, int vpp, int num_micro_batches) {
  PipelineSchedule schedule = empty_schedule(pp, vpp, num_micro_batches);
  const int total = num_micro_batches * vpp;
  // Unit k of a rank is (micro-batch, chunk): chunks advance every pp units, micro-batches come
  // in groups of pp. Backwards visit the chunks in reverse.
  auto micro_batch_of = [&](int k) { return (k / (pp * vpp)) * pp + k % pp; };
  auto forward_chunk = [&](int k) { return (k / pp) % vpp; };
  auto backward_chunk = [&](int k) { return vpp - 1 - (k / pp) % vpp; };
  for (int rank = 0; rank < pp; ++rank) {
    std::vector<Action>& actions = schedule.ranks[rank];
    const int warmup = std::min(2 * (pp - rank - 1) + (vpp - 1) * pp, total);
    auto forward = [&](int k) {
      actions.push_back(
          compute(ActionType::forward, forward_chunk(k) * pp + rank, micro_batch_of(k)));
    };
    auto backward = [&](int k) {
      actions.push_back(
          compute(ActionType::backward, backward_chunk(k) * pp + rank, micro_batch_of(k)));
    };
    int next_forward = 0;
    int next_backward = 0;
    for (; next_forward < warmup; ++next_forward) forward(next_forward);
    while (next_forward < total) {
      forward(next_forward++);
      backward(next_backward++);
    }
    while (next_backward < total) backward(next_backward++);
  }
  return schedule;
}

PipelineSchedule zb_h1_schedule(int pp, int num_micro_batches) {
  PipelineSchedule schedule = empty_schedule(pp, 1, num_micro_batches);
  for (int rank = 0; rank < pp; ++rank) {
    std::vector<Action>& actions = schedule.ranks[rank];
    // 1F1B's warm-up, then F and I alternate; rank r runs the weight gradient of micro-batch
    // k − r after the input gradient of k. The last rank thus answers its first p − 1 forwards
    // with input gradients alone, so gradients reach rank 0 (p − 1)·W sooner than in 1F1B, and
    // the deferred W fill the cool-down, where 1F1B idles. In-flight counts stay 1F1B's.
    const int warmup = std::min(pp - rank - 1, num_micro_batches);
    const int deferral = rank;
    int next_forward = 0;
    int next_input = 0;
    int next_weight = 0;
    auto input_then_weight = [&] {
      actions.push_back(compute(ActionType::backward_input, rank, next_input++));
      if (next_input - 1 - next_weight >= deferral) {
        actions.push_back(compute(ActionType::backward_weight, rank, next_weight++));
      }
    };
    for (; next_forward < warmup; ++next_forward) {
      actions.push_back(compute(ActionType::forward, rank, next_forward));
    }
    while (next_forward < num_micro_batches) {
      actions.push_back(compute(ActionType::forward, rank, next_forward++));
      input_then_weight();
    }
    while (next_input < num_micro_batches) input_then_weight();
    while (next_weight < num_micro_batches) {
      actions.push_back(compute(ActionType::backward_weight, rank, next_weight++));
    }
  }
  return schedule;
}

void add_communication(PipelineSchedule& schedule) {
  const int last_stage = schedule.num_stages() - 1;
  for (std::vector<Action>& actions : schedule.ranks) {
    std::vector<Action> with_communication;
    with_communication.reserve(actions.size() * 3);
    for (const Action& action : actions) {
      const bool forward = action.type == ActionType::forward;
      const bool backward = is_backward(action.type);
      if (forward && action.stage > 0) {
        with_communication.push_back({ActionType::recv_forward, action.stage, action.micro_batch});
      }
      if (backward && action.stage < last_stage) {
        with_communication.push_back({ActionType::recv_backward, action.stage, action.micro_batch});
      }
      with_communication.push_back(action);
      if (forward && action.stage < last_stage) {
        with_communication.push_back({ActionType::send_forward, action.stage, action.micro_batch});
      }
      if (backward && action.stage > 0) {
        with_communication.push_back({ActionType::send_backward, action.stage, action.micro_batch});
      }
    }
    actions = std::move(with_communication);
  }
}

void add_step_actions(PipelineSchedule& schedule, const StepActions& step) {
  const int last_stage = schedule.num_stages() - 1;
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  for (int rank = 0; rank < schedule.pp; ++rank) {
    std::vector<Action>& actions = schedule.ranks[rank];
    // Where each stage is first and last computed, and where its last gradient is finished.
    std::vector<std::size_t> first_compute(schedule.num_stages(), kNone);
    std::vector<std::size_t> last_compute(schedule.num_stages(), kNone);
    std::vector<std::size_t> last_gradient(schedule.num_stages(), kNone);
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      if (!is_compute(action.type)) continue;
      if (first_compute[action.stage] == kNone) first_compute[action.stage] = i;
      last_compute[action.stage] = i;
      if (action.type == ActionType::backward || action.type == ActionType::backward_weight) {
        last_gradient[action.stage] = i;
      }
    }
    std::vector<Action> with_step;
    with_step.reserve(actions.size() + 4 * static_cast<std::size_t>(schedule.vpp) + 1);
    std::vector<Action> deferred_reductions;
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action& action = actions[i];
      const bool stage_known = action.stage >= 0 && action.stage <= last_stage;
      if (step.unshard_parameters && stage_known && first_compute[action.stage] == i) {
        with_step.push_back({ActionType::unshard, action.stage, -1});
      }
      with_step.push_back(action);
      if (!stage_known) continue;
      const bool ends_gradients = last_gradient[action.stage] == i;
      const bool ends_use = last_compute[action.stage] == i;
      if (!ends_gradients && !ends_use) continue;
      // The sends that pass this compute's result on go first: a collective placed before them
      // would keep the neighbour waiting for its gradient (and it for the collective).
      while (i + 1 < actions.size() && actions[i + 1].stage == action.stage &&
             actions[i + 1].micro_batch == action.micro_batch &&
             (actions[i + 1].type == ActionType::send_backward ||
              actions[i + 1].type == ActionType::send_forward)) {
        with_step.push_back(actions[++i]);
      }
      if (ends_gradients && step.reduce_gradients) {
        if (step.overlap_gradient_reduction) {
          with_step.push_back({ActionType::reduce_grad, action.stage, -1});
        } else {
          deferred_reductions.push_back({ActionType::reduce_grad, action.stage, -1});
        }
      }
      if (step.unshard_parameters && ends_use)
        with_step.push_back({ActionType::reshard, action.stage, -1});
    }
    // Without overlap, finalize_model_grads reduces every chunk's gradients before the tie.
    with_step.insert(with_step.end(), deferred_reductions.begin(), deferred_reductions.end());
    // The tie is all-reduced once the rank's whole backward is done, as Megatron-LM's
    // finalize_model_grads does: earlier, a rank holding the last stage and a middle stage
    // (interleaving) would wait for the first stage while that one waits for its middle stage.
    if (step.tied_embedding && schedule.pp > 1) {
      for (int stage : {0, last_stage}) {
        if (schedule.rank_of_stage(stage) == rank) {
          with_step.push_back({ActionType::tied_embedding_grad, stage, -1});
        }
      }
    }
    with_step.push_back({ActionType::optimizer_step, -1, -1});
    actions = std::move(with_step);
  }
}

}  // namespace strata::schedule
