// What the GPU distillation losses share on the host (plain C++, no CUDA headers): their device outputs
// (DeviceLoss), the workspace layout every loss starts with, and the host checks of row views, row masks, per-row
// views and outputs, each failing with shrink::Error naming the argument before any CUDA call.
//
// A loss sees its inputs as rows, as distill/reduction.hpp says: [..., V] flattens to rows of V, the last dimension
// contiguous and the leading ones collapsing into one row stride (a padded row pitch is fine). Each kernel writes one
// double per row into the workspace; one block then sums them in a fixed order (shrink/cuda/kernels/common/loss_reduce.cuh), so a
// loss gives the same bits on every run. Device-side data checks (NaN, labels, indices) go to the status word
// (shrink/cuda/launch.hpp); after a failed one the outputs are meaningless (the CPU, which throws, writes nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <string>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda {

// Device outputs of a loss: the reduced value (one double) and, optionally (required for Reduction::none), one
// double per row (0 for absent rows); both device pointers.
struct DeviceLoss { double* value = nullptr; double* per_row = nullptr; };

namespace detail {

// Workspace: the status word, the kept-row count (one unsigned 64-bit integer, padded to 16 bytes), one double per
// row, then `extra` bytes of the loss's own.
inline constexpr std::size_t kKeptCountOffset = kStatusBytes;
inline constexpr std::size_t kPerRowOffset = kStatusBytes + 16;

inline std::size_t workspace_bytes(std::int64_t rows, std::size_t extra, const char* fn) {
  if (rows < 1) fail(fn, "rows", rows, "at least one row");
  const std::size_t per_row = (static_cast<std::size_t>(rows) * sizeof(double) + 15) / 16 * 16;
  return kPerRowOffset + per_row + extra;
}

inline std::size_t extra_offset(std::int64_t rows) {
  return kPerRowOffset + (static_cast<std::size_t>(rows) * sizeof(double) + 15) / 16 * 16;
}

inline std::string field(const char* argument, const char* what) { return std::string(argument) + "." + what; }

// rows x cols elements, row r at data + r * row_stride, each row contiguous.
struct RowLayout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;
};

inline std::string rows_text(const RowLayout& l) {
  return "[" + std::to_string(l.rows) + " rows, " + std::to_string(l.cols) + "]";
}

// The memory of a CUDA view: on a CUDA device, a pointer aligned for T.
template <class T>
void require_cuda_memory(const TensorView<T>& v, const char* fn, const char* name) {
  if (!v.device().is_cuda()) fail(fn, name, "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
  if (v.data() == nullptr) fail(fn, name, "a null pointer", "device memory");
  if (reinterpret_cast<std::uintptr_t>(v.data()) % alignof(std::remove_const_t<T>) != 0)
    fail(fn, name, "a misaligned pointer",
         "alignment to " + std::to_string(alignof(std::remove_const_t<T>)) + " bytes");
}

// A CUDA view [..., V] as rows: non-empty, the last dimension contiguous, the leading dimensions collapsing into one
// row stride (stride(d) == stride(d + 1) * size(d + 1) over those of size > 1), rows that do not overlap.
template <class T>
RowLayout device_rows(const TensorView<T>& v, const char* fn, const char* name) {
  require_cuda_memory(v, fn, name);
  if (v.rank() < 1) fail(fn, field(name, "rank").c_str(), v.rank(), "at least 1 ([..., V])");
  if (v.numel() == 0)
    fail(fn, field(name, "shape").c_str(), to_string(v.shape()), "a non-empty batch (rows >= 1, V >= 1)");
  RowLayout l;
  l.cols = v.size(v.rank() - 1);
  l.rows = v.numel() / l.cols;
  if (l.cols > 1 && v.stride(v.rank() - 1) != 1)
    fail(fn, field(name, "strides").c_str(), to_string(v.strides()), "a contiguous last dimension (stride 1)");
  l.row_stride = l.cols;
  std::int64_t next = -1;  // the stride the next outer dimension of size > 1 must have
  for (int d = v.rank() - 2; d >= 0; --d) {
    if (v.size(d) == 1) continue;
    if (next < 0) {
      l.row_stride = v.stride(d);
    } else if (v.stride(d) != next) {
      fail(fn, field(name, "strides").c_str(), to_string(v.strides()),
           "leading dimensions that flatten to rows of one stride");
    }
    next = v.stride(d) * v.size(d);
  }
  if (l.rows > 1 && l.row_stride < l.cols)
    fail(fn, field(name, "strides").c_str(), to_string(v.strides()), "rows that do not overlap");
  return l;
}

// b has the rows and columns of a.
inline void require_same_rows(const RowLayout& a, const RowLayout& b, const char* fn, const char* name_b,
                              const char* name_a) {
  if (a.rows != b.rows || a.cols != b.cols)
    fail(fn, name_b, rows_text(b), std::string("the shape of ") + name_a + " " + rows_text(a));
}

// An optional contiguous CUDA view of one value per row (row mask, labels, targets, tail masses): nullptr when
// absent (TensorView{}). With `exact_shape`, its shape must be `leading` (the input's leading dimensions) or [rows];
// otherwise any shape of `rows` elements.
template <class U>
const U* per_row_view(const TensorView<const U>& v, std::int64_t rows, const char* fn, const char* name,
                      const Shape* exact_shape = nullptr) {
  if (v.data() == nullptr && (v.rank() == 0 || v.numel() == 0)) return nullptr;
  require_cuda_memory(v, fn, name);
  if (exact_shape != nullptr) {
    const Shape flat{rows};
    if (v.shape() != *exact_shape && v.shape() != flat)
      fail(fn, field(name, "shape").c_str(), to_string(v.shape()),
           "one value per row: " + (*exact_shape == flat ? "" : to_string(*exact_shape) + " or ") + to_string(flat));
  } else if (v.numel() != rows) {
    fail(fn, field(name, "shape").c_str(), to_string(v.shape()), "one entry per row (" + std::to_string(rows) + ")");
  }
  if (!v.is_contiguous()) fail(fn, field(name, "strides").c_str(), to_string(v.strides()), "a contiguous view");
  return v.data();
}

inline void require_reduction(distill::Reduction r, const char* fn, const char* name = "options.reduction") {
  using distill::Reduction;
  if (r != Reduction::none && r != Reduction::sum && r != Reduction::mean && r != Reduction::batchmean)
    fail(fn, name, static_cast<int>(r), "none, sum, mean or batchmean");
}

inline void require_grad_scale(double s, const char* fn) {
  if (!std::isfinite(s)) fail(fn, "options.grad_scale", s, "a finite upstream gradient");
}

// out.value always; out.per_row when the reduction is none (optional otherwise); both 8-byte aligned.
inline void require_device_loss(const DeviceLoss& out, distill::Reduction r, const char* fn) {
  if (out.value == nullptr) fail(fn, "out.value", "a null pointer", "a device double for the loss");
  if (reinterpret_cast<std::uintptr_t>(out.value) % alignof(double) != 0)
    fail(fn, "out.value", "a misaligned pointer", "alignment to 8 bytes");
  if (out.per_row == nullptr && r == distill::Reduction::none)
    fail(fn, "out.per_row", "a null pointer", "one device double per row (Reduction::none)");
  if (reinterpret_cast<std::uintptr_t>(out.per_row) % alignof(double) != 0)
    fail(fn, "out.per_row", "a misaligned pointer", "alignment to 8 bytes");
}

}  // namespace detail
}  // namespace shrink::cuda
