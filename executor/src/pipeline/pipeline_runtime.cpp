#include "strata/executor/pipeline/pipeline_runtime.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "strata/executor/data/sample_ownership.h"
#include "strata/executor/distributed/stall_watchdog.h"
#include "strata/executor/distributed/typed_collectives.h"
#include "strata/schedule/plan_program_check.h"
#include "strata/schedule/schedule_check.h"
#include "strata/schemas/input_error.h"

namespace strata::executor {

using schedule::Action;
using schedule::ActionType;

namespace {

bool gives_gradients(ActionType type) {
  return type == ActionType::backward || type == ActionType::backward_weight;
}

}  // namespace

PipelineRuntime::PipelineRuntime(const schemas::Plan& plan, const std::string& plan_source,
                                 schedule::PipelineSchedule schedule, Transformer& model,
                                 ShardedOptimizer& optimizer, ProcessGroups& groups,
                                 const BatchSampler& sampler)
    : plan_(plan),
      schedule_(std::move(schedule)),
      model_(model),
      optimizer_(optimizer),
      groups_(groups),
      sampler_(sampler),
      pass_through_(pass_through_tensors(plan.model)),
      num_stages_(schedule_.num_stages()) {
  const int pp = static_cast<int>(plan_.mesh.pp);
  const int pp_rank = static_cast<int>(groups_.coordinate(schemas::MeshAxis::pp));
  STRATA_CHECK(groups_.pipeline_parallel().rank() == pp_rank && schedule_.pp == pp,
               "pipeline group rank {} at pipeline coordinate {}",
               groups_.pipeline_parallel().rank(), pp_rank);
  STRATA_CHECK(model_.stage_count() == static_cast<int>(plan_.mesh.vpp),
               "a model of {} stages on a rank of {} chunks", model_.stage_count(), plan_.mesh.vpp);
  // The plan's admission rule, which build_plan_schedule applied to a custom file already: a
  // list handed here another way is held to the same rule.
  schedule::check_plan_program(schedule_, plan_, plan_source);
  actions_ = schedule_.ranks[static_cast<std::size_t>(pp_rank)];
  for (const Action& action : actions_) {
    switch (action.type) {
      case ActionType::forward:
      case ActionType::send_forward:
      case ActionType::recv_forward:
      case ActionType::unshard:
      case ActionType::reshard:
        forward_actions_.push_back(action);
        break;
      default:
        break;
    }
  }
  reading_ = &sampler_;
  local_seq_ = plan_.batch.seq_length / model_.context_parallel().size();
  local_tokens_ = model_.tensor_parallel().local_tokens(plan_.batch.micro_batch_size * local_seq_);
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  last_gradient_action_.assign(static_cast<std::size_t>(model_.stage_count()), kNone);
  for (std::size_t i = 0; i < actions_.size(); ++i) {
    if (gives_gradients(actions_[i].type)) {
      last_gradient_action_[static_cast<std::size_t>(chunk_of(actions_[i].stage))] = i;
    }
  }
  pool_.resize(static_cast<std::size_t>(model_.stage_count()));
  free_.resize(static_cast<std::size_t>(model_.stage_count()));
  ids_ = Tensor::zeros({plan_.batch.micro_batch_size, local_seq_}, ScalarType::int32);
  targets_ = Tensor::zeros(ids_.shape(), ScalarType::int32);
  const bool whole_sequences = !model_.context_parallel().active();
  const Shape whole_shape{plan_.batch.micro_batch_size, plan_.batch.seq_length};
  whole_ids_ = whole_sequences ? ids_ : Tensor::zeros(whole_shape, ScalarType::int32);
  whole_targets_ = whole_sequences ? targets_ : Tensor::zeros(whole_shape, ScalarType::int32);
  // With MTP the labels stack the targets and the tokens further ahead, rolled over whole
  // sequences (then each cp rank takes its share of every plane).
  const std::int64_t depths = model_.config().mtp_modules();
  if (depths > 0) {
    const std::int64_t rows = (1 + depths) * plan_.batch.micro_batch_size;
    labels_ = Tensor::zeros({rows, local_seq_}, ScalarType::int32);
    whole_labels_ = whole_sequences
                        ? labels_
                        : Tensor::zeros({rows, plan_.batch.seq_length}, ScalarType::int32);
  } else {
    labels_ = targets_;
  }
  device_ids_ = model_.device() == Device::cpu ? ids_ : ids_.to(model_.device());
}

std::int64_t PipelineRuntime::first_sample(int micro_batch) const {
  return first_sample_of(plan_.batch, plan_.mesh.dp, groups_.coordinate(schemas::MeshAxis::dp),
                         micro_batch);
}

DropoutContext PipelineRuntime::dropout_of(const PipelineStep& step, int micro_batch) const {
  return DropoutContext{step.seed, static_cast<std::uint64_t>(step.step),
                        first_sample(micro_batch) * plan_.batch.seq_length, !evaluating_};
}

StageActivations* PipelineRuntime::take_activations(int chunk) {
  // Retired micro-batches whose sends have completed give their buffers back.
  for (auto it = draining_.begin(); it != draining_.end();) {
    const bool done =
        std::all_of(it->sends.begin(), it->sends.end(),
                    [](CommunicationRequest& request) { return request.completed(); });
    if (!done) {
      ++it;
      continue;
    }
    give_back_activations(*it);
    it = draining_.erase(it);
  }
  std::vector<StageActivations*>& free = free_[static_cast<std::size_t>(chunk)];
  if (!free.empty()) {
    StageActivations* activations = free.back();
    free.pop_back();
    return activations;
  }
  pool_[static_cast<std::size_t>(chunk)].push_back(std::make_unique<StageActivations>());
  return pool_[static_cast<std::size_t>(chunk)].back().get();
}

void PipelineRuntime::retire_if_done(const Key& key) {
  auto found = in_flight_.find(key);
  if (found == in_flight_.end()) return;
  InFlight& flight = found->second;
  const bool sent_upstream = key.first == 0 || flight.sent_upstream;
  if (!flight.backward_done || flight.weight_pending || !sent_upstream) return;
  // After its backward a micro-batch's activations are garbage but for the gradient on its way
  // upstream: that tensor leaves the set with its send, and the set is free for the next
  // forward at once. Waiting for the send instead kept a whole second set alive on the last
  // stage of 1F1B (its SEND_B completes only when the stage before receives), which measured
  // twice the activation memory of one micro-batch in flight.
  if (flight.activations != nullptr) {
    flight.outgoing.push_back(std::move(flight.activations->d_input));
    flight.activations->d_input = Tensor();
    give_back_activations(flight);
  }
  draining_.push_back(std::move(flight));
  in_flight_.erase(found);
}

void PipelineRuntime::retire(const Key& key) {
  auto found = in_flight_.find(key);
  if (found == in_flight_.end()) return;
  draining_.push_back(std::move(found->second));
  in_flight_.erase(found);
}

std::vector<std::size_t> PipelineRuntime::activation_sets() const {
  std::vector<std::size_t> made;
  for (const auto& chunk : pool_) made.push_back(chunk.size());
  return made;
}

void PipelineRuntime::give_back_activations(InFlight& flight) {
  if (flight.activations == nullptr) return;
  free_[static_cast<std::size_t>(flight.activations->chunk)].push_back(flight.activations);
  flight.activations = nullptr;
}

void PipelineRuntime::drain() {
  for (InFlight& retired : draining_) {
    for (CommunicationRequest& request : retired.sends) request.wait();
    give_back_activations(retired);
  }
  draining_.clear();
}

void PipelineRuntime::forward(const Action& action, const PipelineStep& step) {
  const Key key{action.stage, action.micro_batch};
  const int chunk = chunk_of(action.stage);
  const schemas::PipelineStage& stage = model_.stage(chunk);
  InFlight& flight = in_flight_[key];
  STRATA_CHECK(flight.activations == nullptr, "{} runs twice in one step",
               schedule::to_string(action));
  flight.activations = take_activations(chunk);
  const Tensor* input = nullptr;
  const Tensor* targets = nullptr;
  if (stage.embedding) {
    reading_->fill(step.step, first_sample(action.micro_batch), whole_ids_, whole_targets_);
    const std::int64_t depths = model_.config().mtp_modules();
    if (depths > 0) stack_future_labels(whole_targets_, depths, whole_labels_);
    if (model_.context_parallel().active()) {
      model_.context_parallel().take_local_tokens(whole_ids_, ids_);
      model_.context_parallel().take_local_tokens(depths > 0 ? whole_labels_ : whole_targets_,
                                                  labels_);
    }
    if (device_ids_.raw() != ids_.raw()) device_ids_.copy_from(ids_);
    input = &device_ids_;
    // The pass-through tensors start here (the data loader made them).
    flight.received.assign(1, Tensor());
    for (const PassThroughTensor& tensor : pass_through_) {
      STRATA_CHECK(tensor.name == "targets", "no producer for pass-through tensor {}", tensor.name);
      flight.received.push_back(labels_.to(Device::cpu));
    }
  } else {
    STRATA_CHECK(flight.received.size() == 1 + pass_through_.size(), "{} runs before its RECV_F",
                 schedule::to_string(action));
    input = &flight.received.front();
  }
  for (std::size_t i = 0; i < pass_through_.size(); ++i) {
    if (pass_through_[i].name == "targets") targets = &flight.received[1 + i];
  }
  const double loss = model_.stage_forward(
      chunk, plan_.batch.micro_batch_size, local_seq_, *input, stage.lm_head ? targets : nullptr,
      dropout_of(step, action.micro_batch), *flight.activations);
  if (stage.lm_head) loss_sum_ += loss;
  if (evaluating_ && stage.lm_head) retire(key);  // no backward, nothing to send
}

void PipelineRuntime::backward(const Action& action, const PipelineStep& step) {
  const Key key{action.stage, action.micro_batch};
  auto found = in_flight_.find(key);
  STRATA_CHECK(found != in_flight_.end() && found->second.activations != nullptr,
               "{} runs before its forward", schedule::to_string(action));
  InFlight& flight = found->second;
  const int chunk = chunk_of(action.stage);
  const schemas::PipelineStage& stage = model_.stage(chunk);
  // The forward's sends read the stage's output, which a recomputing backward writes again.
  for (CommunicationRequest& request : flight.sends) request.wait();
  flight.sends.clear();
  const bool split = action.type == ActionType::backward_input;
  if (split) {
    // The units' gradients stay bound from I to W (ZeRO-2/3 reduce once W is done).
    for (std::int64_t unit : model_.stage_units(chunk)) optimizer_.acquire_gradients(unit);
  }
  STRATA_CHECK(stage.lm_head || flight.received_gradient.numel() > 0, "{} runs before its RECV_B",
               schedule::to_string(action));
  const double loss_scale =
      1.0 / static_cast<double>(plan_.batch.global_batch_size * plan_.batch.seq_length);
  model_.stage_backward(chunk, stage.lm_head ? nullptr : &flight.received_gradient, loss_scale,
                        dropout_of(step, action.micro_batch), *flight.activations, split);
  flight.received_gradient = Tensor();  // consumed; the slot now waits for its SEND_B
  flight.weight_pending = split;
  flight.backward_done = true;
  if (action.stage == 0) retire_if_done(key);
}

void PipelineRuntime::send(const Action& action) {
  const Key key{action.stage, action.micro_batch};
  auto found = in_flight_.find(key);
  STRATA_CHECK(found != in_flight_.end(), "{} sends what was never computed",
               schedule::to_string(action));
  InFlight& flight = found->second;
  Communicator& pipeline = groups_.pipeline_parallel();
  const int tensors = static_cast<int>(1 + pass_through_.size());
  if (action.type == ActionType::send_forward) {
    const int peer = peer_of(action.stage + 1);
    const auto tag = [&](int tensor) {
      return stage_message_tag(false, action.stage + 1, num_stages_, action.micro_batch, tensor,
                               tensors);
    };
    flight.sends.push_back(pipeline.send_async(flight.activations->residuals.back(), peer, tag(0)));
    for (std::size_t i = 0; i < pass_through_.size(); ++i) {
      flight.sends.push_back(
          pipeline.send_async(flight.received[1 + i], peer, tag(static_cast<int>(1 + i))));
    }
    if (evaluating_) retire(key);  // no backward: done once its sends are
    return;
  }
  STRATA_CHECK(flight.backward_done, "{} before its backward", schedule::to_string(action));
  flight.sent_upstream = true;
  flight.sends.push_back(pipeline.send_async(
      flight.activations->d_input, peer_of(action.stage - 1),
      stage_message_tag(true, action.stage - 1, num_stages_, action.micro_batch, 0, tensors)));
  retire_if_done(key);
}

void PipelineRuntime::receive(const Action& action) {
  const Key key{action.stage, action.micro_batch};
  Communicator& pipeline = groups_.pipeline_parallel();
  const int tensors = static_cast<int>(1 + pass_through_.size());
  const ScalarType type = model_.scalar_type();
  const Shape hidden_shape{local_tokens_, model_.config().hidden_size};
  std::vector<CommunicationRequest> receives;
  if (action.type == ActionType::recv_forward) {
    InFlight& flight = in_flight_[key];
    STRATA_CHECK(flight.received.empty(), "{} received twice", schedule::to_string(action));
    const int peer = peer_of(action.stage - 1);
    flight.received.push_back(Tensor::zeros(hidden_shape, type, model_.device()));
    for (const PassThroughTensor& tensor : pass_through_) {
      flight.received.push_back(
          Tensor::zeros({tensor.planes * plan_.batch.micro_batch_size, local_seq_}, tensor.type));
    }
    for (int i = 0; i < tensors; ++i) {
      receives.push_back(pipeline.receive_async(
          flight.received[static_cast<std::size_t>(i)], peer,
          stage_message_tag(false, action.stage, num_stages_, action.micro_batch, i, tensors)));
    }
  } else {
    auto found = in_flight_.find(key);
    STRATA_CHECK(found != in_flight_.end(), "{} for a micro-batch never run forward",
                 schedule::to_string(action));
    InFlight& flight = found->second;
    flight.received_gradient = Tensor::zeros(hidden_shape, type, model_.device());
    receives.push_back(pipeline.receive_async(
        flight.received_gradient, peer_of(action.stage + 1),
        stage_message_tag(true, action.stage, num_stages_, action.micro_batch, 0, tensors)));
  }
  for (CommunicationRequest& request : receives) request.wait();
}

void PipelineRuntime::execute(const Action& action, const PipelineStep& step) {
  switch (action.type) {
    case ActionType::forward:
      forward(action, step);
      return;
    case ActionType::backward:
    case ActionType::backward_input:
      backward(action, step);
      return;
    case ActionType::backward_weight: {
      const Key key{action.stage, action.micro_batch};
      auto found = in_flight_.find(key);
      STRATA_CHECK(found != in_flight_.end() && found->second.weight_pending,
                   "{} runs before its I", schedule::to_string(action));
      model_.stage_backward_weight(*found->second.activations);
      const std::vector<std::int64_t> units = model_.stage_units(chunk_of(action.stage));
      for (auto unit = units.rbegin(); unit != units.rend(); ++unit) {
        optimizer_.release_gradients(*unit);
      }
      found->second.weight_pending = false;
      retire_if_done(key);
      return;
    }
    case ActionType::send_forward:
    case ActionType::send_backward:
      send(action);
      return;
    case ActionType::recv_forward:
    case ActionType::recv_backward:
      receive(action);
      return;
    case ActionType::unshard:
      for (std::int64_t unit : model_.stage_units(chunk_of(action.stage))) {
        optimizer_.acquire_values(unit);
      }
      return;
    case ActionType::reshard: {
      const std::vector<std::int64_t> units = model_.stage_units(chunk_of(action.stage));
      for (auto unit = units.rbegin(); unit != units.rend(); ++unit) {
        optimizer_.release_values(*unit);
      }
      return;
    }
    case ActionType::reduce_grad:
      optimizer_.reduce_units(model_.stage_units(chunk_of(action.stage)));
      return;
    case ActionType::tied_embedding_grad:
      optimizer_.tie_embedding_gradients(groups_.embedding());
      return;
    case ActionType::optimizer_step: {
      STRATA_CHECK(in_flight_.empty(), "STEP with {} micro-batch stage(s) unfinished",
                   in_flight_.size());
      drain();
      optimizer_.finish_gradients();
      gradient_norm_ =
          optimizer_.step(step.learning_rate, step.step, step.adamw, step.max_gradient_norm);
      balance_expert_biases();
      return;
    }
  }
}

void PipelineRuntime::balance_expert_biases() {
  const double rate = model_.config().moe ? model_.config().moe->router.expert_bias_update_rate : 0;
  for (Transformer::ExpertBiasLoads& layer : model_.take_expert_bias_loads()) {
    // Every token of the step was routed by one rank of this stage: the tp ranks under sequence
    // parallelism each their shard, the dp × cp ranks each their micro-batches' chunks.
    std::vector<double> loads = std::move(layer.loads);
    if (model_.tensor_parallel().shards_tokens()) {
      loads = all_reduce_vector(groups_.tensor_parallel(), std::move(loads), ReduceOp::sum);
    }
    if (groups_.gradient_reduction().size() > 1) {
      loads = all_reduce_vector(groups_.gradient_reduction(), std::move(loads), ReduceOp::sum);
    }
    optimizer_.add_to_parameter(*layer.bias, expert_bias_step(loads, rate));
  }
}

PipelineStepResult PipelineRuntime::run_step(const PipelineStep& step) {
  PipelineStepResult result;
  loss_sum_ = 0;
  gradient_norm_ = 0;
  optimizer_.begin_step();
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (std::size_t i = 0; i < actions_.size(); ++i) {
    const Action& action = actions_[i];
    if (action.stage >= 0 && plan_.overlap_grad_reduce &&
        last_gradient_action_[static_cast<std::size_t>(chunk_of(action.stage))] == i) {
      optimizer_.arm_reductions(model_.stage_units(chunk_of(action.stage)));
    }
    const double begin = step.record_timeline ? seconds_since_start() : 0;
    const StallContext stall_context(
        fmt::format("step {}, action {}", step.step + 1, schedule::to_string(action)));
    execute(action, step);
    if (step.record_timeline) result.executed.push_back({action, begin, seconds_since_start()});
  }
  // The loss lives on the last stage: a sum over the pipeline gives it to every stage.
  result.loss_sum = all_reduce_value(groups_.pipeline_parallel(), loss_sum_, ReduceOp::sum);
  result.gradient_norm = gradient_norm_;
  return result;
}

double PipelineRuntime::evaluate(const BatchSampler& validation, std::int64_t batch) {
  loss_sum_ = 0;
  reading_ = &validation;
  evaluating_ = true;
  // Back to training whatever happens: a throw here ends the job, but not the object.
  struct Restore {
    PipelineRuntime& runtime;
    ~Restore() {
      runtime.reading_ = &runtime.sampler_;
      runtime.evaluating_ = false;
    }
  } restore{*this};
  PipelineStep step;
  step.step = batch;
  for (const Action& action : forward_actions_) execute(action, step);
  STRATA_CHECK(in_flight_.empty(), "evaluation left {} micro-batch stage(s) unfinished",
               in_flight_.size());
  drain();
  return all_reduce_value(groups_.pipeline_parallel(), loss_sum_, ReduceOp::sum);
}

}  // namespace strata::executor
