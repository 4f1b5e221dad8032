// PipelineRuntime: one training step of any plan, run by executing this rank's action list from
// schedule/ — the same lists the simulator times — one action after another:
//
//   F, B       the forward / full backward of one micro-batch on one of this rank's stages
//   I, W       a split backward (zero-bubble schedules): I computes the input gradient (what goes
//              upstream), W the layers' weight gradients, kept until the W action
//   SEND_*     non-blocking sends of a micro-batch's activations (with the pass-through tensors)
//              or input gradient; their buffers stay alive until the send completes
//   RECV_*     receives, which wait for their send (the IR's contract, proved by check_schedule)
//   REDUCE_GRAD  the data-parallel reduction of the stage's gradients (asynchronous at ZeRO-0)
//   TIED_GRAD  the all-reduce of a tied word embedding's gradient over the first and last stage
//   UNSHARD / RESHARD  ZeRO-3: gather the stage's parameters and hold them / let them go
//   STEP       wait for the sends, finish the reductions, clip and update (the optimizer step)
//
// GPipe, 1F1B, interleaved 1F1B, ZB-H1 and custom CSV schedules differ only in their lists: no
// schedule has code here. Every tp, cp and dp replica of a pipeline rank runs the same list. A
// plan without a pipeline is a list of one stage (F and B per micro-batch, its reductions, STEP),
// one device a mesh of one rank: the trainer runs every plan here, as the simulator does.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "strata/executor/data/batch_sampler.h"
#include "strata/executor/distributed/process_groups.h"
#include "strata/executor/model/transformer.h"
#include "strata/executor/optim/adamw.h"
#include "strata/executor/pipeline/executed_action.h"
#include "strata/executor/pipeline/stage_message.h"
#include "strata/executor/zero/sharded_optimizer.h"
#include "strata/schedule/pipeline_schedule.h"
#include "strata/schemas/plan.h"

namespace strata::executor {

struct PipelineStepResult {
  double loss_sum = 0;  // Σ micro-batch mean losses of this pipeline (its last stage's)
  double gradient_norm = 0;
  std::vector<ExecutedAction> executed;  // filled when the step records its timeline
};

struct PipelineStep {
  std::int64_t step = 0;  // 0-based: the optimizer steps done before this one
  std::uint64_t seed = 0;
  double learning_rate = 0;
  AdamWConfig adamw;
  double max_gradient_norm = 0;
  bool record_timeline = false;
};

class PipelineRuntime {
 public:
  // `model` holds this rank's stages (TransformerOptions::stages from the plan); `optimizer`
  // runs with ShardingOptions::pipeline. Checks the schedule (check_runtime_program).
  PipelineRuntime(const schemas::Plan& plan, const std::string& plan_source,
                  schedule::PipelineSchedule schedule, Transformer& model,
                  ShardedOptimizer& optimizer, ProcessGroups& groups, const BatchSampler& sampler);

  PipelineStepResult run_step(const PipelineStep& step);
  // The forward of validation batch `batch` of `validation` without dropout: this rank's F,
  // SEND_F, RECV_F, UNSHARD and RESHARD actions in their list order, the rest left out — a
  // program that completes wherever the whole list does (each receive's send precedes it in any
  // order the whole list runs in). Returns the Σ micro-batch mean losses, on every stage.
  double evaluate(const BatchSampler& validation, std::int64_t batch);
  const schedule::PipelineSchedule& schedule() const { return schedule_; }
  const std::vector<schedule::Action>& actions() const { return actions_; }
  // Per model chunk of this rank, the activation sets made so far (each is reused once its
  // micro-batch retires).
  std::vector<std::size_t> activation_sets() const;

 private:
  // One micro-batch on one stage, from its forward until its sends are done.
  struct InFlight {
    StageActivations* activations = nullptr;
    std::vector<Tensor> received;  // RECV_F: activation, then the pass-through tensors
    Tensor received_gradient;      // RECV_B
    std::vector<CommunicationRequest> sends;
    std::vector<Tensor> outgoing;  // what the sends read once the activations are given back
    bool backward_done = false;    // B or I ran
    bool weight_pending = false;   // I ran, W has not
    bool sent_upstream = false;    // SEND_B ran (stage 0 has nothing to send)
  };
  using Key = std::pair<int, int>;  // (stage, micro-batch)

  void execute(const schedule::Action& action, const PipelineStep& step);
  void forward(const schedule::Action& action, const PipelineStep& step);
  void backward(const schedule::Action& action, const PipelineStep& step);
  void send(const schedule::Action& action);
  void receive(const schedule::Action& action);
  void retire_if_done(const Key& key);
  // Retires `key` whatever it has left (evaluation runs no backward).
  void retire(const Key& key);
  // Waits for every retired micro-batch's sends and gives its buffers back.
  void drain();
  // After the optimizer's update: auxiliary-loss-free balancing of the MoE layers this rank holds
  // (Transformer::take_expert_bias_loads), every rank of a stage taking the same step.
  void balance_expert_biases();
  StageActivations* take_activations(int chunk);
  // Returns the micro-batch's activation set to its chunk's free list (no-op when it has none).
  void give_back_activations(InFlight& flight);
  int chunk_of(int stage) const { return stage / static_cast<int>(plan_.mesh.pp); }
  int peer_of(int stage) const { return stage % static_cast<int>(plan_.mesh.pp); }
  DropoutContext dropout_of(const PipelineStep& step, int micro_batch) const;
  std::int64_t first_sample(int micro_batch) const;

  schemas::Plan plan_;
  schedule::PipelineSchedule schedule_;
  std::vector<schedule::Action> actions_;          // this rank's
  std::vector<schedule::Action> forward_actions_;  // what evaluate() runs of them
  const BatchSampler* reading_ = nullptr;          // the sampler forward() fills from
  bool evaluating_ = false;
  Transformer& model_;
  ShardedOptimizer& optimizer_;
  ProcessGroups& groups_;
  const BatchSampler& sampler_;
  std::vector<PassThroughTensor> pass_through_;
  int num_stages_ = 1;
  std::int64_t local_seq_ = 0;                     // tokens of each sequence on this cp rank
  std::int64_t local_tokens_ = 0;                  // of a micro-batch on this tp and cp rank
  std::vector<std::size_t> last_gradient_action_;  // per chunk: where its reductions are armed
  std::map<Key, InFlight> in_flight_;
  std::vector<std::vector<std::unique_ptr<StageActivations>>> pool_;  // per chunk: all made
  std::vector<std::vector<StageActivations*>> free_;                  // per chunk: free ones
  std::vector<InFlight> draining_;  // retired, with sends still in flight
  Tensor ids_, targets_;  // the first stage's micro-batch: this cp rank's tokens of each sequence
  Tensor whole_ids_, whole_targets_;  // as the sampler reads them (ids_, targets_ without cp)
  // What the last stage's loss reads (targets_ itself without MTP; with D modules the 1 + D label
  // planes, stack_future_labels), and those planes over whole sequences (labels_ without cp).
  Tensor labels_, whole_labels_;
  Tensor device_ids_;  // ids_ on the model's device (ids_ itself on the CPU)
  double loss_sum_ = 0;
  double gradient_norm_ = 0;
};

}  // namespace strata::executor
