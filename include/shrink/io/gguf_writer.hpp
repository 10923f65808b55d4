// GgufWriter: writes a GGUF file (version 3, little-endian; the layout in io/gguf.hpp's comment) that llama.cpp and
// shrink's reader load: metadata in the order set, the tensor table, then each tensor's bytes at the next multiple
// of the alignment (`general.alignment`, 32 unless set).
//
// Everything about the file is checked as it is added, each failure a shrink::Error naming the key or tensor and
// what was expected: an empty or repeated key, a repeated tensor name, `general.alignment` not a uint32 power of two,
// more than 4 dimensions or a negative one, an unknown ggml type, a block type whose innermost dimension is not a
// multiple of its block, bytes that are not the type's size for the shape. write() creates nothing until the layout
// is known and writes through io/atomic_file.hpp: an I/O error, or a tensor whose fill throws, leaves `path` as it
// was. Tensors given by a fill function are made one at a time while the file is written (the whole model is never
// held twice).
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/atomic_file.hpp"
#include "shrink/io/gguf.hpp"
#include "shrink/io/gguf_types.hpp"

namespace shrink::io {

class GgufWriter {
 public:
  using Bytes = std::vector<std::uint8_t>;
  // Writes the tensor's bytes (exactly `bytes` of them) into out.
  using Fill = std::function<void(std::uint8_t* out, std::size_t bytes)>;

  GgufWriter& set_uint32(const std::string& key, std::uint32_t v) { return scalar(key, GgufValueType::uint32, v, 4); }
  GgufWriter& set_int32(const std::string& key, std::int32_t v) {
    return scalar(key, GgufValueType::int32, static_cast<std::uint32_t>(v), 4);
  }
  GgufWriter& set_uint64(const std::string& key, std::uint64_t v) { return scalar(key, GgufValueType::uint64, v, 8); }
  GgufWriter& set_float32(const std::string& key, float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return scalar(key, GgufValueType::float32, bits, 4);
  }
  GgufWriter& set_bool(const std::string& key, bool v) { return scalar(key, GgufValueType::boolean, v ? 1 : 0, 1); }
  GgufWriter& set_string(const std::string& key, const std::string& v) {
    Bytes value;
    put_string(value, v);
    return add_value(key, GgufValueType::string, std::move(value));
  }
  GgufWriter& set_strings(const std::string& key, const std::vector<std::string>& v) {
    Bytes value;
    put(value, static_cast<std::uint32_t>(GgufValueType::string), 4);
    put(value, v.size(), 8);
    for (const std::string& s : v) put_string(value, s);
    return add_value(key, GgufValueType::array, std::move(value));
  }
  GgufWriter& set_int32s(const std::string& key, const std::vector<std::int32_t>& v) {
    Bytes value;
    put(value, static_cast<std::uint32_t>(GgufValueType::int32), 4);
    put(value, v.size(), 8);
    for (std::int32_t e : v) put(value, static_cast<std::uint32_t>(e), 4);
    return add_value(key, GgufValueType::array, std::move(value));
  }
  GgufWriter& set_float32s(const std::string& key, const std::vector<float>& v) {
    Bytes value;
    put(value, static_cast<std::uint32_t>(GgufValueType::float32), 4);
    put(value, v.size(), 8);
    for (float e : v) {
      std::uint32_t bits;
      std::memcpy(&bits, &e, 4);
      put(value, bits, 4);
    }
    return add_value(key, GgufValueType::array, std::move(value));
  }
  // The entry of another file as it is stored there (any type, arrays and nested arrays included).
  GgufWriter& copy_metadata(const GgufFile& from, const GgufMetadataEntry& e) {
    Bytes value;
    if (e.is_array()) {  // the reader's entry points at the elements; a string's includes its length
      put(value, e.element_type, 4);
      put(value, e.count, 8);
    }
    const std::uint8_t* data = from.value_data(e);
    value.insert(value.end(), data, data + e.bytes);
    return add_value(e.key, static_cast<GgufValueType>(e.type), std::move(value));
  }

  // A tensor of `shape` (outermost first, as GgufFile lists it; stored as ggml's ne, innermost first) and ggml type.
  GgufWriter& add_tensor(const std::string& name, std::vector<std::int64_t> shape, std::uint32_t type, Bytes bytes) {
    const std::uint64_t size = checked_tensor(name, shape, type);
    if (bytes.size() != size)
      fail_here("add_tensor", "tensor " + gguf_detail::quoted(name) + ": " + std::to_string(bytes.size()) +
                                  " bytes: expected " + std::to_string(size) + " for " + gguf_type_name(type) +
                                  " of its shape");
    names_.insert(name);
    tensors_.push_back(Tensor{name, std::move(shape), type, size, std::move(bytes), nullptr});
    return *this;
  }
  GgufWriter& add_tensor(const std::string& name, std::vector<std::int64_t> shape, std::uint32_t type, Fill fill) {
    const std::uint64_t size = checked_tensor(name, shape, type);
    if (!fill) fail_here("add_tensor", "tensor " + gguf_detail::quoted(name) + ": fill is empty");
    names_.insert(name);
    tensors_.push_back(Tensor{name, std::move(shape), type, size, {}, std::move(fill)});
    return *this;
  }

  std::uint64_t alignment() const { return alignment_; }
  std::size_t tensor_count() const { return tensors_.size(); }

  // Writes the file at `path` (replacing it only once the whole file is written).
  void write(const std::string& path) const {
    AtomicFile file(path, "shrink::io::GgufWriter::write");
    Bytes header;
    put(header, 0x46554747u, 4);  // "GGUF"
    put(header, 3, 4);
    put(header, tensors_.size(), 8);
    put(header, metadata_.size(), 8);
    for (const Bytes& kv : metadata_) header.insert(header.end(), kv.begin(), kv.end());
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> offsets;
    for (const Tensor& t : tensors_) {
      offsets.push_back(offset);
      put_string(header, t.name);
      put(header, t.shape.size(), 4);
      for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) put(header, static_cast<std::uint64_t>(*d), 8);
      put(header, t.type, 4);
      put(header, offset, 8);
      offset = aligned(offset + t.bytes);
    }
    file.open();
    file.append(header.data(), header.size());
    file.append_zeros(static_cast<std::size_t>(aligned(header.size()) - header.size()));
    Bytes made;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      const std::uint8_t* data = t.data.data();
      if (t.fill) {
        made.assign(static_cast<std::size_t>(t.bytes), 0);
        t.fill(made.data(), made.size());
        data = made.data();
      }
      file.append(data, static_cast<std::size_t>(t.bytes));
      if (i + 1 < tensors_.size()) file.append_zeros(static_cast<std::size_t>(aligned(t.bytes) - t.bytes));
    }
    file.commit();
  }

 private:
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::uint32_t type;
    std::uint64_t bytes;
    Bytes data;  // when given whole
    Fill fill;   // when made at write()
  };

  [[noreturn]] static void fail_here(const char* method, const std::string& what) {
    fail((std::string("shrink::io::GgufWriter::") + method).c_str(), what);
  }
  static void put(Bytes& out, std::uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out.push_back(static_cast<std::uint8_t>(v >> (8 * k)));
  }
  static void put_string(Bytes& out, const std::string& s) {
    put(out, s.size(), 8);
    out.insert(out.end(), s.begin(), s.end());
  }
  std::uint64_t aligned(std::uint64_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }

  GgufWriter& scalar(const std::string& key, GgufValueType type, std::uint64_t v, int n) {
    Bytes value;
    put(value, v, n);
    const bool alignment = key == "general.alignment";
    if (alignment && (v == 0 || (v & (v - 1)) != 0))
      fail_here("set", "key \"general.alignment\" = " + std::to_string(v) + ": expected a uint32 power of two");
    if (alignment && !tensors_.empty())
      fail_here("set", "key \"general.alignment\" set after tensors were added: expected it first");
    add_value(key, type, std::move(value));
    if (alignment) alignment_ = v;
    return *this;
  }
  // Adds key = value (type, then the value's bytes) once every check has passed.
  GgufWriter& add_value(const std::string& key, GgufValueType type, Bytes value) {
    if (key.empty()) fail_here("set", "an empty key: expected a name such as \"general.architecture\"");
    if (keys_.count(key)) fail_here("set", "key " + gguf_detail::quoted(key) + " set twice");
    if (key == "general.alignment" && type != GgufValueType::uint32)
      fail_here("set", "key \"general.alignment\" of type " +
                           std::string(gguf_value_type_name(static_cast<std::uint32_t>(type))) +
                           ": expected a uint32 power of two");
    Bytes kv;
    put_string(kv, key);
    put(kv, static_cast<std::uint32_t>(type), 4);
    kv.insert(kv.end(), value.begin(), value.end());
    keys_.insert(key);
    metadata_.push_back(std::move(kv));
    return *this;
  }
  // The stored size of a tensor, after checking its name, shape and type (the name is taken once it is added).
  std::uint64_t checked_tensor(const std::string& name, const std::vector<std::int64_t>& shape, std::uint32_t type) {
    const std::string what = "tensor " + gguf_detail::quoted(name);
    if (names_.count(name)) fail_here("add_tensor", what + " added twice");
    const GgufTypeLayout layout = gguf_type_layout(type);
    if (layout.block_elements == 0)
      fail_here("add_tensor", what + ": ggml type " + std::to_string(type) + " is unknown");
    if (shape.size() > 4)
      fail_here("add_tensor", what + ": " + std::to_string(shape.size()) + " dimensions: expected at most 4");
    std::uint64_t elements = 1;
    constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (std::int64_t d : shape) {
      if (d < 0) fail_here("add_tensor", what + ": a dimension of " + std::to_string(d) + ": expected sizes >= 0");
      if (d != 0 && elements > kLimit / static_cast<std::uint64_t>(d))
        fail_here("add_tensor", what + ": its element count overflows int64");
      elements *= static_cast<std::uint64_t>(d);
    }
    const std::int64_t inner = shape.empty() ? 1 : shape.back();
    if (inner % static_cast<std::int64_t>(layout.block_elements) != 0)
      fail_here("add_tensor", what + ": innermost dimension " + std::to_string(inner) + ": expected a multiple of " +
                                  std::to_string(layout.block_elements) + " for " + layout.name);
    const std::uint64_t blocks = elements / layout.block_elements;
    if (blocks > kLimit / layout.block_bytes) fail_here("add_tensor", what + ": its byte size overflows int64");
    return blocks * layout.block_bytes;
  }

  std::vector<Bytes> metadata_;  // each: key, u32 type, value, as stored
  std::unordered_set<std::string> keys_, names_;
  std::vector<Tensor> tensors_;
  std::uint64_t alignment_ = 32;
};

}  // namespace shrink::io
