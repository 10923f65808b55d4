// SmolLM2's pre-tokenization ("smollm"): how text is cut into the pieces that BPE then encodes one by one.
//
// The model's Hugging Face tokenizer.json chains two pre-tokenizers:
//   1. Digits(individual_digits = true): every \p{N} code point becomes a piece of its own;
//   2. ByteLevel(add_prefix_space = false, use_regex = true), on each piece of step 1 separately: the GPT-2 split
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (leftmost alternative first, each quantifier greedy; the contractions are lowercase ASCII only).
// llama.cpp (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM, chosen by the GGUF key tokenizer.ggml.pre =
// "smollm"; the StarCoder family shares it) runs the same two steps: the expression "\p{N}" (each match, one code
// point, a piece; text between matches kept as pieces), then, on each piece, the GPT-2 expression above written
// without its last "|\s+". That string selects llama.cpp's hand-written GPT-2 matcher (src/unicode.cpp), which
// implements the full expression, trailing "|\s+" included; so both definitions give the same pieces.
//
// Because step 2 sees each piece of step 1 alone, a digit ends the text the lookahead (?!\S) can see: "a  1" splits
// as "a", "  ", "1" where GPT-2 alone would give "a", " ", " 1"; and a space before a digit never joins it.
//
// The character classes are those of unicode_classes.hpp (\s is Unicode White_Space, as Oniguruma reads it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "unicode_classes.hpp"
#include "utf8.hpp"

namespace llm {

namespace detail {

// The text decoded once: the byte offset and class of each code point, and the code point where the split needs it.
struct DecodedText {
  std::vector<std::size_t> offsets;  // offsets[i]: first byte of code point i; offsets[n] = text size
  std::vector<unicode::CharClass> classes;
  std::vector<std::uint32_t> code_points;
};

inline DecodedText decode_classes(std::string_view text) {
  DecodedText d;
  for (std::size_t offset = 0; offset < text.size();) {
    const utf8::Decoded c = utf8::decode_one(text, offset);
    if (c.length == 0) utf8::require_valid(text, "llm::smollm_pre_tokenize", "text");  // throws, naming the byte
    d.offsets.push_back(offset);
    d.classes.push_back(unicode::char_class(c.code_point));
    d.code_points.push_back(c.code_point);
    offset += c.length;
  }
  d.offsets.push_back(text.size());
  return d;
}

// The end (in code points) of the GPT-2 match that starts at code point i of the piece [.., end).
inline std::size_t gpt2_match_end(const DecodedText& d, std::size_t i, std::size_t end) {
  using unicode::CharClass;
  const auto run_end = [&](std::size_t from, CharClass c) {  // end of the run of class c starting at from
    while (from < end && d.classes[from] == c) ++from;
    return from;
  };
  const std::uint32_t c = d.code_points[i];
  // 's|'t|'re|'ve|'m|'ll|'d
  if (c == '\'' && i + 1 < end) {
    const std::uint32_t n1 = d.code_points[i + 1];
    if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') return i + 2;
    if (i + 2 < end) {
      const std::uint32_t n2 = d.code_points[i + 2];
      if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) return i + 3;
    }
  }
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+' in that order: one class, after an optional space U+0020.
  for (const CharClass cls : {CharClass::kLetter, CharClass::kNumber, CharClass::kOther}) {
    if (d.classes[i] == cls) return run_end(i, cls);
    if (c == ' ' && i + 1 < end && d.classes[i + 1] == cls) return run_end(i + 1, cls);
  }
  // '\s+(?!\S)': the whitespace run, less its last code point when a non-space follows it; then '\s+'.
  const std::size_t j = run_end(i, CharClass::kWhitespace);
  if (j < end && j - i >= 2) return j - 1;
  return j;
}

}  // namespace detail

// Calls emit(piece) for each pre-token of `text`, in order; the pieces are views into `text` and tile it.
// Throws shrink::Error naming the byte offset when `text` is not valid UTF-8 (before any call to emit).
template <class Emit>
void smollm_pre_tokenize(std::string_view text, Emit&& emit) {
  const detail::DecodedText d = detail::decode_classes(text);
  const std::size_t n = d.classes.size();
  const auto piece = [&](std::size_t from, std::size_t to) {
    emit(text.substr(d.offsets[from], d.offsets[to] - d.offsets[from]));
  };
  // Step 1 (Digits): pieces between numbers, each number alone; step 2 (GPT-2 split) within each.
  std::size_t start = 0;
  for (std::size_t k = 0; k <= n; ++k) {
    if (k < n && d.classes[k] != unicode::CharClass::kNumber) continue;
    for (std::size_t i = start; i < k;) {
      const std::size_t j = detail::gpt2_match_end(d, i, k);
      piece(i, j);
      i = j;
    }
    if (k < n) piece(k, k + 1);
    start = k + 1;
  }
}

// The pre-tokens of `text` as views into it.
inline std::vector<std::string_view> smollm_pre_tokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  smollm_pre_tokenize(text, [&](std::string_view p) { pieces.push_back(p); });
  return pieces;
}

}  // namespace llm
