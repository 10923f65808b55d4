// Tests of the tokenizer's parts that need no model file: the byte-level alphabet, UTF-8 decoding, the character
// classes, the smollm pre-tokenization, BPE on a small made-up vocabulary, validation errors, and SHA-256.
// test_tokenizer_gguf.cpp checks SmolLM2's real vocabulary against Hugging Face's ids.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "byte_level.hpp"
#include "pre_tokenizer.hpp"
#include "sha256.hpp"
#include "tokenizer.hpp"
#include "unicode_classes.hpp"
#include "utf8.hpp"

namespace {

using llm::unicode::CharClass;

std::string utf8_of(std::uint32_t code_point) {
  std::string out;
  llm::utf8::append(out, code_point);
  return out;
}

// The byte-level text of a byte string ("a b" -> "aĠb").
std::string byte_level_text(std::string_view bytes) {
  std::string out;
  for (const char b : bytes) llm::utf8::append(out, llm::byte_level::code_point_of(static_cast<std::uint8_t>(b)));
  return out;
}

// All 256 single-byte tokens (ids 0..255 in byte order, less those in `missing`), then `extra` tokens.
std::vector<std::string> toy_tokens(const std::vector<std::string>& extra, const std::set<int>& missing = {}) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b)
    if (!missing.count(b)) tokens.push_back(byte_level_text(std::string(1, static_cast<char>(b))));
  for (const auto& t : extra) tokens.push_back(byte_level_text(t));
  return tokens;
}

std::string merge_of(std::string_view left, std::string_view right) {
  return byte_level_text(left) + " " + byte_level_text(right);
}

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (const auto p : llm::smollm_pre_tokenize(text)) out.emplace_back(p);
  return out;
}

}  // namespace

TEST_CASE("byte_level: the 256 bytes map to distinct code points and back") {
  std::set<std::uint32_t> seen;
  for (unsigned b = 0; b < 256; ++b) {
    const std::uint32_t c = llm::byte_level::code_point_of(static_cast<std::uint8_t>(b));
    seen.insert(c);
    REQUIRE(llm::byte_level::byte_of(c) == std::optional<std::uint8_t>(static_cast<std::uint8_t>(b)));
    if (llm::byte_level::is_printable_byte(b)) CHECK(c == b);  // printable bytes stand for themselves
  }
  CHECK(seen.size() == 256);
  CHECK(llm::byte_level::code_point_of(0x00) == 256);       // the first non-printable byte
  CHECK(llm::byte_level::code_point_of(0x20) == 0x120);     // 'Ġ'
  CHECK(llm::byte_level::code_point_of(0x0A) == 0x10A);     // 'Ċ'
  CHECK(llm::byte_level::code_point_of(0xAD) == 256 + 67);  // the last of the 68
  CHECK_FALSE(llm::byte_level::byte_of(0x20).has_value());  // space is not in the alphabet
  CHECK_FALSE(llm::byte_level::byte_of(256 + 68).has_value());
  CHECK_FALSE(llm::byte_level::byte_of(0x4E00).has_value());
}

TEST_CASE("utf8: strict decoding") {
  const auto length = [](std::string_view s) { return llm::utf8::decode_one(s, 0).length; };
  CHECK(llm::utf8::decode_one("\xC3\xA9", 0).code_point == 0xE9);
  CHECK(llm::utf8::decode_one("\xF0\x9F\x98\x80", 0).code_point == 0x1F600);
  CHECK(llm::utf8::decode_one("\xF4\x8F\xBF\xBF", 0).code_point == 0x10FFFF);
  CHECK(length("\xC0\xAF") == 0);          // overlong '/'
  CHECK(length("\xE0\x9F\xBF") == 0);      // overlong
  CHECK(length("\xED\xA0\x80") == 0);      // surrogate U+D800
  CHECK(length("\xF4\x90\x80\x80") == 0);  // U+110000
  CHECK(length("\x80") == 0);              // stray continuation byte
  CHECK(length("\xC3") == 0);              // cut short
  CHECK(length("\xE6\x97") == 0);          // cut short
  CHECK(length("\xFF") == 0);
  for (const std::uint32_t c : {0x0u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const std::string s = utf8_of(c);
    CHECK(llm::utf8::decode_one(s, 0).code_point == c);
    CHECK(llm::utf8::decode_one(s, 0).length == s.size());
  }
}

TEST_CASE("unicode: character classes") {
  using llm::unicode::char_class;
  CHECK(char_class('a') == CharClass::kLetter);
  CHECK(char_class('Z') == CharClass::kLetter);
  CHECK(char_class('7') == CharClass::kNumber);
  CHECK(char_class(' ') == CharClass::kWhitespace);
  CHECK(char_class('\t') == CharClass::kWhitespace);
  CHECK(char_class('\r') == CharClass::kWhitespace);
  CHECK(char_class('\'') == CharClass::kOther);
  CHECK(char_class('_') == CharClass::kOther);
  CHECK(char_class(0x1C) == CharClass::kOther);  // a separator control, not White_Space (Python's isspace differs)
  CHECK(char_class(0x85) == CharClass::kWhitespace);
  CHECK(char_class(0xA0) == CharClass::kWhitespace);
  CHECK(char_class(0x3000) == CharClass::kWhitespace);
  CHECK(char_class(0x2028) == CharClass::kWhitespace);
  CHECK(char_class(0x200B) == CharClass::kOther);  // zero width space: Cf
  CHECK(char_class(0xE9) == CharClass::kLetter);
  CHECK(char_class(0x3A9) == CharClass::kLetter);
  CHECK(char_class(0x65E5) == CharClass::kLetter);   // 日
  CHECK(char_class(0xB2) == CharClass::kNumber);     // ² (No)
  CHECK(char_class(0x663) == CharClass::kNumber);    // Arabic-Indic three
  CHECK(char_class(0x2167) == CharClass::kNumber);   // Roman numeral eight (Nl)
  CHECK(char_class(0x1F600) == CharClass::kOther);   // 😀
  CHECK(char_class(0x105C0) == CharClass::kLetter);  // Todhri, new in Unicode 16.0
  CHECK(char_class(0x11DE0) == CharClass::kNumber);  // Tolong Siki digit, new in 17.0 (see gen_unicode_classes.py)
  CHECK(char_class(0x10FFFF) == CharClass::kOther);
}

TEST_CASE("pre_tokenize: the GPT-2 split") {
  using V = std::vector<std::string>;
  CHECK(pieces("") == V{});
  CHECK(pieces("Hello world") == V{"Hello", " world"});
  CHECK(pieces("don't I'll we've they're I'm he'd she's") ==
        V{"don", "'t", " I", "'ll", " we", "'ve", " they", "'re", " I", "'m", " he", "'d", " she", "'s"});
  CHECK(pieces("DON'T 'Tis") == V{"DON", "'", "T", " '", "Tis"});  // contractions are lowercase only
  CHECK(pieces("--!? x") == V{"--!?", " x"});
  CHECK(pieces("a  b") == V{"a", " ", " b"});                                // \s+(?!\S) leaves the last space to " b"
  CHECK(pieces("a\n\n  c\t\td") == V{"a", "\n\n ", " c", "\t", "\t", "d"});  // ' ?' is U+0020 only
  CHECK(pieces("a\nb") == V{"a", "\n", "b"});  // one whitespace before a letter: \s+ alone
  CHECK(pieces("end   ") == V{"end", "   "});  // trailing whitespace stays together
  CHECK(pieces("   start") == V{"  ", " start"});
  CHECK(pieces("caf\xC3\xA9 na\xC3\xAFve") == V{"caf\xC3\xA9", " na\xC3\xAFve"});
  CHECK(pieces("x \xF0\x9F\x98\x80!") == V{"x", " \xF0\x9F\x98\x80!"});  // emoji and '!' are both "other"
}

TEST_CASE("pre_tokenize: each digit alone, before the GPT-2 split") {
  using V = std::vector<std::string>;
  CHECK(pieces("1234 12.5") == V{"1", "2", "3", "4", " ", "1", "2", ".", "5"});
  CHECK(pieces("a1b") == V{"a", "1", "b"});
  CHECK(pieces("a  1") == V{"a", "  ", "1"});  // the digit ends the text the lookahead sees
  CHECK(pieces("x\xC2\xB2") == V{"x", "\xC2\xB2"});
  CHECK(pieces("\xD9\xA3\xD9\xA4") == V{"\xD9\xA3", "\xD9\xA4"});
}

TEST_CASE("pre_tokenize: refuses invalid UTF-8, naming the byte") {
  CHECK_THROWS_WITH(llm::smollm_pre_tokenize(std::string_view("ab\xC3(", 4)),
                    Catch::Contains("byte 2 = 0xC3") && Catch::Contains("valid UTF-8"));
}

TEST_CASE("BpeTokenizer: merges apply lowest rank first, leftmost among equals") {
  // Tokens 0..255 are the bytes; 256 "ab", 257 "bc", 258 "abc", 259 "aa", 260 " a".
  const llm::BpeTokenizer tok(
      toy_tokens({"ab", "bc", "abc", "aa", " a"}),
      {merge_of("b", "c"), merge_of("a", "b"), merge_of("a", "bc"), merge_of("a", "a"), merge_of(" ", "a")});
  CHECK(tok.vocab_size() == 261);
  CHECK(tok.encode("abc") == std::vector<std::int32_t>{258});  // "b c" (rank 0) before "a b", then "a bc"
  CHECK(tok.encode("ab") == std::vector<std::int32_t>{256});
  CHECK(tok.encode("aaa") == std::vector<std::int32_t>{259, 'a'});  // leftmost pair first
  CHECK(tok.encode("aaaa") == std::vector<std::int32_t>{259, 259});
  CHECK(tok.encode("x a") == std::vector<std::int32_t>{'x', 260});
  CHECK(tok.encode("x ab") == std::vector<std::int32_t>{'x', ' ', 256});  // "a b" (rank 1) before " a" (rank 4)
  CHECK(tok.encode("") == std::vector<std::int32_t>{});
  for (const std::string text : {"abc", "aaa", "x ab", "a\n\tb  c", "caf\xC3\xA9 1234 \xF0\x9F\x98\x80"})
    CHECK(tok.decode(tok.encode(text)) == text);
}

TEST_CASE("BpeTokenizer: a byte without a token is dropped, and its neighbours may merge") {
  const llm::BpeTokenizer tok(toy_tokens({"++"}, {0x04}), {merge_of("+", "+")});
  const std::int32_t plus_plus = tok.id_of(byte_level_text("++"));
  CHECK(tok.encode("+\x04+") == std::vector<std::int32_t>{plus_plus});
  CHECK(tok.encode("\x04") == std::vector<std::int32_t>{});
  CHECK(tok.decode(tok.encode("a\x04"
                              "b")) == "ab");
}

TEST_CASE("BpeTokenizer: special-token text is plain text") {
  std::vector<std::string> tokens = toy_tokens({});
  tokens.insert(tokens.begin(), "<|im_start|>");  // id 0, like SmolLM2's control tokens
  const llm::BpeTokenizer tok(tokens, {});
  const std::vector<std::int32_t> ids = tok.encode("<|im_start|>");
  CHECK(ids.size() == 12);  // one id per byte: no merges here
  CHECK(std::find(ids.begin(), ids.end(), 0) == ids.end());
  CHECK(tok.decode({0}) == "<|im_start|>");
  CHECK(tok.token(0) == "<|im_start|>");
}

TEST_CASE("BpeTokenizer: encode refuses invalid UTF-8, naming the byte offset") {
  const llm::BpeTokenizer tok(toy_tokens({}), {});
  CHECK_THROWS_WITH(tok.encode(std::string_view("ok \xED\xA0\x80", 6)),
                    Catch::Contains("llm::BpeTokenizer::encode") && Catch::Contains("utf8_text byte 3 = 0xED"));
  CHECK_THROWS_WITH(tok.encode("\xFF"), Catch::Contains("byte 0 = 0xFF"));
}

TEST_CASE("BpeTokenizer: decode refuses ids out of range") {
  const llm::BpeTokenizer tok(toy_tokens({}), {});
  CHECK_THROWS_WITH(tok.decode({1, 256}), Catch::Contains("ids[1] = 256") && Catch::Contains("[0, 256)"));
  CHECK_THROWS_WITH(tok.decode({-1}), Catch::Contains("ids[0] = -1"));
  CHECK_THROWS_WITH(tok.token(300), Catch::Contains("id = 300"));
}

TEST_CASE("BpeTokenizer: validates its vocabulary and merges, naming the index") {
  using Strings = std::vector<std::string>;
  const auto error_of = [](Strings tokens, const Strings& merges) {
    try {
      llm::BpeTokenizer tok(std::move(tokens), merges);
    } catch (const shrink::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(error_of({}, {}), Catch::Contains("tokens.size() = 0"));
  Strings duplicate = toy_tokens({"ab"});
  duplicate.push_back(byte_level_text("ab"));
  CHECK_THAT(error_of(duplicate, {}), Catch::Contains("tokens[257]") && Catch::Contains("already at index 256"));
  Strings empty = toy_tokens({});
  empty.push_back("");
  CHECK_THAT(error_of(empty, {}), Catch::Contains("tokens[256]") && Catch::Contains("non-empty"));
  Strings invalid = toy_tokens({});
  invalid.push_back("\xC3");
  CHECK_THAT(error_of(invalid, {}), Catch::Contains("tokens[256] byte 0 = 0xC3"));
  const Strings tokens = toy_tokens({"ab"});
  for (const std::string bad : {"ab", " a", "a ", "a b c", ""})
    CHECK_THAT(error_of(tokens, {merge_of("a", "b"), bad}),
               Catch::Contains("merges[1]") && Catch::Contains("left right"));
  CHECK_THAT(error_of(tokens, {merge_of("a", "b"), merge_of("ab", "zz")}),
             Catch::Contains("merges[1]") && Catch::Contains("\"zz\" is not one"));
  CHECK_THAT(error_of(tokens, {merge_of("b", "a")}),
             Catch::Contains("merges[0]") && Catch::Contains("\"ba\" is not one"));
  CHECK_THAT(error_of(tokens, {merge_of("a", "b"), merge_of("a", "b")}),
             Catch::Contains("merges[1]") && Catch::Contains("already at rank 0"));
  CHECK(error_of(tokens, {merge_of("a", "b")}) == "no error");
}

TEST_CASE("sha256: FIPS 180-4 examples") {
  CHECK(llm::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(llm::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(llm::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(llm::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
