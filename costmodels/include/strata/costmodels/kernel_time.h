// Time of one GPU kernel from its size: GEMMs as a roofline with an achieved-efficiency curve and
// wave quantization, and memory-bound kernels as bytes over achievable HBM bandwidth. Every other
// compute cost (layers, embedding, LM head, optimizer) is built from these two and attention
// (attention_time.h).
#pragma once

#include <cstdint>
#include <vector>

#include "strata/schemas/cluster_config.h"
#include "strata/schemas/dtype.h"

namespace strata::costmodels {

// Piecewise-linear interpolation of an efficiency curve in log(size), clamped at both ends.
// An empty curve means 1 (the peak is reached).
double interpolate_efficiency(const std::vector<schemas::EfficiencyPoint>& curve, double size);

// Peak dense TFLOP/s for `dtype`; a GPU without that dtype (fp8 on an A100) runs it at the
// 16-bit rate, as Transformer Engine falls back to bf16 there.
double peak_tflops(const schemas::GpuProfile& gpu, schemas::Dtype dtype);

// C[m×n] = A[m×k]·B[k×n] in `dtype`: FLOPs 2mnk. Time is the largest of
//   compute: 2mnk / (peak · efficiency(2mnk) · alignment · wave_utilisation)
//   memory:  (mk + kn + mn)·bytes / (HBM bandwidth · HBM efficiency)
//   launch:  the GPU's kernel_launch_us
// where wave_utilisation = tiles / (waves · SMs) with 128×128 output tiles (cuBLAS's common
// choice for large bf16 GEMMs): 132 SMs and 133 tiles take two waves, so half the second is idle,
// and alignment is the GPU's unaligned_gemm_efficiency where a dimension is not a multiple of 16
// bytes of elements (gemm_dimensions_aligned), else 1. A GPU with `gemm_tiles` prices the
// compute by its output tiles instead of the curve:
//   fixed_us + waves · 2·rows·columns·(k + k_overhead) / (peak · efficiency · factors / SMs)
// with waves = ⌈tiles / SMs⌉ for the orientation of rows × columns tiles that needs fewer, and
// the same dtype and alignment factors — a small GEMM is slow because it fills few SMs and its
// tiles' prologues and epilogues weigh against a short k, not because of its FLOP count.
double gemm_time_s(const schemas::GpuProfile& gpu, schemas::Dtype dtype, double m, double n,
                   double k);
double gemm_flops(double m, double n, double k);
// Whether m, n and k are multiples of 16 bytes' worth of `dtype` elements (8 in bf16): what the
// tensor-core kernels' vectorised loads need. An unpadded vocabulary of 50,257 is not.
bool gemm_dimensions_aligned(schemas::Dtype dtype, double m, double n, double k);

// Bytes per element a Transformer Engine cast-transpose into a quantised GEMM format moves: it
// reads the 16-bit tensor once and writes it and its transpose in `dtype`, block scales included
// (4 for fp8, 4.0625 for mxfp8, 3.125 for nvfp4). Activations, output gradients and weights alike.
double cast_transpose_bytes_per_element(schemas::Dtype dtype);

// `kernels` kernels limited by memory traffic: bytes read plus written over the achieved HBM
// bandwidth, and no less than the kernels' launches (kernel_launch_s). 0 kernels: bytes added to
// another kernel (an epilogue), which launches nothing.
double memory_bound_time_s(const schemas::GpuProfile& gpu, double bytes, double kernels = 1);

// An element-wise kernel that also evaluates `special_functions` exponentials or tanh (GELU,
// SwiGLU's sigmoid, the loss's softmax): the slower of its memory traffic and those evaluations
// at the GPU's special_function_tops (absent: free). On a GPU the memory side is the longer; on a
// CPU core the evaluations are (a vectorised exp costs several cycles per element), which is
// what `strata profile` measures.
double elementwise_time_s(const schemas::GpuProfile& gpu, double bytes, double special_functions,
                          double kernels = 1);

// Generating `numbers` counter-based random numbers (dropout's keep decisions) at the GPU's
// random_number_tops, beyond the bytes of the kernel they are fused into (absent: free — a GPU
// computes them under the kernel's memory traffic; a CPU core spends tens of cycles on each).
double random_number_time_s(const schemas::GpuProfile& gpu, double numbers);

// The shortest `kernels` kernels can take: their launches (the GPU's kernel_launch_us each).
double kernel_launch_s(const schemas::GpuProfile& gpu, double kernels = 1);

}  // namespace strata::costmodels
