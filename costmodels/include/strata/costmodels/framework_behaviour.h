// How each training stack runs a plan, where stacks differ in ways no plan field expresses: one
// struct of booleans per stack (TrainingFramework, schemas/training_framework.h), read by the
// cost models and the simulator — never a per-row constant. Adding a stack is adding a row.
#pragma once

#include "strata/schemas/dtype.h"
#include "strata/schemas/training_framework.h"

namespace strata::costmodels {

// The behaviours the cost models and the simulator read. Strata, Megatron-LM and NeMo
// (Megatron-Core) behave alike in all of them; DeepSpeed's engines differ.
struct FrameworkBehaviour {
  // Pipeline sends carry the whole activation from every tp rank. Megatron splits a replicated
  // activation across tp before the send and gathers it after (or it is already split under
  // sequence parallelism); DeepSpeed's pipeline engine sends the tensor as each rank holds it.
  bool pipeline_sends_whole_activations = false;
  // A pipeline send holds up the sender's next compute until it completes: DeepSpeed's pipeline
  // engine runs its instructions in order with blocking torch.distributed send/recv. Megatron
  // posts non-blocking sends and waits for them only when the buffer is needed again.
  bool pipeline_sends_block_compute = false;
  // Under ZeRO stage 1 in bf16 the gradients are all-reduced whole in fp32 rather than
  // reduce-scattered to their optimizer shards: DeepSpeed's BF16_Optimizer reduces the fp32
  // accumulators with an all-reduce and each rank then updates its own partition.
  bool zero1_bf16_gradients_all_reduced = false;
  // ZeRO-3 without pipelining gathers parameters layer by layer, each layer's all-gather prefetched
  // during the previous layer's compute, again in the backward (reshard after forward), with each
  // layer's gradients reduce-scattered during the backward, every micro-batch: PyTorch FSDP
  // (torchtitan, llm-foundry), DeepSpeed ZeRO-3, Megatron-FSDP. Strata's executor gathers a whole
  // stage before its first use and holds it for the step (the UNSHARD/RESHARD actions of the
  // schedule IR), as every stack does with pipeline parallelism (torchtitan keeps a stage's
  // parameters gathered across micro-batches there).
  bool zero3_gathers_per_layer = false;
  // Strata's executor holds its activations in its own buffers rather than Megatron's: the
  // backward's gradients live in one scratch set that every layer of a rank shares (LayerScratch
  // in executor/src/model/transformer_layer.cpp), not in per-GEMM output gradients, and the LM
  // head keeps its logits in the compute dtype and overwrites them with their gradient (no fp32
  // copy, no separate softmax). Measured against the CPU executor's resident-set growth.
  bool executor_activation_buffers = false;
  // Gradient buckets hold whole parameter units (the embeddings, a layer, the head): Strata's
  // executor closes a bucket at the first unit that brings it to the plan's bucket size, walking
  // back from the head, and under ZeRO-3 every unit is a bucket (layout/gradient_buckets.h).
  // Megatron-Core's DDP fills buckets parameter by parameter, which the cost models price as an
  // even split of a stage's parameters into buckets of the size.
  bool gradient_buckets_close_at_units = false;
  // Kernels and collectives are issued one by one from an eager PyTorch training loop (Python
  // layer code, the dispatcher, autograd), which costs the host the cluster's
  // eager_issue_us_per_kernel each: a pass whose kernels are shorter than that waits for the host
  // (layer_costs.h, PassTime::host_issue_s). Every PyTorch stack here runs eagerly by default;
  // Strata's executor issues from C++, where a launch costs the GPU profile's kernel_launch_us.
  bool issues_kernels_eagerly = false;
  // The loss writes the logits' gradient into the logits in its forward, keeping no fp32 softmax:
  // Megatron-Bridge's models fuse the cross-entropy (cross_entropy_loss_fusion, on by default)
  // with Transformer Engine's kernel, which its performance recipes select
  // (cross_entropy_fusion_impl "te"). Megatron-LM's default keeps the fp32 softmax.
  bool loss_gradient_in_logits = false;
  // The element-wise work a stack runs beyond the fused kernels Megatron-Core with Transformer
  // Engine runs (and Strata's executor): what each costs is in unfused_elementwise.h.
  // torch.autocast over fp32 parameters: every GEMM's weight and bias cast to 16 bits at each
  // forward and their gradients back, the residual stream and the norms in fp32 (a plain PyTorch
  // loop; the Megatron stacks keep 16-bit parameters with fp32 main gradients and copies).
  bool autocast_over_fp32_parameters = false;
  // Each bias's gradient summed over the tokens in a kernel of its own: nn.Linear's backward and
  // Megatron-DeepSpeed's linear layers, bias-GELU and bias-dropout-add; Transformer Engine folds it
  // into the weight-gradient GEMM.
  bool bias_gradients_in_own_kernels = false;
  // One kernel per element-wise op, as eager module code runs them: dropout apart from the
  // residual add, SwiGLU's SiLU apart from its product, q/k/v gradients concatenated into the
  // fused projection's, PyTorch's cross-entropy backward in its own kernels. Megatron-DeepSpeed
  // fuses these with TorchScript (bias_dropout_add, bias_gelu) and apex.
  bool unfused_elementwise = false;
};

FrameworkBehaviour framework_behaviour(schemas::TrainingFramework framework);

// Whether a stack with autocast_over_fp32_parameters runs a plan of `precision` under
// torch.autocast: at a 16-bit precision (bf16, fp16); fp32 is fp32 training, and the quantised
// formats are Transformer Engine's, not autocast's.
constexpr bool autocast_reaches(schemas::Dtype precision) {
  return precision == schemas::Dtype::bf16 || precision == schemas::Dtype::fp16;
}

}  // namespace strata::costmodels
