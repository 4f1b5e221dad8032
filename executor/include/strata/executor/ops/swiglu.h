// SwiGLU gating (Shazeer 2020; Llama's MLP), forward and backward. Used by llama MLPs.
#pragma once

#include "strata/executor/tensor/tensor.h"

namespace strata::executor {

// y = silu(gate)·up elementwise, silu(g) = g·σ(g); gate and up are the two projections of x.
void swiglu_forward(const Tensor& gate, const Tensor& up, Tensor& y);
// Accumulates dgate += dy·up·σ(g)·(1 + g·(1 − σ(g))) and dup += dy·silu(g).
void swiglu_backward(const Tensor& dy, const Tensor& gate, const Tensor& up, Tensor& dgate,
                     Tensor& dup);

}  // namespace strata::executor
