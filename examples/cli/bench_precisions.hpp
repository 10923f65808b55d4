// The precisions `shrink bench` compares, as backends that prepare a weight once and then run Y = X · Wᵀ.
//
// A backend turns one float weight [N, K] into PreparedPrecision rows (name, what is stored, bytes, and a run
// function). The CPU backend gives the rows below; a GPU backend adds its own rows the same way, with its device
// name, and the command times and reports them beside the CPU ones.
//   fp32              float weights, shrink's panel kernel (AVX-512/AVX2 FMA): the reference for speed and error
//   fp32-eigen        float weights, Eigen's GEMM as compiled (no -march: SSE2), for comparison
//   fp16-weights      weights stored as IEEE half, converted on the fly, arithmetic in float
//   bf16-weights      weights stored as bfloat16, converted on the fly, arithmetic in float
//   int8-w8a8         int8 weights per output channel, activations quantized per token at run time, int32 sums
//   int8-weight-only  int8 weights per output channel converted on the fly, float activations and arithmetic
//   2:4-sparse        magnitude 2:4 pruning, float values + a position byte each (sparse/nm_compressed.hpp)
//   csr-90%           magnitude pruning of 90% of the weights, CSR with float values and int32 indices
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shrink/linear/csr.hpp"
#include "shrink/linear/f32.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/linear/nm.hpp"
#include "shrink/linear/weight_only.hpp"
#include "shrink/prune/unstructured.hpp"
#include "shrink/quant/quantize.hpp"
#include "shrink/sparse/csr.hpp"
#include "shrink/sparse/memory.hpp"
#include "shrink/sparse/nm_compressed.hpp"

namespace shrink::cli {

struct PreparedPrecision {
  std::string name;               // the row's name, e.g. "int8-w8a8"
  std::string device;             // "cpu", or a GPU's name
  std::string stored;             // what the weight is stored as, in words
  std::int64_t weight_bytes = 0;  // the weight as stored: values, scales, indices, metadata
  std::function<void(TensorView<const float> x, TensorView<float> y)> run;  // y = x · Wᵀ
};

// The names of every CPU precision, in the order rows are shown.
inline const std::vector<std::string>& cpu_precision_names() {
  static const std::vector<std::string> names = {"fp32",      "fp32-eigen",       "fp16-weights", "bf16-weights",
                                                 "int8-w8a8", "int8-weight-only", "2:4-sparse",   "csr-90%"};
  return names;
}

// Prepares the selected CPU precisions of the float weight w [N, K] (the returned rows own their data).
inline std::vector<PreparedPrecision> prepare_cpu_precisions(const std::vector<float>& w, std::int64_t n,
                                                             std::int64_t k, const std::vector<std::string>& selected) {
  auto wanted = [&](const char* name) {
    for (const std::string& s : selected)
      if (s == name) return true;
    return false;
  };
  const TensorView<const float> view(w.data(), Shape{n, k});
  std::vector<PreparedPrecision> rows;
  auto add = [&](const char* name, std::string stored, std::int64_t bytes, auto run) {
    rows.push_back(PreparedPrecision{name, "cpu", std::move(stored), bytes, std::move(run)});
  };
  if (wanted("fp32")) {
    auto packed = std::make_shared<cpu::PackedWeight<float>>(cpu::pack_weight(view));
    add("fp32", "float32", packed->storage_bytes(),
        [packed](TensorView<const float> x, TensorView<float> y) { cpu::linear_f32(x, *packed, y); });
  }
  if (wanted("fp32-eigen")) {
    add("fp32-eigen", "float32, Eigen GEMM", n * k * 4,
        [view](TensorView<const float> x, TensorView<float> y) { cpu::linear_f32_eigen(x, view, y); });
  }
  if (wanted("fp16-weights")) {
    auto packed = std::make_shared<cpu::PackedWeight<half>>(cpu::pack_weight_as<half>(view));
    add("fp16-weights", "float16 weights, float math", packed->storage_bytes(),
        [packed](TensorView<const float> x, TensorView<float> y) { cpu::linear_weight_only(x, *packed, y); });
  }
  if (wanted("bf16-weights")) {
    auto packed = std::make_shared<cpu::PackedWeight<bfloat16>>(cpu::pack_weight_as<bfloat16>(view));
    add("bf16-weights", "bfloat16 weights, float math", packed->storage_bytes(),
        [packed](TensorView<const float> x, TensorView<float> y) { cpu::linear_weight_only(x, *packed, y); });
  }
  if (wanted("int8-w8a8") || wanted("int8-weight-only")) {
    const auto q =
        quant::quantize(view, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
    if (wanted("int8-w8a8")) {
      auto packed = std::make_shared<cpu::PackedInt8Weight>(cpu::pack_int8_weight(q));
      add("int8-w8a8", "int8 per channel; activations int8 per token", packed->storage_bytes(),
          [packed](TensorView<const float> x, TensorView<float> y) { cpu::linear_int8_dynamic(x, *packed, y); });
    }
    if (wanted("int8-weight-only")) {
      auto packed = std::make_shared<cpu::PackedWeight<std::int8_t>>(cpu::pack_weight(q));
      add("int8-weight-only", "int8 per channel, float math", packed->storage_bytes(),
          [packed](TensorView<const float> x, TensorView<float> y) { cpu::linear_weight_only(x, *packed, y); });
    }
  }
  if (wanted("2:4-sparse")) {
    auto nm = std::make_shared<sparse::NmCompressed<float>>(sparse::compress_nm(view, prune::NmPattern{2, 4}));
    add("2:4-sparse", "2:4 pruned, float values + positions",
        sparse::nm_compressed_bytes(n, k, prune::NmPattern{2, 4}, ScalarType::f32),
        [nm](TensorView<const float> x, TensorView<float> y) { cpu::linear_nm(x, *nm, y); });
  }
  if (wanted("csr-90%")) {
    auto csr = std::make_shared<sparse::Csr<float>>(
        sparse::to_csr(view, prune::l1_unstructured_mask(view, prune::Amount::fraction(0.9))));
    add("csr-90%", "90% pruned, CSR float + int32 indices", sparse::csr_bytes(n, csr->nnz(), ScalarType::f32),
        [csr](TensorView<const float> x, TensorView<float> y) { cpu::linear_csr(x, *csr, y); });
  }
  return rows;
}

}  // namespace shrink::cli
