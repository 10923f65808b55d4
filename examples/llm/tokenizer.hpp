// SmolLM2's tokenizer: byte-level BPE (GPT-2's scheme) over the "smollm" pre-tokenization, matching the model's
// Hugging Face tokenizer (tokenizers' BPE model with the Digits + ByteLevel pre-tokenizers and the ByteLevel decoder).
//
// encode(text):
//   1. text must be valid UTF-8 (utf8.hpp); otherwise shrink::Error naming the offset of the first bad byte.
//   2. smollm_pre_tokenize (pre_tokenizer.hpp) cuts it into pieces.
//   3. Each piece's bytes become symbols of the byte-level alphabet (byte_level.hpp), one token id per byte (a byte
//      without a token is dropped, see below); then, while some adjacent pair of symbols is a merge, the pair of
//      lowest merge rank (leftmost among equals) is replaced by the merged token. The ids of the remaining symbols,
//      piece after piece, are the result.
// decode(ids): the bytes of each token, concatenated.
//
// Choices, where the Hugging Face tokenizer is not simply followed:
//   - Special tokens (token_type 3 in the GGUF, such as <|im_start|>) are ordinary vocabulary entries here: their
//     literal text in the input is split and merged like any other text, never mapped to the special id. The
//     Hugging Face tokenizer of the model matches added tokens first; evaluation text (plain prose) never holds them.
//   - decode returns the exact bytes, which are not valid UTF-8 when the ids cut a character in two; Hugging Face
//     replaces such bytes with U+FFFD.
//   - A byte whose single-symbol token is not in the vocabulary is dropped, and its neighbours become adjacent (and
//     may merge): Hugging Face's BPE does the same when there is no unknown token (checked on "+\x04+" -> "++").
//     SmolLM2 lacks 21 of the 256: 0xC0 0xC1 0xF5..0xFF, never in valid UTF-8; 0xF1 0xF2, the lead bytes of
//     U+40000..U+BFFFF (planes 4 to 11, unassigned); and the controls 0x04 0x06 0x13 0x14 0x16 0x1D. So
//     decode(encode(text)) == text exactly for text without those six controls and those planes.
//   - A token whose text holds a code point outside the byte-level alphabet (none in SmolLM2's vocabulary) decodes
//     to its own UTF-8 text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "byte_level.hpp"
#include "pre_tokenizer.hpp"
#include "shrink/core/error.hpp"
#include "utf8.hpp"

namespace llm {

class BpeTokenizer {
 public:
  // tokens[id]: the text of token id in the byte-level alphabet ("Ġthe" for " the"), each distinct and non-empty.
  // merges[rank]: "left right", two tokens whose
  // concatenation is a token; the earlier a merge, the sooner it applies. Throws shrink::Error naming the index.
  BpeTokenizer(std::vector<std::string> tokens, const std::vector<std::string>& merges) : tokens_(std::move(tokens)) {
    const char* fn = "llm::BpeTokenizer";
    if (tokens_.empty() || tokens_.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      shrink::fail(fn, "tokens.size()", tokens_.size(), "1 to 2^31-1 tokens");
    if (merges.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
      shrink::fail(fn, "merges.size()", merges.size(), "at most 2^31-1 merges");
    ids_.reserve(tokens_.size());
    token_bytes_.reserve(tokens_.size());
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
      const std::string& token = tokens_[id];
      const std::string argument = "tokens[" + std::to_string(id) + "]";
      if (token.empty()) shrink::fail(fn, argument.c_str(), "\"\"", "a non-empty token");
      utf8::require_valid(token, fn, argument.c_str());
      const auto [where, inserted] = ids_.emplace(token, static_cast<std::int32_t>(id));
      if (!inserted)
        shrink::fail(fn, argument.c_str(), quoted(token),
                     "a token not already at index " + std::to_string(where->second));
      token_bytes_.push_back(bytes_of(token));
    }
    for (unsigned byte = 0; byte < 256; ++byte) {
      std::string symbol;
      utf8::append(symbol, byte_level::code_point_of(static_cast<std::uint8_t>(byte)));
      byte_ids_[byte] = id_of(symbol);  // -1: the byte has no token and is dropped
    }
    merges_.reserve(merges.size());
    for (std::size_t rank = 0; rank < merges.size(); ++rank) {
      const std::string& merge = merges[rank];
      const std::string argument = "merges[" + std::to_string(rank) + "]";
      const std::size_t space = merge.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == merge.size() ||
          merge.find(' ', space + 1) != std::string::npos)
        shrink::fail(fn, argument.c_str(), quoted(merge), "\"left right\": two non-empty tokens and one space");
      const std::string left = merge.substr(0, space), right = merge.substr(space + 1);
      const std::int32_t left_id = id_of(left), right_id = id_of(right), merged_id = id_of(left + right);
      if (left_id < 0 || right_id < 0 || merged_id < 0)
        shrink::fail(fn, argument.c_str(), quoted(merge),
                     "tokens on both sides and their concatenation a token; " +
                         quoted(left_id < 0    ? left
                                : right_id < 0 ? right
                                               : left + right) +
                         " is not one");
      const auto [where, inserted] =
          merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<std::int32_t>(rank), merged_id});
      if (!inserted)
        shrink::fail(fn, argument.c_str(), quoted(merge),
                     "a merge not already at rank " + std::to_string(where->second.rank));
    }
  }

  std::size_t vocab_size() const { return tokens_.size(); }

  // The text of token id in the byte-level alphabet, as given.
  const std::string& token(std::int32_t id) const {
    require_id(id, "llm::BpeTokenizer::token", "id");
    return tokens_[static_cast<std::size_t>(id)];
  }

  // The id of a token given by its byte-level text; -1 when there is none.
  std::int32_t id_of(const std::string& token_text) const {
    const auto found = ids_.find(token_text);
    return found == ids_.end() ? -1 : found->second;
  }

  std::vector<std::int32_t> encode(std::string_view utf8_text) const {
    utf8::require_valid(utf8_text, "llm::BpeTokenizer::encode", "utf8_text");
    std::vector<std::int32_t> ids;
    ids.reserve(utf8_text.size() / 3);
    // Pieces repeat (words, spaces, punctuation): each distinct piece of this call is encoded once.
    std::unordered_map<std::string_view, std::vector<std::int32_t>> seen;
    smollm_pre_tokenize(utf8_text, [&](std::string_view piece) {
      auto found = seen.find(piece);
      if (found == seen.end()) found = seen.emplace(piece, encode_piece(piece)).first;
      ids.insert(ids.end(), found->second.begin(), found->second.end());
    });
    return ids;
  }

  // The bytes of the tokens, concatenated; throws shrink::Error naming the first id out of range.
  std::string decode(const std::vector<std::int32_t>& ids) const {
    for (std::size_t i = 0; i < ids.size(); ++i)
      require_id(ids[i], "llm::BpeTokenizer::decode", ("ids[" + std::to_string(i) + "]").c_str());
    std::string text;
    for (const std::int32_t id : ids) text += token_bytes_[static_cast<std::size_t>(id)];
    return text;
  }

 private:
  struct Merge {
    std::int32_t rank;    // index in the merges list: lower applies first
    std::int32_t result;  // id of the merged token
  };

  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
  }

  static std::string quoted(const std::string& text) { return "\"" + text + "\""; }

  // The bytes a token stands for: its code points mapped back through the byte-level alphabet, or its own UTF-8
  // text when one of them is outside the alphabet.
  static std::string bytes_of(const std::string& token) {
    std::string bytes;
    for (std::size_t offset = 0; offset < token.size();) {
      const utf8::Decoded c = utf8::decode_one(token, offset);
      const auto byte = byte_level::byte_of(c.code_point);
      if (!byte) return token;
      bytes += static_cast<char>(*byte);
      offset += c.length;
    }
    return bytes;
  }

  void require_id(std::int32_t id, const char* function, const char* argument) const {
    if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size())
      shrink::fail(function, argument, id, "a token id in [0, " + std::to_string(tokens_.size()) + ")");
  }

  // BPE on one piece: a doubly linked list of symbols and a queue of candidate merges ordered by (rank, position),
  // so a piece of n bytes takes O(n log n) however long it is. A candidate is stale once either of its symbols has
  // been merged away or changed; it is then skipped.
  std::vector<std::int32_t> encode_piece(std::string_view piece) const {
    struct Symbol {
      std::int32_t id;
      std::size_t prev, next;  // neighbours in the list; kNone at the ends
      bool alive;
    };
    constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
    struct Candidate {
      std::int32_t rank;
      std::size_t left, right;  // symbol positions
      std::int32_t left_id, right_id, result;
      bool operator>(const Candidate& other) const {
        return rank != other.rank ? rank > other.rank : left > other.left;
      }
    };
    std::vector<Symbol> symbols;
    symbols.reserve(piece.size());
    for (const char byte : piece) {
      const std::int32_t id = byte_ids_[static_cast<std::uint8_t>(byte)];
      if (id >= 0) symbols.push_back({id, kNone, kNone, true});
    }
    if (symbols.empty()) return {};
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) symbols[i].next = i + 1, symbols[i + 1].prev = i;
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
    const auto consider = [&](std::size_t left, std::size_t right) {
      if (left == kNone || right == kNone) return;
      const auto found = merges_.find(pair_key(symbols[left].id, symbols[right].id));
      if (found != merges_.end())
        queue.push({found->second.rank, left, right, symbols[left].id, symbols[right].id, found->second.result});
    };
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) consider(i, i + 1);
    while (!queue.empty()) {
      const Candidate c = queue.top();
      queue.pop();
      Symbol& left = symbols[c.left];
      Symbol& right = symbols[c.right];
      if (!left.alive || !right.alive || left.next != c.right || left.id != c.left_id || right.id != c.right_id)
        continue;
      left.id = c.result;  // the merged symbol takes the left one's place
      right.alive = false;
      left.next = right.next;
      if (right.next != kNone) symbols[right.next].prev = c.left;
      consider(left.prev, c.left);
      consider(c.left, left.next);
    }
    std::vector<std::int32_t> ids;
    for (std::size_t i = 0; i != kNone; i = symbols[i].next) ids.push_back(symbols[i].id);
    return ids;
  }

  std::vector<std::string> tokens_;                    // byte-level text per id
  std::vector<std::string> token_bytes_;               // the bytes each id stands for
  std::unordered_map<std::string, std::int32_t> ids_;  // byte-level text -> id
  std::unordered_map<std::uint64_t, Merge> merges_;    // (left id, right id) -> rank and merged id
  std::int32_t byte_ids_[256] = {};                    // id of the single-symbol token of each byte; -1: none
};

}  // namespace llm
