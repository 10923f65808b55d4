// The keys and values of every block for the positions a generation has seen, so that a new token's attention reads
// them instead of recomputing the whole sequence. Stored per block and KV head, position-major:
//   [block][kv_head][position < capacity][head_dim]
// in one of three forms (a recipe option of generation):
//   f32   as computed
//   f16   each value rounded to IEEE half (core/half.hpp), half the bytes
//   int8  each (position, KV head) row symmetric int8 with its own scale, as W8A8 quantizes a token
//         (cpu::quantize_rows_absmax: s = max(max|x| / 127.5, FLT_EPSILON); q = clamp(round(x / s), -128, 127)), a
//         quarter of the bytes plus one float per row
// A reader asks for the first `count` positions of one (block, KV head) as floats: a pointer into the cache (f32) or
// into its scratch, dequantized.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "llama_model.hpp"
#include "shrink/core/affine.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cpu/cast.hpp"
#include "shrink/cpu/quantize.hpp"
#include "shrink/linear/int8.hpp"

namespace llm {

enum class KvForm { f32, f16, int8 };

inline const char* kv_form_name(KvForm f) {
  switch (f) {
    case KvForm::f32: return "f32";
    case KvForm::f16: return "f16";
    case KvForm::int8: return "int8";
  }
  return "?";
}

inline KvForm kv_form_from_name(const std::string& name) {
  for (KvForm f : {KvForm::f32, KvForm::f16, KvForm::int8})
    if (name == kv_form_name(f)) return f;
  shrink::fail("llm::kv_form_from_name", "kv cache form", "\"" + name + "\"", "f32, f16 or int8");
}

class KvCache {
 public:
  KvCache(const LlamaConfig& c, std::int64_t capacity, KvForm form)
      : blocks_(c.blocks), kv_heads_(c.kv_heads), head_dim_(c.head_dim()), capacity_(capacity), form_(form) {
    const char* fn = "llm::KvCache";
    check_config(c, "model configuration");
    if (capacity < 1 || capacity > (std::int64_t{1} << 24))
      shrink::fail(fn, "capacity", capacity, "a position count in [1, 2^24]");
    if (c.context > 0 && capacity > c.context)
      shrink::fail(fn, "capacity", capacity, "at most the model's context length " + std::to_string(c.context));
    const auto values = static_cast<std::size_t>(2 * blocks_ * kv_heads_ * capacity_ * head_dim_);
    switch (form_) {
      case KvForm::f32: f32_.resize(values); break;
      case KvForm::f16: f16_.resize(values); break;
      case KvForm::int8:
        int8_.resize(values);
        scales_.resize(static_cast<std::size_t>(2 * blocks_ * kv_heads_ * capacity_));
        break;
    }
  }

  std::int64_t capacity() const { return capacity_; }
  std::int64_t length() const { return length_; }

  // Bytes held for keys and values (scales included), at full capacity.
  std::int64_t bytes() const {
    return static_cast<std::int64_t>(f32_.size() * sizeof(float) + f16_.size() * sizeof(shrink::half) + int8_.size() +
                                     scales_.size() * sizeof(float));
  }

  // Stores k and v of block b, rows [n, kv_heads · head_dim], at positions length() .. length() + n − 1. The
  // positions count as seen once advance(n) is called (after the last block).
  void store(std::int64_t block, const FloatMatrix& k, const FloatMatrix& v) {
    const char* fn = "llm::KvCache::store";
    if (block < 0 || block >= blocks_) shrink::fail(fn, "block", block, "a block below " + std::to_string(blocks_));
    if (k.cols != kv_heads_ * head_dim_ || v.cols != k.cols || v.rows != k.rows)
      shrink::fail(fn, "k, v", shrink::to_string(shrink::Shape{k.rows, k.cols}),
                   "two [n, " + std::to_string(kv_heads_ * head_dim_) + "] row sets");
    if (length_ + k.rows > capacity_)
      shrink::fail(fn, "positions", length_ + k.rows, "at most the cache's capacity " + std::to_string(capacity_));
    for (int which = 0; which < 2; ++which) {
      const FloatMatrix& x = which == 0 ? k : v;
      // int8: the n · kv_heads rows of head_dim values, each with its scale, in one call
      shrink::quant::QuantizedTensor q;
      if (form_ == KvForm::int8)
        q = shrink::cpu::quantize_rows_absmax(
            shrink::TensorView<const float>(x.values.data(), shrink::Shape{x.rows * kv_heads_, head_dim_}));
      for (std::int64_t t = 0; t < x.rows; ++t)
        for (std::int64_t g = 0; g < kv_heads_; ++g) {
          const std::size_t row = row_index(which, block, g, length_ + t);
          const std::size_t at = row * static_cast<std::size_t>(head_dim_);
          const float* values = x.row(t) + g * head_dim_;
          switch (form_) {
            case KvForm::f32: std::copy(values, values + head_dim_, f32_.data() + at); break;
            case KvForm::f16:
              for (std::int64_t i = 0; i < head_dim_; ++i)
                f16_[at + static_cast<std::size_t>(i)] = shrink::half(values[i]);
              break;
            case KvForm::int8: {
              const std::int64_t source = t * kv_heads_ + g;
              const std::int8_t* quantized = q.int8_view().data() + source * head_dim_;
              std::copy(quantized, quantized + head_dim_, int8_.data() + at);
              scales_[row] = q.qparams.scale[static_cast<std::size_t>(source)];
              break;
            }
          }
        }
    }
  }

  void advance(std::int64_t n) {
    if (n < 0 || length_ + n > capacity_)
      shrink::fail("llm::KvCache::advance", "n", n, "positions that fit in the capacity " + std::to_string(capacity_));
    length_ += n;
  }

  // Forgets every position (a new sequence).
  void clear() { length_ = 0; }

  // Keys (which 0) or values (which 1) of (block, KV head g) at positions [0, count) as floats [count, head_dim].
  const float* rows(int which, std::int64_t block, std::int64_t g, std::int64_t count,
                    std::vector<float>& scratch) const {
    const std::size_t first = row_index(which, block, g, 0);
    if (form_ == KvForm::f32) return f32_.data() + first * static_cast<std::size_t>(head_dim_);
    scratch.resize(static_cast<std::size_t>(count * head_dim_));
    if (form_ == KvForm::f16) {  // the rows are contiguous: one run
      shrink::cpu::half_to_float(f16_.data() + first * static_cast<std::size_t>(head_dim_), scratch.data(),
                                 count * head_dim_);
      return scratch.data();
    }
    for (std::int64_t p = 0; p < count; ++p)
      dequantize_row(first + static_cast<std::size_t>(p), scratch.data() + p * head_dim_);
    return scratch.data();
  }

 private:
  std::size_t row_index(int which, std::int64_t block, std::int64_t g, std::int64_t position) const {
    return static_cast<std::size_t>(((which * blocks_ + block) * kv_heads_ + g) * capacity_ + position);
  }

  // An int8 row as floats, (q − 0) · scale (core/affine.hpp's formula, vectorised).
  void dequantize_row(std::size_t row, float* out) const {
    const std::size_t at = row * static_cast<std::size_t>(head_dim_);
    shrink::cpu::dequantize_run(int8_.data() + at, out, head_dim_, shrink::AffineParams(scales_[row], 0, -128, 127));
  }

  std::int64_t blocks_, kv_heads_, head_dim_, capacity_;
  KvForm form_;
  std::int64_t length_ = 0;
  std::vector<float> f32_;
  std::vector<shrink::half> f16_;
  std::vector<std::int8_t> int8_;
  std::vector<float> scales_;  // int8: one per row
};

}  // namespace llm
