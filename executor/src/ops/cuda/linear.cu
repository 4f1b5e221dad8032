#include <cublasLt.h>

#include <map>
#include <tuple>

#include "../../cuda/column_sums.cuh"
#include "../../cuda/device_math.cuh"
#include "gelu.cuh"
#include "linear.cuh"

namespace strata::executor::cuda {
namespace {

cudaDataType_t blas_type(ScalarType type) {
  switch (type) {
    case ScalarType::float32:
      return CUDA_R_32F;
    case ScalarType::bfloat16:
      return CUDA_R_16BF;
    default:
      fail_unsupported("linear", "the CUDA backend computes in float32 or bfloat16");
  }
}

// The largest power of two (up to 256) dividing the address: cuBLASLt picks kernels by it.
std::uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<std::uintptr_t>(pointer);
  std::uint32_t alignment = 256;
  while (alignment > 1 && address % alignment != 0) alignment /= 2;
  return alignment;
}

// D (m×n, column-major) = β·D + op(A)·op(B), with an optional epilogue. Row-major tensors are
// column-major transposes, which is how the launchers below map the three GEMMs onto this.
struct Matmul {
  bool transpose_a = false;
  bool transpose_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  std::int64_t lda = 0;
  const void* b = nullptr;
  std::int64_t ldb = 0;
  void* d = nullptr;
  std::int64_t ldd = 0;
  cudaDataType_t input_type = CUDA_R_32F;
  cudaDataType_t output_type = CUDA_R_32F;
  float beta = 0.0f;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;
  void* aux = nullptr;  // GELU_AUX: the pre-activation, laid out as D
};

using PlanKey =
    std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
               std::int64_t, int, int, int, std::uint32_t, std::uint32_t, std::uint32_t, bool>;

// What one GEMM shape needs, made once: descriptors, layouts and the heuristic's algorithm.
struct MatmulPlan {
  cublasLtMatmulDesc_t description = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  bool found = false;
};

MatmulPlan& plan_for(const Matmul& gemm) {
  static std::map<PlanKey, MatmulPlan>* plans = new std::map<PlanKey, MatmulPlan>();
  const PlanKey key{gemm.transpose_a,
                    gemm.transpose_b,
                    gemm.m,
                    gemm.n,
                    gemm.k,
                    gemm.lda,
                    gemm.ldb,
                    gemm.ldd,
                    static_cast<int>(gemm.input_type),
                    static_cast<int>(gemm.output_type),
                    static_cast<int>(gemm.epilogue),
                    alignment_of(gemm.a),
                    alignment_of(gemm.b),
                    alignment_of(gemm.d),
                    gemm.beta != 0.0f};
  const auto existing = plans->find(key);
  if (existing != plans->end()) return existing->second;
  CudaContext& context = cuda_context();
  MatmulPlan plan;
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.description, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = gemm.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = gemm.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.description, CUBLASLT_MATMUL_DESC_TRANSA,
                                                     &op_a, sizeof(op_a)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.description, CUBLASLT_MATMUL_DESC_TRANSB,
                                                     &op_b, sizeof(op_b)));
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
      plan.description, CUBLASLT_MATMUL_DESC_EPILOGUE, &gemm.epilogue, sizeof(gemm.epilogue)));
  if (gemm.aux != nullptr) {
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.description, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &gemm.ldd, sizeof(gemm.ldd)));
  }
  // Stored shapes: op(A) is m×k, so A is k×m when transposed; likewise B.
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, gemm.input_type,
                                                 gemm.transpose_a ? gemm.k : gemm.m,
                                                 gemm.transpose_a ? gemm.m : gemm.k, gemm.lda));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, gemm.input_type,
                                                 gemm.transpose_b ? gemm.n : gemm.k,
                                                 gemm.transpose_b ? gemm.k : gemm.n, gemm.ldb));
  STRATA_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan.d, gemm.output_type, gemm.m, gemm.n, gemm.ldd));
  cublasLtMatmulPreference_t preference;
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &context.blas_workspace_bytes,
      sizeof(context.blas_workspace_bytes)));
  const std::uint32_t alignments[3] = {alignment_of(gemm.a), alignment_of(gemm.b),
                                       alignment_of(gemm.d)};
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                           &alignments[0], sizeof(std::uint32_t)));
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                           &alignments[1], sizeof(std::uint32_t)));
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                           &alignments[2], sizeof(std::uint32_t)));
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                           &alignments[2], sizeof(std::uint32_t)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(context.blas, plan.description, plan.a, plan.b, plan.d, plan.d,
                                     preference, 1, &result, &found);
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
  plan.found = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan.found) plan.algorithm = result.algo;
  return plans->emplace(key, plan).first->second;
}

// False when cuBLASLt has no kernel for this epilogue and shape (the caller then splits it).
bool try_matmul(const Matmul& gemm) {
  MatmulPlan& plan = plan_for(gemm);
  if (!plan.found) return false;
  CudaContext& context = cuda_context();
  if (gemm.bias != nullptr) {
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.description, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &gemm.bias, sizeof(gemm.bias)));
  }
  if (gemm.aux != nullptr) {
    STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.description, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &gemm.aux, sizeof(gemm.aux)));
  }
  const float alpha = 1.0f;
  STRATA_CUBLAS_CHECK(cublasLtMatmul(context.blas, plan.description, &alpha, gemm.a, plan.a, gemm.b,
                                     plan.b, &gemm.beta, gemm.d, plan.d, gemm.d, plan.d,
                                     &plan.algorithm, context.blas_workspace,
                                     context.blas_workspace_bytes, context.stream));
  return true;
}

void matmul(const Matmul& gemm) {
  if (!try_matmul(gemm)) {
    fail_unsupported("linear", "cuBLASLt has no algorithm for this GEMM");
  }
}

}  // namespace

void launch_linear_forward(const void* x, const void* weight, const void* bias, void* y,
                           void* gelu_input, std::int64_t rows, std::int64_t in, std::int64_t out,
                           ScalarType type) {
  if (rows == 0 || out == 0) return;
  Matmul gemm;
  gemm.transpose_a = true;
  gemm.m = out;
  gemm.n = rows;
  gemm.k = in;
  gemm.a = weight;
  gemm.lda = in;
  gemm.b = x;
  gemm.ldb = in;
  gemm.d = y;
  gemm.ldd = out;
  gemm.input_type = gemm.output_type = blas_type(type);
  gemm.bias = bias;
  gemm.epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
  if (gelu_input != nullptr) {
    Matmul fused = gemm;
    fused.aux = gelu_input;
    fused.epilogue = bias != nullptr ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    if (try_matmul(fused)) return;
    // No fused kernel for this shape: the GEMM writes the pre-activation, GELU runs after it.
    gemm.d = gelu_input;
    matmul(gemm);
    launch_gelu_forward(gelu_input, y, rows * out, type);
    return;
  }
  matmul(gemm);
}

void launch_linear_backward_input(const void* dy, const void* weight, void* dx, std::int64_t rows,
                                  std::int64_t in, std::int64_t out, ScalarType type,
                                  bool accumulate) {
  if (rows == 0 || in == 0) return;
  Matmul gemm;
  gemm.m = in;
  gemm.n = rows;
  gemm.k = out;
  gemm.a = weight;
  gemm.lda = in;
  gemm.b = dy;
  gemm.ldb = out;
  gemm.d = dx;
  gemm.ldd = in;
  gemm.input_type = gemm.output_type = blas_type(type);
  gemm.beta = accumulate ? 1.0f : 0.0f;
  matmul(gemm);
}

void launch_linear_backward_parameters(const void* dy, const void* x, float* dweight, float* dbias,
                                       std::int64_t rows, std::int64_t in, std::int64_t out,
                                       ScalarType type) {
  if (in == 0 || out == 0) return;
  Matmul gemm;
  gemm.transpose_b = true;
  gemm.m = in;
  gemm.n = out;
  gemm.k = rows;
  gemm.a = x;
  gemm.lda = in;
  gemm.b = dy;
  gemm.ldb = out;
  gemm.d = dweight;
  gemm.ldd = in;
  gemm.input_type = blas_type(type);
  gemm.output_type = CUDA_R_32F;
  gemm.beta = 1.0f;
  if (rows > 0) matmul(gemm);
  if (dbias != nullptr) {
    dispatch_cuda_type(type, "linear_backward", [&]<class T>() {
      launch_column_sums(rows, out, RowValues<T>{static_cast<const T*>(dy), out}, dbias, nullptr);
    });
  }
}

}  // namespace strata::executor::cuda
