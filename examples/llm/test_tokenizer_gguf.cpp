// SmolLM2's real tokenizer, read from the model file through tokenizer_gguf.hpp, against the ids of Hugging Face
// tokenizers recorded in testdata/tokenizer_golden.txt (by gen_tokenizer_golden.py): every sample's ids exactly,
// decode(encode(text)), and the whole of hamlet.txt and macbeth.txt by id count and SHA-256 of the ids.
// Built only once shrink/io/gguf.hpp exists, and run with the data of scripts/fetch-llm-data.sh
// (SHRINK_LLM_DATA_DIR); SHRINK_LLM_GOLDEN is the golden file's path.
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sha256.hpp"
#include "test_paths.hpp"
#include "tokenizer_gguf.hpp"

namespace {

using llm::test_paths::kDataDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  if (hex == "-") return bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

// SHA-256 of the ids as consecutive little-endian int32, as the generator hashes them.
std::string ids_sha256(const std::vector<std::int32_t>& ids) {
  std::string bytes;
  for (const std::int32_t id : ids)
    for (int shift = 0; shift < 32; shift += 8)
      bytes += static_cast<char>((static_cast<std::uint32_t>(id) >> shift) & 0xFFu);
  return llm::sha256_hex(bytes);
}

const llm::BpeTokenizer& smollm() {
  static const llm::BpeTokenizer tokenizer =
      llm::smollm_tokenizer_from_gguf(kDataDir + "/SmolLM2-135M-Instruct.Q4_1.gguf");
  return tokenizer;
}

std::vector<std::string> golden_lines(const std::string& kind) {
  std::ifstream in(SHRINK_LLM_GOLDEN);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(kind + " ", 0) == 0) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("tokenizer_gguf: SmolLM2's vocabulary") {
  const llm::BpeTokenizer& tok = smollm();
  CHECK(tok.vocab_size() == 49152);
  CHECK(tok.token(1) == "<|im_start|>");
  CHECK(tok.token(2) == "<|im_end|>");
}

TEST_CASE("tokenizer_gguf: every golden sample's ids equal Hugging Face's") {
  const llm::BpeTokenizer& tok = smollm();
  const std::vector<std::string> cases = golden_lines("case");
  REQUIRE(cases.size() >= 20);
  for (const std::string& line : cases) {
    std::istringstream fields(line);
    std::string kind, name, text_hex, decoded_hex;
    std::size_t count = 0;
    fields >> kind >> name >> text_hex >> decoded_hex >> count;
    std::vector<std::int32_t> expected(count);
    for (std::int32_t& id : expected) fields >> id;
    REQUIRE_FALSE(fields.fail());
    const std::string text = from_hex(text_hex);
    const std::string decoded = decoded_hex == "=" ? text : from_hex(decoded_hex);
    INFO("case " << name);
    const std::vector<std::int32_t> ids = tok.encode(text);
    CHECK(ids == expected);
    CHECK(tok.decode(ids) == decoded);
  }
}

TEST_CASE("tokenizer_gguf: the whole plays' ids equal Hugging Face's (count and SHA-256)") {
  const llm::BpeTokenizer& tok = smollm();
  const std::vector<std::string> files = golden_lines("file");
  REQUIRE(files.size() == 2);
  for (const std::string& line : files) {
    std::istringstream fields(line);
    std::string kind, name, file_sha256, ids_digest;
    std::size_t count = 0;
    fields >> kind >> name >> file_sha256 >> count >> ids_digest;
    INFO("file " << name);
    const std::string text = read_file(kDataDir + "/" + name);
    REQUIRE(llm::sha256_hex(text) == file_sha256);  // the text the golden was made from
    const std::vector<std::int32_t> ids = tok.encode(text);
    CHECK(ids.size() == count);
    CHECK(ids_sha256(ids) == ids_digest);
    CHECK(tok.decode(ids) == text);
  }
}

TEST_CASE("tokenizer_gguf: special-token text is encoded as plain text") {
  const std::vector<std::int32_t> ids = smollm().encode("<|im_start|>user");
  CHECK(ids.size() > 1);
  for (const std::int32_t id : ids) CHECK(id > 16);  // ids 0..16 are SmolLM2's control tokens
}
