// Tests of the tokenizer's parts that need no model file: the byte-level alphabet, UTF-8 decoding, the character
// classes and the smollm pre-tokenization.
#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "byte_level.hpp"
#include "pre_tokenizer.hpp"
#include "unicode_classes.hpp"
#include "utf8.hpp"

namespace {

using llm::unicode::CharClass;

std::string utf8_of(std::uint32_t code_point) {
  std::string out;
  llm::utf8::append(out, code_point);
  return out;
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
