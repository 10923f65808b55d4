// The llama forward pass of the LLM example over a model whose linears are CompressedLinear, and the negative
// log-likelihood of a window of tokens (perplexity's sum).
//
// Per block (x: [T, width], positions 0..T-1 within the window):
//   h = rms_norm(x) · attn_norm                       rms_norm(x) = x / sqrt(mean(x²) + eps)
//   q, k, v = h·Wqᵀ, h·Wkᵀ, h·Wvᵀ;  q, k rotated (RoPE on adjacent pairs, θ_i = pos · base^(-2i/head_dim))
//   a_h = softmax(q_h·k_gᵀ / sqrt(head_dim) + causal mask) · v_g     g = h / (heads / kv_heads)
//   x += a·Woᵀ
//   h = rms_norm(x) · ffn_norm;  x += (silu(h·Wgateᵀ) ⊙ h·Wupᵀ)·Wdownᵀ
// then logits = (rms_norm(x) · output_norm)·Eᵀ, E the output head (the embedding when tied), and
//   NLL = Σ_{t < T-1} (logsumexp(logits[t]) − logits[t, id[t+1]])   (in double).
// The gate's SiLU is the gate product's epilogue (shrink::Activation::silu).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compressed_linear.hpp"
#include "kv_cache.hpp"
#include "llama_model.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/cpu/few_row_products.hpp"
#include "shrink/cpu/softmax_rows.hpp"
#include "shrink/linear/f32.hpp"

namespace llm {

struct CompressedBlock {
  std::vector<float> attn_norm;
  std::vector<float> ffn_norm;
  std::array<CompressedLinear, kLinearsPerBlock> linears;

  CompressedLinear& linear(LinearSlot s) { return linears[static_cast<std::size_t>(s)]; }
  const CompressedLinear& linear(LinearSlot s) const { return linears[static_cast<std::size_t>(s)]; }
};

// The output head [vocab, width] in any form a linear takes, shared by the models that use it.
using SharedHead = std::shared_ptr<const CompressedLinear>;

// The model's head in float32, as the recipes' table keeps it.
inline SharedHead float_head(const LlamaWeights& w) {
  return std::make_shared<const CompressedLinear>(shrink::cpu::pack_weight(w.output_head().view()));
}

// What a recipe produces: compressed linears per block; the embedding and the norms stay float32, and so does the
// head in the table (float_head; generation may store it otherwise: recipes.hpp's HeadForm).
struct CompressedModel {
  LlamaConfig config;
  const FloatMatrix* embedding = nullptr;  // [vocab, width], the source weights' own
  SharedHead head;                         // [vocab, width]
  std::vector<float> output_norm;
  std::vector<CompressedBlock> blocks;

  // Bytes of every block linear as stored (what the recipes compress).
  std::int64_t linear_bytes() const {
    std::int64_t total = 0;
    for (const CompressedBlock& b : blocks)
      for (const CompressedLinear& l : b.linears) total += l.stored_bytes();
    return total;
  }
};

// Receives the input of every linear during a forward pass (calibration): x is [T, in].
class ActivationTap {
 public:
  virtual ~ActivationTap() = default;
  virtual void observe(std::int64_t block, LinearInput input, shrink::TensorView<const float> x) = 0;
};

struct WindowLoss {
  double nll_sum = 0.0;
  std::int64_t predictions = 0;
};

namespace detail {

// out[t] = x[t] / sqrt(mean(x[t]²) + eps) · gamma, row by row on the executor.
inline void rms_norm(const FloatMatrix& x, const std::vector<float>& gamma, float eps, FloatMatrix& out) {
  const std::int64_t n = x.cols;
  shrink::parallel_for(
      x.rows, shrink::chunk_size(x.rows, 4.0 * static_cast<double>(n)), [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t t = b; t < e; ++t) {
          const float* row = x.row(t);
          double squares = 0.0;
          for (std::int64_t j = 0; j < n; ++j) squares += static_cast<double>(row[j]) * row[j];
          const float inv = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(n)) + eps);
          float* y = out.row(t);
          for (std::int64_t j = 0; j < n; ++j) y[j] = row[j] * inv * gamma[static_cast<std::size_t>(j)];
        }
      });
}

// cos / sin of θ_i = pos · base^(-2i/d) for pos < T, i < d/2 (in double, then float), [T, d/2] each.
struct RopeTable {
  std::int64_t half = 0;
  std::vector<float> cos, sin;
  RopeTable(std::int64_t tokens, std::int64_t head_dim, float base) : half(head_dim / 2) {
    cos.resize(static_cast<std::size_t>(tokens * half));
    sin.resize(cos.size());
    std::vector<double> inv(static_cast<std::size_t>(half));  // base^(-2i/d), once per i
    for (std::int64_t i = 0; i < half; ++i)
      inv[static_cast<std::size_t>(i)] =
          std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    for (std::int64_t t = 0; t < tokens; ++t)
      for (std::int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(t) * inv[static_cast<std::size_t>(i)];
        cos[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::cos(angle));
        sin[static_cast<std::size_t>(t * half + i)] = static_cast<float>(std::sin(angle));
      }
  }
};

// Rotates each head's adjacent pairs (x[2i], x[2i+1]) of every row of x [T, heads · head_dim] in place; row t is
// at position first + t.
inline void apply_rope(FloatMatrix& x, std::int64_t head_dim, const RopeTable& rope, std::int64_t first = 0) {
  const std::int64_t heads = x.cols / head_dim;
  for (std::int64_t t = 0; t < x.rows; ++t) {
    const float* c = rope.cos.data() + (first + t) * rope.half;
    const float* s = rope.sin.data() + (first + t) * rope.half;
    for (std::int64_t h = 0; h < heads; ++h) {
      float* v = x.row(t) + h * head_dim;
      for (std::int64_t i = 0; i < rope.half; ++i) {
        const float even = v[2 * i], odd = v[2 * i + 1];
        v[2 * i] = even * c[i] - odd * s[i];
        v[2 * i + 1] = even * s[i] + odd * c[i];
      }
    }
  }
}

// row[0, seen) ← softmax(row[0, seen) · scale), row[seen, width) ← 0 (the causal mask), by shrink's vectorised row
// passes: softmax_j = exp((z_j − max) · scale) / S.
inline void masked_softmax_row(float* row, std::int64_t seen, std::int64_t width, float scale) {
  const float top = shrink::cpu::scan_row(row, seen).max;
  const double sum = shrink::cpu::single_sums(row, seen, top, scale).first;
  shrink::cpu::scaled_softmax_gradient(row, row, seen, top, scale, static_cast<float>(1.0 / sum), 0.0f, false);
  std::fill(row + seen, row + width, 0.0f);
}

// a[:, head h] = softmax(q_h·k_gᵀ / sqrt(d) + causal mask)·v_g for the rows of q at positions first .. first + n − 1
// over the keys and values of positions [0, context): row i sees positions 0 .. first + i. kv_rows(which, g, buffer)
// gives KV head g's keys (which 0) or values (which 1) as floats [context, d], in `buffer` or elsewhere.
// Per KV head g, its query heads' rows are stacked ([group·n, d]). Many rows (a window, a prompt) run both products
// on linear_f32 (k_g and v_gᵀ packed as its weights), the heads one after another with each product on the
// executor: Eigen's product, as this project compiles it (no -march), runs SSE2 only and took a quarter of the
// forward pass. A few rows (one generated token) read the keys and values once for all of a KV head's query rows
// (cpu::row_dots, cpu::weighted_rows: AVX2), the KV heads side by side on the executor.
template <class KvRows>
void attention(const FloatMatrix& q, std::int64_t first, std::int64_t context, const LlamaConfig& c, KvRows&& kv_rows,
               FloatMatrix& a) {
  const std::int64_t n = q.rows, d = c.head_dim(), group = c.heads / c.kv_heads, rows = group * n;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const bool packed_products = rows >= 32;
  auto one_head = [&](std::int64_t g) {
    std::vector<float> key_buffer, value_buffer;
    FloatMatrix qg(rows, d), scores(rows, context), out(rows, d);
    for (std::int64_t j = 0; j < group; ++j)
      for (std::int64_t i = 0; i < n; ++i)
        std::copy(q.row(i) + (g * group + j) * d, q.row(i) + (g * group + j + 1) * d, qg.row(j * n + i));
    const float* keys = kv_rows(0, g, key_buffer);
    const float* values = kv_rows(1, g, value_buffer);
    // Row r is query position first + r mod n of head g·group + r / n.
    auto softmax_rows = [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) masked_softmax_row(scores.row(r), first + r % n + 1, context, scale);
    };
    if (packed_products) {
      shrink::TensorView<const float> kg(keys, shrink::Shape{context, d});
      shrink::cpu::linear_f32(qg.view(), shrink::cpu::pack_weight(kg), scores.view());
      shrink::parallel_for(rows, shrink::chunk_size(rows, 8.0 * static_cast<double>(context)), softmax_rows);
      FloatMatrix vg_t(d, context);
      for (std::int64_t p = 0; p < context; ++p)
        for (std::int64_t e = 0; e < d; ++e) vg_t.row(e)[p] = values[p * d + e];
      shrink::cpu::linear_f32(scores.view(), shrink::cpu::pack_weight(vg_t.view()), out.view());
    } else {  // the few rows read k_g and v_g in place (cpu/few_row_products.hpp): a matrix product would pack them
      shrink::cpu::row_dots(keys, context, d, qg.row(0), rows, scores.row(0));
      softmax_rows(0, rows);
      shrink::cpu::weighted_rows(values, context, d, scores.row(0), rows, out.row(0));
    }
    for (std::int64_t j = 0; j < group; ++j)
      for (std::int64_t i = 0; i < n; ++i)
        std::copy(out.row(j * n + i), out.row(j * n + i) + d, a.row(i) + (g * group + j) * d);
  };
  if (packed_products) {
    for (std::int64_t g = 0; g < c.kv_heads; ++g) one_head(g);
  } else {
    const double cost = 4.0 * static_cast<double>(rows * context * d);
    shrink::parallel_for(c.kv_heads, shrink::chunk_size(c.kv_heads, cost, 65536.0),
                         [&](std::int64_t b, std::int64_t e) {
                           for (std::int64_t g = b; g < e; ++g) one_head(g);
                         });
  }
}

// Attention within one window: positions 0 .. T − 1, the keys and values those of the window itself.
inline void window_attention(const FloatMatrix& q, const FloatMatrix& k, const FloatMatrix& v, const LlamaConfig& c,
                             FloatMatrix& a) {
  const std::int64_t d = c.head_dim();
  attention(
      q, 0, q.rows, c,
      [&](int which, std::int64_t g, std::vector<float>& buffer) {
        const FloatMatrix& x = which == 0 ? k : v;
        buffer.resize(static_cast<std::size_t>(x.rows * d));
        for (std::int64_t p = 0; p < x.rows; ++p)
          std::copy(x.row(p) + g * d, x.row(p) + (g + 1) * d, buffer.data() + p * d);
        return static_cast<const float*>(buffer.data());
      },
      a);
}

inline void add_into(FloatMatrix& x, const FloatMatrix& y) {
  for (std::size_t i = 0; i < x.values.size(); ++i) x.values[i] += y.values[i];
}

}  // namespace detail

// The work buffers of one block over T tokens.
struct BlockBuffers {
  FloatMatrix h, q, k, v, a, o, gate, up;
  std::vector<float> scratch;
  BlockBuffers(std::int64_t tokens, const LlamaConfig& c)
      : h(tokens, c.width),
        q(tokens, c.width),
        k(tokens, c.kv_width()),
        v(tokens, c.kv_width()),
        a(tokens, c.width),
        o(tokens, c.width),
        gate(tokens, c.ffn),
        up(tokens, c.ffn) {}
};

// Block b on the hidden states x [T, width], in place (positions 0..T-1). `tap`, when given, sees each linear's
// input; with `stop_after`, the pass ends right after the tap saw that input (x is then partly updated: for
// calibration passes on a copy). With a `cache` (generation), the rows are positions cache->length() onwards (the
// rope table must cover them), their keys and values are stored in it, and they attend to every cached position;
// the caller advances the cache after the last block.
inline void forward_block(const CompressedBlock& block, std::int64_t b, const LlamaConfig& c,
                          const detail::RopeTable& rope, FloatMatrix& x, BlockBuffers& buf,
                          ActivationTap* tap = nullptr, const LinearInput* stop_after = nullptr,
                          KvCache* cache = nullptr) {
  auto run = [&](LinearSlot s, const FloatMatrix& in, FloatMatrix& out, shrink::Activation act) {
    block.linear(s).forward(in.view(), out.view(), act, buf.scratch);
  };
  auto observe = [&](LinearInput input, const FloatMatrix& in) {
    if (tap) tap->observe(b, input, in.view());
    return stop_after != nullptr && *stop_after == input;
  };
  detail::rms_norm(x, block.attn_norm, c.norm_eps, buf.h);
  if (observe(LinearInput::attention, buf.h)) return;
  run(LinearSlot::q, buf.h, buf.q, shrink::Activation::none);
  run(LinearSlot::k, buf.h, buf.k, shrink::Activation::none);
  run(LinearSlot::v, buf.h, buf.v, shrink::Activation::none);
  if (cache == nullptr) {
    detail::apply_rope(buf.q, c.head_dim(), rope);
    detail::apply_rope(buf.k, c.head_dim(), rope);
    detail::window_attention(buf.q, buf.k, buf.v, c, buf.a);
  } else {  // positions continue after what the cache holds; this block's keys and values join it
    const std::int64_t first = cache->length();
    detail::apply_rope(buf.q, c.head_dim(), rope, first);
    detail::apply_rope(buf.k, c.head_dim(), rope, first);
    cache->store(b, buf.k, buf.v);
    detail::attention(
        buf.q, first, first + buf.q.rows, c,
        [&](int which, std::int64_t g, std::vector<float>& buffer) {
          return cache->rows(which, b, g, first + buf.q.rows, buffer);
        },
        buf.a);
  }
  if (observe(LinearInput::attention_output, buf.a)) return;
  run(LinearSlot::o, buf.a, buf.o, shrink::Activation::none);
  detail::add_into(x, buf.o);

  detail::rms_norm(x, block.ffn_norm, c.norm_eps, buf.h);
  if (observe(LinearInput::ffn, buf.h)) return;
  run(LinearSlot::gate, buf.h, buf.gate, shrink::Activation::silu);
  run(LinearSlot::up, buf.h, buf.up, shrink::Activation::none);
  for (std::size_t i = 0; i < buf.gate.values.size(); ++i) buf.gate.values[i] *= buf.up.values[i];
  if (observe(LinearInput::ffn_down, buf.gate)) return;
  run(LinearSlot::down, buf.gate, buf.o, shrink::Activation::none);
  detail::add_into(x, buf.o);
}

// The embedding rows of ids [count] as hidden states [count, width].
inline FloatMatrix embed(const CompressedModel& m, const std::int32_t* ids, std::int64_t count) {
  FloatMatrix x(count, m.config.width);
  for (std::int64_t t = 0; t < count; ++t)
    std::copy(m.embedding->row(ids[t]), m.embedding->row(ids[t]) + m.config.width, x.row(t));
  return x;
}

// The NLL of ids[1..count-1] given their prefixes in this window (count - 1 predictions). `tap`, when given, sees
// every linear's input; `logits_out`, when given, receives the logits of positions 0 .. count − 2 ([count − 1, vocab]
// row-major). Token ids must be < vocab.
inline WindowLoss forward_window(const CompressedModel& m, const std::int32_t* ids, std::int64_t count,
                                 ActivationTap* tap = nullptr, std::vector<float>* logits_out = nullptr) {
  const char* fn = "llm::forward_window";
  const LlamaConfig& c = m.config;
  if (count < 2) shrink::fail(fn, "count", count, "a window of at least 2 tokens");
  for (std::int64_t t = 0; t < count; ++t)
    if (ids[t] < 0 || ids[t] >= c.vocab)
      shrink::fail(fn, ("ids[" + std::to_string(t) + "]").c_str(), ids[t],
                   "a token id below the vocabulary size " + std::to_string(c.vocab));

  FloatMatrix x = embed(m, ids, count);
  BlockBuffers buf(count, c);
  FloatMatrix& h = buf.h;
  const detail::RopeTable rope(count, c.head_dim(), c.rope_base);
  for (std::int64_t b = 0; b < c.blocks; ++b)
    forward_block(m.blocks[static_cast<std::size_t>(b)], b, c, rope, x, buf, tap);
  detail::rms_norm(x, m.output_norm, c.norm_eps, h);

  // Logits in chunks of rows, each row's log-softmax with its sum in double.
  WindowLoss loss;
  if (logits_out) logits_out->assign(static_cast<std::size_t>((count - 1) * c.vocab), 0.0f);
  const std::int64_t chunk = 64;
  FloatMatrix logits(std::min<std::int64_t>(chunk, count - 1), c.vocab);
  for (std::int64_t begin = 0; begin < count - 1; begin += chunk) {
    const std::int64_t rows = std::min<std::int64_t>(chunk, count - 1 - begin);
    shrink::TensorView<const float> in(h.row(begin), shrink::Shape{rows, c.width});
    shrink::TensorView<float> out(logits.values.data(), shrink::Shape{rows, c.vocab});
    m.head->forward(in, out, shrink::Activation::none, buf.scratch);
    if (logits_out)
      std::copy(logits.values.begin(), logits.values.begin() + rows * c.vocab, logits_out->begin() + begin * c.vocab);
    std::vector<double> row_nll(static_cast<std::size_t>(rows));
    shrink::parallel_for(rows, 1, [&](std::int64_t rb, std::int64_t re) {
      for (std::int64_t r = rb; r < re; ++r) {
        const float* z = logits.row(r);
        const shrink::cpu::RowScan scan = shrink::cpu::scan_row(z, c.vocab);
        if (scan.has_nan)
          shrink::fail(fn, ("logits of position " + std::to_string(begin + r)).c_str(), "NaN", "finite logits");
        // log S with S = Σ exp(z_j − max) summed in double: shrink's vectorised row pass (cpu/softmax_rows.hpp)
        const double sum = shrink::cpu::single_sums(z, c.vocab, scan.max, 1.0f).first;
        row_nll[static_cast<std::size_t>(r)] = std::log(sum) + scan.max - z[ids[begin + r + 1]];
      }
    });
    for (double v : row_nll) loss.nll_sum += v;  // in row order: the same sum on any executor
    loss.predictions += rows;
  }
  return loss;
}

}  // namespace llm
