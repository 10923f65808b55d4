// Host-callable CSR SpMM (shrink/linear/csr_cuda.hpp): the host checks, the path and workspace choice, then the
// launches of shrink/cuda/kernels/linear_csr.cuh, explicitly instantiated for float, half and bfloat16.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "host_checks.hpp"
#include "shrink/core/epilogue_check.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/linear_csr.cuh"
#include "shrink/cuda/view_checks.hpp"
#include "shrink/linear/csr_cuda.hpp"

namespace shrink::cuda {

namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

template <class V>
bool has_elements(const TensorView<V>& v) {
  return v.rank() > 0 && v.numel() > 0;
}

// The inputs a product reads, by name, as byte ranges (empty views have none).
template <class T>
std::pair<std::string, std::pair<std::uintptr_t, std::uintptr_t>> input_span(const char* name, const TensorView<T>& v) {
  return {name, has_elements(v) ? byte_span(v) : std::pair<std::uintptr_t, std::uintptr_t>{0, 0}};
}

template <class T>
std::vector<std::pair<std::string, std::pair<std::uintptr_t, std::uintptr_t>>> input_spans(const LinearCsrArgs<T>& a) {
  return {input_span("x", a.x), input_span("row_offsets", a.row_offsets),
          input_span("column_indices", a.column_indices), input_span("values", a.values),
          input_span("epilogue.bias", a.epilogue.bias)};
}

template <class T>
LinearCsrPath resolve_path(const LinearCsrArgs<T>& a) {
  if (a.path != LinearCsrPath::automatic) return a.path;
  if (a.x.size(0) <= kCsrRowDotsMaxM) return LinearCsrPath::row_dots;
  const double elements = static_cast<double>(a.row_offsets.size(0) - 1) * static_cast<double>(a.x.size(1));
  return static_cast<double>(a.values.size(0)) >= kCsrStagedMinDensity * elements ? LinearCsrPath::staged
                                                                                  : LinearCsrPath::nnz_split;
}

// Xᵀ is needed by every path but row_dots with M = 1, which reads x itself.
template <class T>
bool needs_transpose(const LinearCsrArgs<T>& a) {
  return !(resolve_path(a) == LinearCsrPath::row_dots && a.x.size(0) == 1);
}

std::size_t round_up_16(std::size_t bytes) { return (bytes + 15) / 16 * 16; }

}  // namespace

template <class T>
Support can_implement_linear_csr(const LinearCsrArgs<T>& a) {
  Support s = check_device_view(a.x, "x", DeviceViewRules{2, -1, 0, true, false});
  if (!s) return s;
  const std::int64_t m = a.x.size(0), k = a.x.size(1);
  if (k > kMaxInt32) return Support::no("x.shape", to_string(a.x.shape()), "K <= INT32_MAX (int32 column indices)");
  s = check_device_view(a.row_offsets, "row_offsets", DeviceViewRules{1, -1, 0, true, false});
  if (!s) return s;
  const std::int64_t n = a.row_offsets.size(0) - 1;
  if (n < 1 || n > kMaxInt32)
    return Support::no("row_offsets.shape", to_string(a.row_offsets.shape()),
                       "[N + 1] with 1 <= N <= INT32_MAX (the weight's rows)");
  s = check_device_view(a.column_indices, "column_indices", DeviceViewRules{1, -1, 0, true, true});
  if (!s) return s;
  s = check_device_view(a.values, "values", DeviceViewRules{1, -1, 0, true, true});
  if (!s) return s;
  if (a.column_indices.size(0) != a.values.size(0))
    return Support::no("column_indices.shape", to_string(a.column_indices.shape()),
                       "as many column indices as values (" + std::to_string(a.values.size(0)) + ")");
  if (a.values.size(0) > kMaxInt32)
    return Support::no("values.shape", to_string(a.values.shape()), "nnz <= INT32_MAX (int32 row offsets)");
  EpilogueRules rules = epilogue_rules<T>(m, n, a.x.device());
  rules.no_scales = "float operands have none";
  s = check_epilogue(a.epilogue, rules);
  if (!s) return s;
  s = check_device_view(a.out, "out", DeviceViewRules{2, -1, 0, true, false});
  if (!s) return s;
  if (a.out.size(0) != m || a.out.size(1) != n)
    return Support::no("out.shape", to_string(a.out.shape()), to_string(Shape{m, n}) + " ([M, N])");
  struct Placed {
    const char* name;
    Device device;
    bool used;
  };
  const int device = a.x.device().index;
  const Placed placed[] = {{"row_offsets", a.row_offsets.device(), true},
                           {"column_indices", a.column_indices.device(), has_elements(a.column_indices)},
                           {"values", a.values.device(), has_elements(a.values)},
                           {"out", a.out.device(), true}};
  for (const Placed& p : placed)
    if (p.used && p.device.index != device)
      return Support::no(p.name, "a view on CUDA device " + std::to_string(p.device.index),
                         "the device of x, CUDA device " + std::to_string(device));
  if (a.path != LinearCsrPath::automatic && a.path != LinearCsrPath::row_dots && a.path != LinearCsrPath::row_split &&
      a.path != LinearCsrPath::nnz_split && a.path != LinearCsrPath::staged)
    return Support::no("path", std::to_string(static_cast<int>(a.path)),
                       "automatic, row_dots, row_split, nnz_split or staged");
  if (a.path == LinearCsrPath::row_dots && m > kCsrRowDotsMaxM)
    return Support::no("path", "row_dots with M = " + std::to_string(m),
                       "M <= " + std::to_string(kCsrRowDotsMaxM) + " for row_dots (or another path)");
  const auto out_span = byte_span(a.out);
  for (const auto& [name, span] : input_spans(a))
    if (spans_overlap(out_span, span)) return Support::no("out", "memory overlapping " + name, "a separate output");
  return Support::yes();
}

template <class T>
LinearCsrPath linear_csr_path(const LinearCsrArgs<T>& args) {
  return resolve_path(args);
}

template <class T>
std::size_t linear_csr_workspace_bytes(const LinearCsrArgs<T>& args) {
  require_supported(can_implement_linear_csr(args), "shrink::cuda::linear_csr_workspace_bytes");
  if (!needs_transpose(args)) return kStatusBytes;
  const auto k = static_cast<std::size_t>(args.x.size(1));
  return kStatusBytes +
         round_up_16(k * static_cast<std::size_t>(kernels::linear_csr::padded_m(args.x.size(0))) * sizeof(T));
}

template <class T>
void linear_csr(const LinearCsrArgs<T>& args, Workspace workspace, Stream stream, Synchronize synchronize) {
  const char* fn = "shrink::cuda::linear_csr";
  require_supported(can_implement_linear_csr(args), fn);
  const std::size_t needed = linear_csr_workspace_bytes(args);
  detail::require_workspace(workspace, needed, "linear_csr_workspace_bytes(args)", fn);
  const auto scratch = reinterpret_cast<std::uintptr_t>(workspace.data);
  const std::pair<std::uintptr_t, std::uintptr_t> workspace_span{scratch, scratch + needed};
  auto spans = input_spans(args);
  spans.emplace_back("out", byte_span(args.out));
  for (const auto& [name, span] : spans)
    if (spans_overlap(workspace_span, span))
      fail(fn, "workspace.data", "memory overlapping " + name, "a separate scratch buffer");
  detail::require_current_device(args.x.device(), fn, "x");

  const std::int64_t m = args.x.size(0), k = args.x.size(1), n = args.row_offsets.size(0) - 1;
  char* base = static_cast<char*>(workspace.data);
  int* status = reinterpret_cast<int*>(base);
  const bool transpose = needs_transpose(args);
  const std::int64_t ldxt = transpose ? kernels::linear_csr::padded_m(m) : 1;
  T* xt = transpose ? reinterpret_cast<T*>(base + kStatusBytes) : nullptr;
  const kernels::linear_csr::Operands<T> operands{transpose ? xt : args.x.data(),
                                                  ldxt,
                                                  m,
                                                  k,
                                                  n,
                                                  args.row_offsets.data(),
                                                  args.column_indices.data(),
                                                  args.values.data(),
                                                  args.values.size(0),
                                                  make_epilogue_op(args.epilogue, m, n),
                                                  args.out.data(),
                                                  status};

  SHRINK_CUDA_CHECK(cudaMemsetAsync(status, 0, sizeof(int), stream));
  if (transpose) kernels::linear_csr::transpose(args.x.data(), m, k, xt, ldxt, stream);
  switch (resolve_path(args)) {
    case LinearCsrPath::row_dots: kernels::linear_csr::row_dots(operands, stream); break;
    case LinearCsrPath::row_split: kernels::linear_csr::tile<T, false>(operands, stream); break;
    case LinearCsrPath::staged: kernels::linear_csr::staged(operands, stream); break;
    default: kernels::linear_csr::tile<T, true>(operands, stream); break;
  }
  if (synchronize == Synchronize::yes) check_status(workspace, stream, fn);
}

#define SHRINK_INSTANTIATE_SPMM_CSR(T)                                         \
  template Support can_implement_linear_csr<T>(const LinearCsrArgs<T>&);       \
  template LinearCsrPath linear_csr_path<T>(const LinearCsrArgs<T>&);          \
  template std::size_t linear_csr_workspace_bytes<T>(const LinearCsrArgs<T>&); \
  template void linear_csr<T>(const LinearCsrArgs<T>&, Workspace, Stream, Synchronize);
SHRINK_INSTANTIATE_SPMM_CSR(float)
SHRINK_INSTANTIATE_SPMM_CSR(half)
SHRINK_INSTANTIATE_SPMM_CSR(bfloat16)
#undef SHRINK_INSTANTIATE_SPMM_CSR

}  // namespace shrink::cuda
