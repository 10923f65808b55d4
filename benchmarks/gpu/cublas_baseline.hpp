// cuBLAS baselines of the GPU GEMM benchmarks (stand-in with the shared interface; the W8A8 kernels' benchmarks own
// the shared version): FP16 / BF16 GEMMs through cublasGemmEx (FP32 accumulation, tensor ops) and the INT8 -> INT32
// GEMM of cuBLASLt, on row-major operands as shrink's kernels take them.
//
// Row-major C[M, N] = A[M, K] · B[N, K]ᵀ is, column-major, Cᵀ[N, M] = B · Aᵀ: B's buffer read column-major is
// Bᵀ [K, N] (ld K), taken with op T; A's buffer is Aᵀ [K, M] (ld K), op N; Cᵀ has ld N (the "TN" form).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

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
    cudaFree(workspace_);
    cublasLtDestroy(lt_);
    cublasDestroy(handle_);
  }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // C[M,N] = A[M,K] . B[N,K]^T, all row-major, fp16 (or bf16) in and out, fp32 accumulation, tensor ops.
  void gemm_f16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    gemm_ex(a, b, c, m, n, k, CUDA_R_16F, stream);
  }
  void gemm_bf16(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    gemm_ex(a, b, c, m, n, k, CUDA_R_16BF, stream);
  }

  // C[M,N] int32 = A[M,K] int8 . B[N,K]^T int8 through cuBLASLt (workspace owned by the class).
  void gemm_s8s32(const void* a, const void* b, void* c, int m, int n, int k, cudaStream_t stream) {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t layout_b = nullptr, layout_a = nullptr, layout_c = nullptr;
    check(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32I, CUDA_R_32I), "cublasLtMatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, keep = CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof transpose), "TRANSA");
    check(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &keep, sizeof keep), "TRANSB");
    check(cublasLtMatrixLayoutCreate(&layout_b, CUDA_R_8I, k, n, k), "layout of B");
    check(cublasLtMatrixLayoutCreate(&layout_a, CUDA_R_8I, k, m, k), "layout of A");
    check(cublasLtMatrixLayoutCreate(&layout_c, CUDA_R_32I, n, m, n), "layout of C");
    const std::int32_t alpha = 1, beta = 0;
    const cublasStatus_t status =
        cublasLtMatmul(lt_, desc, &alpha, b, layout_b, a, layout_a, &beta, c, layout_c, c, layout_c, nullptr,
                       workspace_, kWorkspaceBytes, stream);
    cublasLtMatrixLayoutDestroy(layout_c);
    cublasLtMatrixLayoutDestroy(layout_a);
    cublasLtMatrixLayoutDestroy(layout_b);
    cublasLtMatmulDescDestroy(desc);
    check(status, "cublasLtMatmul (int8)");
  }

 private:
  static constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

  static void check(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(status)));
  }

  void gemm_ex(const void* a, const void* b, void* c, int m, int n, int k, cudaDataType type, cudaStream_t stream) {
    check(cublasSetStream(handle_, stream), "cublasSetStream");
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, b, type, k, a, type, k, &beta, c, type, n,
                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP),
          "cublasGemmEx");
  }

  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
};

}  // namespace shrink::bench_gpu
