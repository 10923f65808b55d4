// Text generation: the prompt through the model in batches (prefill), then one token at a time (decode), each next
// token drawn by the sampler from the last logits, until a stop token, the token limit or the end of the context.
// Prefill's time covers the prompt's forward pass; decode's covers the one-token passes (every generated token but
// the last, whose logits are never needed) and the sampling.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "decoder.hpp"
#include "sampler.hpp"
#include "shrink/core/error.hpp"

namespace llm {

struct GenerateOptions {
  std::int64_t max_tokens = 128;
  SamplingOptions sampling;
  std::vector<std::int32_t> stop_ids;  // generation ends on any of these (which is not counted as generated)
};

struct Generation {
  std::vector<std::int32_t> ids;  // generated, the stop token excluded
  std::int64_t prompt_tokens = 0;
  std::int64_t decode_passes = 0;
  double prefill_seconds = 0.0;
  double decode_seconds = 0.0;
  std::string stop;  // "stop token", "token limit" or "context full"

  double prefill_tokens_per_second() const { return static_cast<double>(prompt_tokens) / prefill_seconds; }
  double decode_tokens_per_second() const { return static_cast<double>(decode_passes) / decode_seconds; }
};

// Generates after `prompt` from the decoder's current position (clear() it for a new sequence). on_token(id) sees
// each generated token as soon as it is drawn.
template <class OnToken>
Generation generate(Decoder& decoder, const std::vector<std::int32_t>& prompt, const GenerateOptions& o,
                    OnToken&& on_token) {
  const char* fn = "llm::generate";
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) shrink::fail(fn, "prompt", "no tokens", "at least one token");
  if (o.max_tokens < 1) shrink::fail(fn, "max_tokens", o.max_tokens, "at least 1");
  Sampler sampler(o.sampling);
  Generation g;
  g.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  auto start = clock::now();
  const std::vector<float>* logits = &decoder.feed(prompt.data(), g.prompt_tokens);
  g.prefill_seconds = std::chrono::duration<double>(clock::now() - start).count();
  const auto vocab = static_cast<std::int64_t>(logits->size());
  start = clock::now();
  for (;;) {
    const std::int32_t next = sampler.next(logits->data(), vocab);
    if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) {
      g.stop = "stop token";
      break;
    }
    g.ids.push_back(next);
    on_token(next);
    if (static_cast<std::int64_t>(g.ids.size()) >= o.max_tokens) {
      g.stop = "token limit";
      break;
    }
    if (decoder.position() >= decoder.cache().capacity()) {
      g.stop = "context full";
      break;
    }
    logits = &decoder.feed(&next, 1);
    ++g.decode_passes;
  }
  g.decode_seconds = std::chrono::duration<double>(clock::now() - start).count();
  return g;
}

}  // namespace llm
