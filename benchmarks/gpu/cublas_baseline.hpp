// The cuBLAS baselines of the GPU GEMM benchmarks: FP16 / BF16 GEMMs (cublasGemmEx, FP32 accumulation, tensor ops)
// and the INT8 → INT32 GEMM of cuBLASLt, on row-major operands as shrink's kernels take them.
//
// Row-major C[M, N] = A[M, K] · B[N, K]ᵀ is, in cuBLAS's column-major terms, Cᵀ[N, M] = B[N, K] · Aᵀ[K, M]: the
// buffer of B read column-major is Bᵀ [K, N] (ld K), so op T gives B; the buffer of A is Aᵀ [K, M] (ld K), op N;
// Cᵀ is [N, M] with ld N. That is the "TN" form cuBLASLt's int8 kernels require (A transposed, B not; leading
// dimensions multiples of 4, pointers 4-byte aligned: K and N multiples of 4 here).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <tuple>

namespace shrink::bench_gpu {

// One cuBLAS and one cuBLASLt handle for a benchmark program; throws std::runtime_error on any cuBLAS failure.
class Cublas {
 public:
  Cublas() {
    check(cublasCreate(&handle_), "cublasCreate");
    check(cublasLtCreate(&lt_), "cublasLtCreate");
    if (cudaMalloc(&workspace_, kWorkspaceBytes) != cudaSuccess)
      throw std::runtime_error("cudaMalloc of the cuBLASLt workspace failed");
  }
  ~Cublas() {
    for (auto& entry : plans_) entry.second.destroy();
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cublasDestroy(handle_);
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // C[M,N] = A[M,K] . B[N,K]^T, all row-major, fp16 (or bf16) in and out, fp32 accumulation, tensor ops.
  void gemm_f16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    gemm_16bit(CUDA_R_16F, a, b, c, m, n, k, stream);
  }
  void gemm_bf16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    gemm_16bit(CUDA_R_16BF, a, b, c, m, n, k, stream);
  }

  // C[M,N] int32 = A[M,K] int8 . B[N,K]^T int8 through cuBLASLt (workspace owned by the class).
  void gemm_s8s32(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    const Plan& plan = int8_plan(m, n, k);
    const std::int32_t alpha = 1, beta = 0;
    check(cublasLtMatmul(lt_, plan.operation, &alpha, b, plan.a, a, plan.b, &beta, c, plan.c, c, plan.c, &plan.algo,
                         workspace_, kWorkspaceBytes, stream),
          "cublasLtMatmul (int8)");
  }

 private:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

  // The descriptors and the heuristic's algorithm for one int8 shape, made once.
  struct Plan {
    cublasLtMatmulDesc_t operation = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our B), B (our A), C
    cublasLtMatmulAlgo_t algo{};
    void destroy() {
      if (c) cublasLtMatrixLayoutDestroy(c);
      if (b) cublasLtMatrixLayoutDestroy(b);
      if (a) cublasLtMatrixLayoutDestroy(a);
      if (operation) cublasLtMatmulDescDestroy(operation);
    }
  };

  static void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(status)));
  }

  void gemm_16bit(cudaDataType type, const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    check(cublasSetStream(handle_, stream), "cublasSetStream");
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, type, k, a, type, k, &beta, c, type, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  }

  const Plan& int8_plan(int m, int n, int k) {
    const auto key = std::make_tuple(m, n, k);
    auto found = plans_.find(key);
    if (found != plans_.end()) return found->second;
    Plan p;
    check(cublasLtMatmulDescCreate(&p.operation, CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p.operation, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose),
          "CUBLASLT_MATMUL_DESC_TRANSA");
    check(cublasLtMatmulDescSetAttribute(p.operation, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof none),
          "CUBLASLT_MATMUL_DESC_TRANSB");
    check(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8I, k, n, k), "cublasLtMatrixLayoutCreate A");
    check(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8I, k, m, k), "cublasLtMatrixLayoutCreate B");
    check(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32I, n, m, n), "cublasLtMatrixLayoutCreate C");
    cublasLtMatmulPreference_t preference = nullptr;
    check(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
    const std::size_t workspace = kWorkspaceBytes;
    check(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof workspace),
          "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
    cublasLtMatmulHeuristicResult_t result{};
    int found_count = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(lt_, p.operation, p.a, p.b, p.c, p.c, preference, 1, &result, &found_count);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS || found_count == 0) {
      p.destroy();
      throw std::runtime_error("cuBLASLt has no int8 algorithm for M " + std::to_string(m) + " N " +
                               std::to_string(n) + " K " + std::to_string(k));
    }
    p.algo = result.algo;
    return plans_.emplace(key, p).first->second;
  }

  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::map<std::tuple<int, int, int>, Plan> plans_;
};

}  // namespace shrink::bench_gpu
