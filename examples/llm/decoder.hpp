// Generation's forward pass: a compressed model, its KV cache (kv_cache.hpp) and the work buffers. feed() runs new
// tokens after those the cache holds, each block's products at M = the new tokens (the whole prompt in batches of
// up to 512, then M = 1 per generated token), attention over every cached position, and returns the logits of the
// last token: logits = (rms_norm(x_last) · output_norm)·Eᵀ, as llama_forward.hpp's window pass computes them.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kv_cache.hpp"
#include "llama_forward.hpp"
#include "shrink/core/error.hpp"
#include "shrink/cpu/softmax_rows.hpp"

namespace llm {

class Decoder {
 public:
  static constexpr std::int64_t kPrefillBatch = 512;  // rows per batch of a long prompt: bounds the work buffers

  // `capacity`: the positions the cache holds (prompt and generated tokens together).
  Decoder(const CompressedModel& m, std::int64_t capacity, KvForm form)
      : model_(m), cache_(m.config, capacity, form), rope_(capacity, m.config.head_dim(), m.config.rope_base) {}

  const KvCache& cache() const { return cache_; }
  std::int64_t position() const { return cache_.length(); }
  // Forgets the sequence (the next feed starts at position 0).
  void clear() { cache_.clear(); }

  // Runs ids[0, count) at positions position() .. position() + count − 1 and returns the logits [vocab] of the last.
  // With `all_logits`, every row's logits are written there too ([count, vocab]; tests). On an error the cache keeps
  // the positions it held before the call.
  const std::vector<float>& feed(const std::int32_t* ids, std::int64_t count, FloatMatrix* all_logits = nullptr) {
    const char* fn = "llm::Decoder::feed";
    const LlamaConfig& c = model_.config;
    if (count < 1) shrink::fail(fn, "count", count, "at least one token");
    if (position() + count > cache_.capacity())
      shrink::fail(fn, "count", count,
                   "at most the " + std::to_string(cache_.capacity() - position()) +
                       " positions left in a context of " + std::to_string(cache_.capacity()));
    for (std::int64_t t = 0; t < count; ++t)
      if (ids[t] < 0 || ids[t] >= c.vocab)
        shrink::fail(fn, ("ids[" + std::to_string(t) + "]").c_str(), ids[t],
                     "a token id below the vocabulary size " + std::to_string(c.vocab));
    if (all_logits != nullptr) *all_logits = FloatMatrix(count, c.vocab);
    const std::int64_t start = position();
    try {
      for (std::int64_t begin = 0; begin < count; begin += kPrefillBatch) {
        const std::int64_t rows = std::min(kPrefillBatch, count - begin);
        run_batch(ids + begin, rows, all_logits, begin);
      }
    } catch (...) {
      cache_.clear();
      cache_.advance(start);
      throw;
    }
    return last_logits_;
  }

 private:
  void run_batch(const std::int32_t* ids, std::int64_t rows, FloatMatrix* all_logits, std::int64_t row_offset) {
    const LlamaConfig& c = model_.config;
    if (!buffers_ || buffers_->h.rows != rows) buffers_ = std::make_unique<BlockBuffers>(rows, c);
    BlockBuffers& buf = *buffers_;
    FloatMatrix x = embed(model_, ids, rows);
    for (std::int64_t b = 0; b < c.blocks; ++b)
      forward_block(model_.blocks[static_cast<std::size_t>(b)], b, c, rope_, x, buf, nullptr, nullptr, &cache_);
    cache_.advance(rows);

    // The head's product for the rows whose logits are wanted: the last row, or all of them.
    const std::int64_t first = all_logits != nullptr ? 0 : rows - 1;
    FloatMatrix last(rows - first, c.width);
    std::copy(x.row(first), x.row(rows - 1) + c.width, last.values.data());
    FloatMatrix normed(last.rows, c.width), logits(last.rows, c.vocab);
    detail::rms_norm(last, model_.output_norm, c.norm_eps, normed);
    model_.head->forward(normed.view(), logits.view(), shrink::Activation::none, buf.scratch);
    if (shrink::cpu::scan_row(logits.row(logits.rows - 1), c.vocab).has_nan)
      shrink::fail("llm::Decoder::feed", ("logits of position " + std::to_string(position() - 1)).c_str(), "NaN",
                   "finite logits");
    last_logits_.assign(logits.row(logits.rows - 1), logits.row(logits.rows - 1) + c.vocab);
    if (all_logits != nullptr) std::copy(logits.values.begin(), logits.values.end(), all_logits->row(row_offset));
  }

  const CompressedModel& model_;
  KvCache cache_;
  detail::RopeTable rope_;
  std::unique_ptr<BlockBuffers> buffers_;
  std::vector<float> last_logits_;
};

}  // namespace llm
