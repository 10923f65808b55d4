// Test-only GGUF writer: builds GGUF files in memory, valid ones and, through its overrides and raw bytes, the hostile
// ones the reader must refuse. Little-endian, version 3 unless told otherwise.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "shrink/io/gguf.hpp"

namespace shrink::test {

using Bytes = std::vector<std::uint8_t>;

// Appends little-endian values to a byte vector.
struct ByteWriter {
  Bytes out;

  ByteWriter& u8(std::uint8_t v) {
    out.push_back(v);
    return *this;
  }
  ByteWriter& u16(std::uint16_t v) { return little(v, 2); }
  ByteWriter& u32(std::uint32_t v) { return little(v, 4); }
  ByteWriter& u64(std::uint64_t v) { return little(v, 8); }
  ByteWriter& f32(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return u32(bits);
  }
  ByteWriter& f64(double v) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return u64(bits);
  }
  ByteWriter& str(const std::string& s) {  // u64 length, then the bytes
    u64(s.size());
    return raw(Bytes(s.begin(), s.end()));
  }
  ByteWriter& raw(const Bytes& bytes) {
    out.insert(out.end(), bytes.begin(), bytes.end());
    return *this;
  }

 private:
  ByteWriter& little(std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
    return *this;
  }
};

using io::GgufValueType;

// One tensor to write: ne as GGUF stores it (innermost first), its ggml type and stored bytes.
struct GgufTensorSpec {
  std::string name;
  std::vector<std::uint64_t> ne;
  std::uint32_t type = 0;
  Bytes data;
  std::optional<std::uint64_t> offset;  // data-section offset; by default the next aligned one
};

// A GGUF file under construction: key/values (already encoded) and tensors; bytes() lays it out.
class GgufBuilder {
 public:
  std::uint32_t version = 3;
  std::uint64_t alignment = 32;                    // used for the layout; add general.alignment yourself
  std::optional<std::uint64_t> kv_count_override;  // written instead of the real counts
  std::optional<std::uint64_t> tensor_count_override;

  // A key and its encoded value (for arrays: element type, count and elements).
  GgufBuilder& add(const std::string& key, GgufValueType type, const Bytes& value) {
    ByteWriter w;
    w.str(key).u32(static_cast<std::uint32_t>(type)).raw(value);
    kvs_.push_back(w.out);
    return *this;
  }
  GgufBuilder& add_u32(const std::string& key, std::uint32_t v) {
    return add(key, GgufValueType::uint32, ByteWriter().u32(v).out);
  }
  GgufBuilder& add_string(const std::string& key, const std::string& v) {
    return add(key, GgufValueType::string, ByteWriter().str(v).out);
  }
  GgufBuilder& add_strings(const std::string& key, const std::vector<std::string>& v) {
    ByteWriter w;
    w.u32(static_cast<std::uint32_t>(GgufValueType::string)).u64(v.size());
    for (const auto& s : v) w.str(s);
    return add(key, GgufValueType::array, w.out);
  }
  GgufBuilder& add_tensor(GgufTensorSpec spec) {
    tensors_.push_back(std::move(spec));
    return *this;
  }

  Bytes bytes() const {
    ByteWriter w;
    w.raw({'G', 'G', 'U', 'F'}).u32(version);
    w.u64(tensor_count_override.value_or(tensors_.size())).u64(kv_count_override.value_or(kvs_.size()));
    for (const Bytes& kv : kvs_) w.raw(kv);
    std::vector<std::uint64_t> offsets;
    std::uint64_t next = 0;
    for (const GgufTensorSpec& t : tensors_) {
      const std::uint64_t offset = t.offset.value_or(next);
      offsets.push_back(offset);
      next = (offset + t.data.size() + alignment - 1) / alignment * alignment;
      w.str(t.name).u32(static_cast<std::uint32_t>(t.ne.size()));
      for (std::uint64_t n : t.ne) w.u64(n);
      w.u32(t.type).u64(offset);
    }
    if (tensors_.empty()) return w.out;
    while (w.out.size() % alignment != 0) w.u8(0);
    const std::size_t start = w.out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const Bytes& data = tensors_[i].data;
      if (data.empty()) continue;  // a tensor without data may point anywhere (hostile offsets)
      if (w.out.size() < start + offsets[i] + data.size()) w.out.resize(start + offsets[i] + data.size(), 0);
      std::copy(data.begin(), data.end(), w.out.begin() + static_cast<std::ptrdiff_t>(start + offsets[i]));
    }
    return w.out;
  }

 private:
  std::vector<Bytes> kvs_;
  std::vector<GgufTensorSpec> tensors_;
};

}  // namespace shrink::test
