// Perplexity over fixed, non-overlapping windows of a token sequence: window w covers ids[w·n, (w+1)·n), positions
// restart at 0 in each, and every token but a window's first is predicted from those before it in its window:
//   perplexity = exp(Σ NLL / (windows · (n − 1)))
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "llama_forward.hpp"
#include "shrink/core/error.hpp"

namespace llm {

struct WindowSpan {
  std::int64_t window = 512;  // tokens per window
  std::int64_t count = 8;     // windows
  std::int64_t tokens() const { return window * count; }
};

// Checks that `ids` (the tokens of `what`) hold the span's windows.
inline void require_span(const std::vector<std::int32_t>& ids, const WindowSpan& span, const std::string& what) {
  const char* fn = "llm::require_span";
  if (span.window < 2) shrink::fail(fn, "window", span.window, "at least 2 tokens");
  if (span.count < 1) shrink::fail(fn, "windows", span.count, "at least 1 window");
  if (static_cast<std::int64_t>(ids.size()) < span.tokens())
    shrink::fail(fn, (what + ": tokens").c_str(), ids.size(),
                 std::to_string(span.count) + " windows of " + std::to_string(span.window) + " tokens (" +
                     std::to_string(span.tokens()) + "); use a longer text or fewer windows");
}

struct Perplexity {
  double nll_sum = 0.0;
  std::int64_t predictions = 0;
  std::int64_t tokens = 0;  // tokens run through the model
  double seconds = 0.0;     // wall time of the forward passes

  double perplexity() const { return std::exp(nll_sum / static_cast<double>(predictions)); }
  double tokens_per_second() const { return static_cast<double>(tokens) / seconds; }
};

// Runs the span's windows through `m`; `tap`, when given, sees every linear's input (calibration).
inline Perplexity evaluate(const CompressedModel& m, const std::vector<std::int32_t>& ids, const WindowSpan& span,
                           const std::string& what, ActivationTap* tap = nullptr) {
  require_span(ids, span, what);
  Perplexity p;
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t w = 0; w < span.count; ++w) {
    const WindowLoss loss = forward_window(m, ids.data() + w * span.window, span.window, tap);
    p.nll_sum += loss.nll_sum;
    p.predictions += loss.predictions;
    p.tokens += span.window;
  }
  p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

}  // namespace llm
