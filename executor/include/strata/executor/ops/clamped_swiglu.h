// GPT-OSS's clamped SwiGLU, forward and backward: its experts' gated unit. Both inputs are clamped
// first, which bounds the activations its MXFP4 experts see; the gate's sigmoid has slope α and
// the up projection gains 1:
//   g = min(gate, limit),  u = clamp(up, −limit, limit),  y = (u + 1)·g·σ(α·g)
// (OpenAI's gpt-oss reference and transformers' GptOssExperts; α = 1.702, limit = 7). Used by the
// dense and MoE MLPs through the gated-activation dispatch. CPU backend; the CUDA backend refuses
// the activation by the model's field.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

struct SwigluClamp {
  double limit = 7.0;
  double alpha = 1.702;
};

void clamped_swiglu_forward(const Tensor& gate, const Tensor& up, const SwigluClamp& clamp,
                            Tensor& y);
// Accumulates dgate and dup. A clamp passes the gradient where its input is within its bounds,
// bounds included (torch.clamp's rule), and stops it outside.
void clamped_swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up,
                             const SwigluClamp& clamp, Tensor& dgate, Tensor& dup);

}  // namespace strata::executor
