// Host API of the CUDA CSR SpMM (compiled in cuda/linear_csr.cu; plain C++, no CUDA headers): the sparse linear layer
//
//   out[m, n] = act(Σ_{stored k of row n} x[m, k] · w[n, k] + bias[n])         Y[M, N] = X[M, K] · W[N, K]ᵀ
//
// with W pruned and stored as CSR on the device (sparse::Csr's three arrays: int32 row offsets, int32 column indices,
// values), x, the values and out all float, half or bfloat16, float accumulation, a float bias and the activations of
// core/activation.hpp (none, relu, gelu with erf, silu); half and bfloat16 outputs are rounded to nearest even
// once, at the end. The CPU twin is cpu::linear_csr (linear/csr.hpp), which computes the same sums in another
// order. Device code: shrink/cuda/kernels/linear_csr.cuh (Yᵀ = W · Xᵀ, X transposed once into the workspace).
//
// Paths (LinearCsrPath): row_dots (one warp per weight row, for small M), nnz_split (a CTA's stored values split
// evenly over its warps), row_split (each warp owning whole rows), staged (Xᵀ streamed through shared memory).
// automatic: row_dots for M <= kCsrRowDotsMaxM; above, staged while the weight keeps at least kCsrStagedMinDensity
// of its elements, nnz_split when sparser. How each path tiles the work: benchmarks/notes/gpu_linear_csr.md.
// Deterministic: no float atomics; every sum has a fixed order, so the same inputs give the same bits on every run.
//
// Checks. On the host, before any CUDA call (shrink::Error naming the argument; can_implement_linear_csr answers the
// same questions without throwing and without touching the device): views on the device, contiguous, aligned,
// shapes consistent, nnz <= INT32_MAX, a path that can run the shape, out apart from every input, the workspace
// large enough and apart from everything. On the device, into the status word (Synchronize::yes or check_status):
// the CSR indices (kBadIndex: row offsets from 0 to nnz, non-decreasing; column indices in [0, K), strictly
// increasing within a row) and the bias (kNonFinite). The kernels read the indices anyway, so checking them there
// costs a compare each, while a host validation would copy them back and wait for the stream. A bad index is never
// followed: offsets are clamped into [0, nnz] and made non-decreasing, a bad column's product is skipped, and the
// output is then meaningless (the CPU, which throws first, leaves it untouched).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"

namespace shrink::cuda {

enum class LinearCsrPath : std::uint8_t { automatic, row_dots, row_split, nnz_split, staged };

inline const char* to_string(LinearCsrPath p) {
  switch (p) {
    case LinearCsrPath::automatic: return "automatic";
    case LinearCsrPath::row_dots: return "row_dots";
    case LinearCsrPath::row_split: return "row_split";
    case LinearCsrPath::nnz_split: return "nnz_split";
    case LinearCsrPath::staged: return "staged";
  }
  return "?";
}

// The largest M the row_dots path holds in registers (and where automatic stops choosing it).
inline constexpr std::int64_t kCsrRowDotsMaxM = 16;
// Above kCsrRowDotsMaxM, automatic takes staged when nnz >= this fraction of N · K (sparsity <= 95%), nnz_split below:
// a staged chunk of Xᵀ then serves 32 rows · 5% = 1.6 products per element on average. A first guess from the
// traffic model in benchmarks/notes/gpu_linear_csr.md, to be set from the benchmark's sweep.
inline constexpr double kCsrStagedMinDensity = 0.05;

// The operands of one product. T: float, half or bfloat16. All device views on the same device.
template <class T>
struct LinearCsrArgs {
  TensorView<const T> x;                          // [M, K], contiguous
  TensorView<const std::int32_t> row_offsets;     // [N + 1]: 0, then the running count of stored values
  TensorView<const std::int32_t> column_indices;  // [nnz], in [0, K), strictly increasing within a row
  TensorView<const T> values;                     // [nnz]; nnz may be 0 (then both views may be empty)
  Epilogue epilogue;  // bias: [N] finite floats, or empty for none; no scales (float operands)
  TensorView<T> out;  // [M, N], contiguous
  LinearCsrPath path = LinearCsrPath::automatic;
};

// Whether the operands can run and, when not, which argument is wrong, its value and what was expected. Host only:
// no CUDA call (the current-device check is left to linear_csr).
template <class T>
Support can_implement_linear_csr(const LinearCsrArgs<T>& args);

// The path `automatic` resolves to for these operands (a forced path is returned as given).
template <class T>
LinearCsrPath linear_csr_path(const LinearCsrArgs<T>& args);

// Workspace for linear_csr(args, ...): the status word and Xᵀ [K, round_up(M, 8)] of T (none for M = 1 on row_dots).
// Throws shrink::Error when can_implement_linear_csr(args) says no.
template <class T>
std::size_t linear_csr_workspace_bytes(const LinearCsrArgs<T>& args);

// Enqueues out = act(X · Wᵀ + bias) on `stream`; allocates nothing; returns at once unless Synchronize::yes, which
// waits and throws shrink::Error naming any failed device-side check.
template <class T>
void linear_csr(const LinearCsrArgs<T>& args, Workspace workspace, Stream stream,
                Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
