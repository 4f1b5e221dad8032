// Warp-level tensor-core primitives for sm_80+ (bf16 inputs, fp32 accumulators): ldmatrix loads
// from shared memory, the m16n8k16 MMA, and cp.async copies. Used by the flash-attention kernels.
//
// Fragment layouts of mma.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
// g = lane / 4 (the group) and c = lane % 4 (the thread in the group):
//   A (16×16, row-major)  regs a[0..3], two bf16 each:  a[0] = (g,   2c..2c+1)  a[1] = (g+8, 2c..)
//                                                       a[2] = (g,   2c+8..)    a[3] = (g+8,
//                                                       2c+8..)
//   B (16×8, k×n)         regs b[0..1]:                 b[0] = (k 2c..2c+1, n g) b[1] = (k 2c+8..,
//   n g) C (16×8, fp32)        c[0..3]:                      c[0..1] = (g, 2c..2c+1)  c[2..3] =
//   (g+8, 2c..)
// So two neighbouring C tiles (n 0..7 and 8..15) of one 16-row block are, packed to bf16, exactly
// the A fragment of a 16×16 block: the softmax probabilities feed the next MMA from registers.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace strata::executor::cuda {

struct FragmentA {
  std::uint32_t reg[4];
};
struct FragmentB {
  std::uint32_t reg[2];
};
struct FragmentC {
  float value[4];
};

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// Four 8×8 bf16 matrices; lanes 8i..8i+7 give the row addresses of matrix i (16 bytes each), and
// lane l receives in reg[i] the elements (row l/4, columns 2(l%4), 2(l%4)+1) of matrix i.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&reg)[4], const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
               : "r"(shared_address(row_address)));
}

// The same with each matrix transposed: lane l receives (rows 2(l%4), 2(l%4)+1; column l/4).
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&reg)[4],
                                                  const void* row_address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
               : "r"(shared_address(row_address)));
}

// d = a·b + d.
__device__ __forceinline__ void mma_bf16_16x8x16(FragmentC& d, const FragmentA& a,
                                                 const FragmentB& b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d.value[0]), "+f"(d.value[1]), "+f"(d.value[2]), "+f"(d.value[3])
      : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]));
}

// Two floats as one register of two bf16 (the first in the low half, as the MMA reads them).
__device__ __forceinline__ std::uint32_t pack_bf16x2(float low, float high) {
  const __nv_bfloat162 packed = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const std::uint32_t*>(&packed);
}

// The A fragment of a 16×16 block from shared memory laid out [row][k] with `stride` elements per
// row: matrices (rows 0–7, k 0–7), (rows 8–15, k 0–7), (rows 0–7, k 8–15), (rows 8–15, k 8–15).
__device__ __forceinline__ FragmentA load_a(const __nv_bfloat16* block, int stride, int lane) {
  FragmentA a;
  ldmatrix_x4(a.reg, block + (lane % 16) * stride + (lane / 16) * 8);
  return a;
}

// The A fragment of a 16×16 block stored transposed, [k][row]: the same four matrices, each read
// transposed.
__device__ __forceinline__ FragmentA load_a_transposed(const __nv_bfloat16* block, int stride,
                                                       int lane) {
  FragmentA a;
  ldmatrix_x4_trans(a.reg, block + ((lane % 8) + (lane / 16) * 8) * stride + ((lane / 8) % 2) * 8);
  return a;
}

// B fragments of two n-tiles (n 0–7 and 8–15) for one 16-deep k-step, from shared memory laid
// out [n][k] (B's columns are rows in memory, as K is for Q·Kᵀ).
__device__ __forceinline__ void load_b_pair(FragmentB& first, FragmentB& second,
                                            const __nv_bfloat16* block, int stride, int lane) {
  std::uint32_t reg[4];
  ldmatrix_x4(reg, block + ((lane % 8) + (lane / 16) * 8) * stride + ((lane / 8) % 2) * 8);
  first.reg[0] = reg[0];
  first.reg[1] = reg[1];
  second.reg[0] = reg[2];
  second.reg[1] = reg[3];
}

// B fragments of two n-tiles for one k-step from shared memory laid out [k][n] (as V is for P·V).
__device__ __forceinline__ void load_b_pair_transposed(FragmentB& first, FragmentB& second,
                                                       const __nv_bfloat16* block, int stride,
                                                       int lane) {
  std::uint32_t reg[4];
  ldmatrix_x4_trans(reg, block + (lane % 16) * stride + (lane / 16) * 8);
  first.reg[0] = reg[0];
  first.reg[1] = reg[1];
  second.reg[0] = reg[2];
  second.reg[1] = reg[3];
}

// The A fragment for k-step j made from the C tiles 2j and 2j+1 of a 16-row block.
__device__ __forceinline__ FragmentA a_from_c_pair(const FragmentC& first,
                                                   const FragmentC& second) {
  FragmentA a;
  a.reg[0] = pack_bf16x2(first.value[0], first.value[1]);
  a.reg[1] = pack_bf16x2(first.value[2], first.value[3]);
  a.reg[2] = pack_bf16x2(second.value[0], second.value[1]);
  a.reg[3] = pack_bf16x2(second.value[2], second.value[3]);
  return a;
}

// 16 bytes from global to shared memory without passing through registers (sm_80 cp.async),
// writing zeros when `valid` is false (rows past the end of the sequence).
__device__ __forceinline__ void copy_async_16_or_zero(void* shared, const void* global,
                                                      bool valid) {
  const int source_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(shared)),
               "l"(global), "r"(source_bytes));
}
__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

}  // namespace strata::executor::cuda
