// PackedWeight<T>: a Linear weight W[N, K] stored in column panels for the float product kernels (cpu/gemm_panel.hpp),
// in its own storage type T (float, half, bfloat16 or int8 with scales), converted to float only inside the kernels.
//
// Layout: panel p holds rows n = 32p .. 32p + 31 transposed, k-major: panels[(p · K + k) · 32 + j] = W[32p + j, k].
// Rows past N are zeros. A kernel reads one contiguous run of 32 values per k, which it converts and multiplies
// by a broadcast activation; the weight is read once in its compact type (4, 2, 2 or 1 bytes a value).
// int8 weights keep one float scale per output row (a per-tensor scale repeated), applied in the epilogue:
// out = act(scale[n] · Σ_k x[m, k] · q[n, k] + bias[n]); linear/weight_only.hpp packs them from a QuantizedTensor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/aligned_vector.hpp"

namespace shrink::cpu {

inline constexpr std::int64_t kPanelWidth = 32;  // output features per panel: two AVX-512 registers of floats

template <class T>
struct PackedWeight {
  static_assert(std::is_same<T, float>::value || std::is_same<T, half>::value || std::is_same<T, bfloat16>::value ||
                    std::is_same<T, std::int8_t>::value,
                "PackedWeight holds float, half, bfloat16 or int8 values");
  std::int64_t rows = 0;      // N, output features
  std::int64_t cols = 0;      // K, input features
  AlignedVector<T> panels;    // [ceil(N / 32), K, 32], see the file comment
  std::vector<float> scales;  // int8: N scales (one per output row); empty otherwise
  bool per_channel = false;   // int8: whether the source had one scale per row

  std::int64_t panel_count() const { return (rows + kPanelWidth - 1) / kPanelWidth; }
  const T* panel(std::int64_t p) const { return panels.data() + p * cols * kPanelWidth; }
  // Bytes a deployment stores: the values and, for int8, the float scales (1 or N).
  std::int64_t storage_bytes() const {
    return rows * cols * static_cast<std::int64_t>(sizeof(T)) +
           (std::is_same<T, std::int8_t>::value ? (per_channel ? rows : 1) * 4 : 0);
  }
};

// Packs W (2-D host view of any strides, already checked) converting each value with `convert`.
template <class T, class Source, class Convert>
PackedWeight<T> pack_panels(const TensorView<const Source>& w, Convert convert) {
  PackedWeight<T> p;
  p.rows = w.size(0);
  p.cols = w.size(1);
  p.panels.assign(static_cast<std::size_t>(p.panel_count() * p.cols * kPanelWidth), T{});
  const std::int64_t rs = w.stride(0), cs = w.stride(1);
  for (std::int64_t n = 0; n < p.rows; ++n) {
    T* dst = p.panels.data() + (n / kPanelWidth) * p.cols * kPanelWidth + n % kPanelWidth;
    const Source* src = w.data() + n * rs;
    for (std::int64_t k = 0; k < p.cols; ++k) dst[k * kPanelWidth] = convert(src[k * cs]);
  }
  return p;
}

namespace detail {

template <class T>
PackedWeight<T> checked_pack(const TensorView<const T>& w, const char* function) {
  require_host_view(w, function, "w");
  if (w.rank() != 2) fail(function, "w.shape", to_string(w.shape()), "a 2-D weight [N, K]");
  require_nonempty(w, function, "w");
  return pack_panels<T>(w, [](T v) { return v; });
}

}  // namespace detail

// Packs a float, half or bfloat16 weight [N, K] (host view, any strides) as it is.
inline PackedWeight<float> pack_weight(TensorView<const float> w) {
  return detail::checked_pack(w, "shrink::cpu::pack_weight");
}
inline PackedWeight<half> pack_weight(TensorView<const half> w) {
  return detail::checked_pack(w, "shrink::cpu::pack_weight");
}
inline PackedWeight<bfloat16> pack_weight(TensorView<const bfloat16> w) {
  return detail::checked_pack(w, "shrink::cpu::pack_weight");
}

// Packs a float weight rounded to half or bfloat16 (round to nearest even; overflow becomes inf, as a cast does).
template <class T>
PackedWeight<T> pack_weight_as(TensorView<const float> w) {
  static_assert(std::is_same<T, half>::value || std::is_same<T, bfloat16>::value, "pack_weight_as<half or bfloat16>");
  const char* fn = "shrink::cpu::pack_weight_as";
  require_host_view(w, fn, "w");
  if (w.rank() != 2) fail(fn, "w.shape", to_string(w.shape()), "a 2-D weight [N, K]");
  require_nonempty(w, fn, "w");
  return pack_panels<T>(w, [](float v) { return T(v); });
}

}  // namespace shrink::cpu
