// One linear layer of the LLM example in whichever form a recipe stored it, and its product through the matching
// shrink CPU path: FP32 (cpu::linear_f32), FP16 / BF16 / INT8 / INT4 weight-only (cpu::linear_weight_only), INT8
// W8A8 with per-token dynamic activations (cpu::linear_int8_dynamic), W4A8 with activations int8 per token and group
// (cpu::linear_w4a8), N:M (cpu::linear_nm) and CSR (cpu::linear_csr).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "shrink/core/activation.hpp"
#include "shrink/core/epilogue.hpp"
#include "shrink/core/view.hpp"
#include "shrink/linear/csr.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/w4a8.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/quant/smoothquant.hpp"
#include "shrink/sparse/memory.hpp"

namespace llm {

class CompressedLinear {
 public:
  using Weight =
      std::variant<shrink::cpu::PackedWeight<float>, shrink::cpu::PackedWeight<shrink::half>,
                   shrink::cpu::PackedWeight<shrink::bfloat16>, shrink::cpu::PackedWeight<std::int8_t>,
                   shrink::cpu::PackedInt4Weight, shrink::cpu::PackedInt8Weight, shrink::cpu::PackedInt4DotWeight,
                   shrink::sparse::NmCompressed<float>, shrink::sparse::Csr<float>>;

  CompressedLinear() = default;
  explicit CompressedLinear(Weight weight, std::vector<float> input_scales = {})
      : weight_(std::move(weight)), input_scales_(std::move(input_scales)) {}

  // SmoothQuant's (or AWQ's) factors for this layer's input (empty: none).
  void set_input_scales(std::vector<float> scales) { input_scales_ = std::move(scales); }
  // The bytes of the stored format when the product runs on another (a format without a kernel of its own, computed
  // with its dequantized weights): what stored_bytes() reports for the weight instead of the product's.
  void set_format_bytes(std::int64_t bytes) { format_bytes_ = bytes; }
  // The weight's columns are the input's in this order (GPTQ's act_order g_idx form: column k reads x[:, order[k]]).
  void set_input_order(std::vector<std::int64_t> order) { input_order_ = std::move(order); }

  std::int64_t rows() const {
    return std::visit([](const auto& w) { return w.rows; }, weight_);
  }
  std::int64_t cols() const {
    return std::visit([](const auto& w) { return w.cols; }, weight_);
  }

  // out [M, rows] = activation(x [M, cols] · Wᵀ). With input scales (factors that no preceding layer could
  // absorb), x is divided by them first, in `scratch`; with an input order, its columns are gathered first.
  void forward(shrink::TensorView<const float> x, shrink::TensorView<float> out, shrink::Activation activation,
               std::vector<float>& scratch) const {
    shrink::Epilogue epilogue;
    epilogue.activation = activation;
    if (!input_scales_.empty()) {
      scratch.assign(x.data(), x.data() + x.numel());
      shrink::TensorView<float> scaled(scratch.data(), x.shape());
      shrink::quant::apply_inverse_smoothing(input_scales_, scaled);
      x = scaled;
    }
    thread_local std::vector<float> gathered;
    if (!input_order_.empty()) {
      const std::int64_t m = x.size(0), n = x.size(1);
      gathered.resize(static_cast<std::size_t>(m * n));
      for (std::int64_t r = 0; r < m; ++r)
        for (std::int64_t j = 0; j < n; ++j)
          gathered[static_cast<std::size_t>(r * n + j)] = x(r, input_order_[static_cast<std::size_t>(j)]);
      x = shrink::TensorView<const float>(gathered.data(), x.shape());
    }
    std::visit([&](const auto& w) { product(x, w, out, epilogue); }, weight_);
  }

  // Bytes the weight takes as stored for deployment (values, scales, zero points, indices), input scales included.
  std::int64_t stored_bytes() const {
    const auto weight = format_bytes_ > 0 ? format_bytes_ : std::visit([](const auto& w) { return bytes(w); }, weight_);
    return weight + static_cast<std::int64_t>(input_scales_.size() * sizeof(float) +
                                              input_order_.size() * sizeof(std::int32_t));  // g_idx as int32
  }

 private:
  template <class T>
  static void product(shrink::TensorView<const float> x, const shrink::cpu::PackedWeight<T>& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    if constexpr (std::is_same<T, float>::value)
      shrink::cpu::linear_f32(x, w, out, e);
    else
      shrink::cpu::linear_weight_only(x, w, out, e);
  }
  static void product(shrink::TensorView<const float> x, const shrink::cpu::PackedInt4Weight& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    shrink::cpu::linear_weight_only(x, w, out, e);
  }
  static void product(shrink::TensorView<const float> x, const shrink::cpu::PackedInt8Weight& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    shrink::cpu::linear_int8_dynamic(x, w, out, e);
  }
  static void product(shrink::TensorView<const float> x, const shrink::cpu::PackedInt4DotWeight& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    shrink::cpu::linear_w4a8(x, w, out, e);
  }
  static void product(shrink::TensorView<const float> x, const shrink::sparse::NmCompressed<float>& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    shrink::cpu::linear_nm(x, w, out, e);
  }
  static void product(shrink::TensorView<const float> x, const shrink::sparse::Csr<float>& w,
                      shrink::TensorView<float> out, const shrink::Epilogue& e) {
    shrink::cpu::linear_csr(x, w, out, e);
  }

  template <class T>
  static std::int64_t bytes(const shrink::cpu::PackedWeight<T>& w) {
    return static_cast<std::int64_t>(w.storage_bytes());
  }
  static std::int64_t bytes(const shrink::cpu::PackedInt4Weight& w) {
    return static_cast<std::int64_t>(w.storage_bytes());
  }
  static std::int64_t bytes(const shrink::cpu::PackedInt8Weight& w) { return w.storage_bytes(); }
  static std::int64_t bytes(const shrink::cpu::PackedInt4DotWeight& w) { return w.storage_bytes(); }
  static std::int64_t bytes(const shrink::sparse::NmCompressed<float>& w) {
    return shrink::sparse::nm_compressed_bytes(w.rows, w.cols, w.pattern, shrink::ScalarType::f32);
  }
  static std::int64_t bytes(const shrink::sparse::Csr<float>& w) {
    return shrink::sparse::csr_bytes(w.rows, w.nnz(), shrink::ScalarType::f32);
  }

  Weight weight_;
  std::vector<float> input_scales_;
  std::vector<std::int64_t> input_order_;
  std::int64_t format_bytes_ = 0;  // 0: the product's own bytes
};

}  // namespace llm
