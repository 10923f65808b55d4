// GGUF model files (the llama.cpp format): validated, memory-mapped reading of the metadata and the tensor table,
// and dequantization of tensors to float (the formulas live in io/gguf_dequantize.hpp).
//
// The format, versions 2 and 3, little-endian:
//   u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value type, value),
//   tensor_count x (string name, u32 n_dims, n_dims x u64 ne, u32 ggml type, u64 offset),
//   padding up to a multiple of `general.alignment` (32 when absent), then the data section.
// A string is a u64 byte count and the bytes; an array is a u32 element type, a u64 count and the elements (arrays
// may nest); a bool is one byte, 0 or 1. A tensor's offset counts from the start of the data section and is a
// multiple of the alignment. ne[0] is the innermost (contiguous) dimension: shrink's shapes list ne reversed,
// outermost first, so a linear weight of ne = {in, out} has shape {out, in}.
//
// Files are untrusted: every count, length, dimension, offset and size is checked against the bytes left in the file
// before anything is allocated or read, and a bad file raises shrink::Error naming the file, the key or tensor and
// what was expected. Version 1 and big-endian files are refused.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "shrink/io/gguf_dequantize.hpp"
#include "shrink/io/gguf_types.hpp"
#include "shrink/io/mapped_file.hpp"

namespace shrink::io {

// GGUF metadata value types as stored.
enum class GgufValueType : std::uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

// "uint8", ..., "bool", "string", "array"; "unknown" for other ids.
constexpr const char* gguf_value_type_name(std::uint32_t type) {
  constexpr const char* names[] = {"uint8", "int8",   "uint16", "int16",  "uint32", "int32",  "float32",
                                   "bool",  "string", "array",  "uint64", "int64",  "float64"};
  return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

// One metadata key and where its value lies in the file (values are decoded when asked for).
struct GgufMetadataEntry {
  std::string key;
  std::uint32_t type = 0;          // GgufValueType
  std::uint32_t element_type = 0;  // arrays: the elements' GgufValueType
  std::uint64_t count = 0;         // arrays: the number of elements
  std::uint64_t offset = 0;        // first byte of the value (of an array: of its first element), from the file start
  std::uint64_t bytes = 0;         // bytes of the value (of an array: of its elements)

  bool is_array() const { return type == static_cast<std::uint32_t>(GgufValueType::array); }
  // "uint32", "string", "array[string]", ...
  std::string type_name() const {
    return is_array() ? std::string("array[") + gguf_value_type_name(element_type) + "]" : gguf_value_type_name(type);
  }
};

// One tensor of a GGUF file.
struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> shape;  // row-major, outermost first: GGUF's ne[] reversed; a linear weight is {out, in}
  std::uint32_t type = 0;           // ggml type id as stored (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 8 Q8_0, 30 BF16, ...)
  std::uint64_t offset = 0;         // bytes from the start of the file
  std::uint64_t bytes = 0;          // stored size

  std::int64_t elements() const {
    // The product was checked when the file was opened, in ne order: a zero anywhere must win before the others.
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
};

namespace gguf_detail {

inline constexpr std::uint32_t kMaxDims = 4;            // ggml's GGML_MAX_DIMS
inline constexpr std::uint32_t kDefaultAlignment = 32;  // when general.alignment is absent
inline constexpr int kMaxArrayDepth = 8;  // nested arrays deeper than this are refused (no real file nests)
inline constexpr std::uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims, type, offset
inline constexpr std::uint64_t kMinKeyValueBytes = 8 + 4 + 1;        // empty key, type, one-byte value

// A key or tensor name for messages: quoted, bytes outside printable ASCII as \xNN, long names cut.
inline std::string quoted(std::string_view name) {
  constexpr std::size_t kMax = 120;
  std::string out = "\"";
  for (std::size_t i = 0; i < name.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      static const char digits[] = "0123456789abcdef";
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
    }
  }
  out += name.size() > kMax ? "\"..." : "\"";
  return out;
}

inline std::uint64_t load_u64(const std::uint8_t* p) {
  return static_cast<std::uint64_t>(load_u32(p)) | (static_cast<std::uint64_t>(load_u32(p + 4)) << 32);
}

// Bytes of one element of a fixed-size value type; 0 for string, array and unknown types.
constexpr std::uint64_t fixed_size(std::uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::boolean: return 1;
    case GgufValueType::uint16:
    case GgufValueType::int16: return 2;
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::float32: return 4;
    case GgufValueType::uint64:
    case GgufValueType::int64:
    case GgufValueType::float64: return 8;
    case GgufValueType::string:
    case GgufValueType::array: return 0;
  }
  return 0;
}

constexpr bool is_integer(std::uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::uint16:
    case GgufValueType::int16:
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::uint64:
    case GgufValueType::int64: return true;
    default: return false;
  }
}
constexpr bool is_float(std::uint32_t type) {
  return type == static_cast<std::uint32_t>(GgufValueType::float32) ||
         type == static_cast<std::uint32_t>(GgufValueType::float64);
}

// An integer value at p: `negative` tells whether it is below zero, `magnitude` its absolute value.
struct IntegerValue {
  bool negative = false;
  std::uint64_t magnitude = 0;
};
inline IntegerValue load_integer(std::uint32_t type, const std::uint8_t* p) {
  auto signed_value = [](std::int64_t v) {
    // -(v + 1) + 1 avoids negating INT64_MIN.
    return v < 0 ? IntegerValue{true, static_cast<std::uint64_t>(-(v + 1)) + 1} : IntegerValue{false, std::uint64_t(v)};
  };
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::uint8: return {false, p[0]};
    case GgufValueType::int8: return signed_value(static_cast<std::int8_t>(p[0]));
    case GgufValueType::uint16: return {false, load_u16(p)};
    case GgufValueType::int16: return signed_value(static_cast<std::int16_t>(load_u16(p)));
    case GgufValueType::uint32: return {false, load_u32(p)};
    case GgufValueType::int32: return signed_value(static_cast<std::int32_t>(load_u32(p)));
    case GgufValueType::uint64: return {false, load_u64(p)};
    case GgufValueType::int64: return signed_value(static_cast<std::int64_t>(load_u64(p)));
    default: return {};
  }
}

inline std::string integer_text(IntegerValue v) { return (v.negative ? "-" : "") + std::to_string(v.magnitude); }

inline double load_float(std::uint32_t type, const std::uint8_t* p) {
  if (type == static_cast<std::uint32_t>(GgufValueType::float32)) return bits_to_float(load_u32(p));
  const std::uint64_t bits = load_u64(p);
  double value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Walks the file's bytes front to back; every read checks that the bytes are there first.
class Cursor {
 public:
  Cursor(const std::uint8_t* data, std::size_t size, const std::string& label)
      : data_(data), size_(size), label_(label) {}

  [[noreturn]] void fail(const std::string& what) const { shrink::fail("shrink::io::GgufFile", label_ + ": " + what); }

  std::uint64_t position() const { return position_; }
  std::uint64_t left() const { return size_ - position_; }
  const std::uint8_t* here() const { return data_ + position_; }

  // Requires `n` more bytes for `what` (named in the error).
  void need(std::uint64_t n, const std::string& what) const {
    if (n > left())
      fail("truncated file of " + std::to_string(size_) + " bytes: " + what + " at byte " + std::to_string(position_) +
           " needs " + std::to_string(n) + " bytes");
  }
  void skip(std::uint64_t n, const std::string& what) {
    need(n, what);
    position_ += n;
  }
  std::uint32_t u32(const std::string& what) {
    need(4, what);
    const std::uint32_t v = load_u32(here());
    position_ += 4;
    return v;
  }
  std::uint64_t u64(const std::string& what) {
    need(8, what);
    const std::uint64_t v = load_u64(here());
    position_ += 8;
    return v;
  }
  // A string's bytes (u64 length, then the bytes), checked to lie in the file.
  std::string_view string(const std::string& what) {
    if (left() < 8) need(8, what + " length");  // the name is built only for the error
    const std::uint64_t length = load_u64(here());
    position_ += 8;
    if (length > left())
      fail(what + ": string length " + std::to_string(length) + " at byte " + std::to_string(position_ - 8) +
           " runs past the end of the file (" + std::to_string(left()) + " bytes left)");
    const std::string_view text(reinterpret_cast<const char*>(here()), static_cast<std::size_t>(length));
    position_ += length;
    return text;
  }

 private:
  const std::uint8_t* data_;
  std::uint64_t size_;
  const std::string& label_;
  std::uint64_t position_ = 0;
};

// Checks a value of `type` at the cursor and steps over it; `what` names it in errors, `depth` counts nested arrays.
inline void skip_value(Cursor& cursor, std::uint32_t type, const std::string& what, int depth);

// Checks `count` array elements of `type` at the cursor and steps over them.
inline void skip_elements(Cursor& cursor, std::uint32_t type, std::uint64_t count, const std::string& what, int depth) {
  const std::uint64_t size = fixed_size(type);
  const std::uint64_t minimum = size != 0 ? size : type == static_cast<std::uint32_t>(GgufValueType::string) ? 8 : 12;
  if (count > cursor.left() / minimum)
    cursor.fail(what + ": array of " + std::to_string(count) + " " + gguf_value_type_name(type) +
                " values: more than the " + std::to_string(cursor.left()) + " bytes left can hold (" +
                std::to_string(minimum) + " bytes at least each)");
  if (type == static_cast<std::uint32_t>(GgufValueType::boolean)) {
    for (std::uint64_t i = 0; i < count; ++i)
      if (cursor.here()[i] > 1)
        cursor.fail(what + "[" + std::to_string(i) + "]: bool byte " + std::to_string(cursor.here()[i]) +
                    ": expected 0 or 1");
    cursor.skip(count, what);
  } else if (size != 0) {
    cursor.skip(count * size, what);
  } else {
    for (std::uint64_t i = 0; i < count; ++i) skip_value(cursor, type, what, depth);
  }
}

inline void skip_value(Cursor& cursor, std::uint32_t type, const std::string& what, int depth) {
  switch (static_cast<GgufValueType>(type)) {
    case GgufValueType::boolean: {
      cursor.need(1, what);
      const std::uint8_t b = *cursor.here();
      if (b > 1) cursor.fail(what + ": bool byte " + std::to_string(b) + ": expected 0 or 1");
      cursor.skip(1, what);
      return;
    }
    case GgufValueType::string: cursor.string(what); return;
    case GgufValueType::array: {
      if (depth >= kMaxArrayDepth)
        cursor.fail(what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
      const std::uint32_t element_type = cursor.u32(what + " array type");
      if (element_type > static_cast<std::uint32_t>(GgufValueType::float64))
        cursor.fail(what + ": array element type " + std::to_string(element_type) +
                    ": expected a GGUF value type (0 to 12)");
      const std::uint64_t count = cursor.u64(what + " array count");
      skip_elements(cursor, element_type, count, what, depth + 1);
      return;
    }
    default: {
      const std::uint64_t size = fixed_size(type);
      if (size == 0)
        cursor.fail(what + ": value type " + std::to_string(type) + ": expected a GGUF value type (0 to 12)");
      cursor.skip(size, what);
      return;
    }
  }
}

// a * b into out when it stays <= limit.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t limit, std::uint64_t& out) {
  if (a != 0 && b > limit / a) return false;
  out = a * b;
  return out <= limit;
}

}  // namespace gguf_detail

// A GGUF file, validated in full when opened: its metadata (decoded on request) and tensors, and their data.
class GgufFile {
 public:
  // Maps the file read-only (MappedFile) and validates it.
  static GgufFile open(const std::string& path) {
    GgufFile file;
    file.mapped_ = MappedFile(path);
    file.label_ = path;
    file.data_ = reinterpret_cast<const std::uint8_t*>(file.mapped_.bytes().data);
    file.size_ = file.mapped_.size();
    file.read_header();
    return file;
  }

  // The same checks on bytes in memory (tests, fuzzing); the file keeps its own copy of the bytes. `label` stands for
  // the path in messages.
  static GgufFile parse(const std::uint8_t* data, std::size_t size, std::string label) {
    GgufFile file;
    file.copy_.assign(data, data + size);
    file.label_ = std::move(label);
    file.data_ = file.copy_.data();
    file.size_ = size;
    file.read_header();
    return file;
  }

  GgufFile(GgufFile&&) noexcept = default;  // moving a vector or a MappedFile keeps data_ valid
  GgufFile& operator=(GgufFile&&) noexcept = default;
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return label_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_start_; }  // first byte of the data section
  std::uint64_t size() const { return size_; }

  // Metadata, in file order.
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  const GgufMetadataEntry* find_metadata(std::string_view key) const {
    const auto found = key_index_.find(std::string(key));
    return found == key_index_.end() ? nullptr : &metadata_[found->second];
  }
  bool has(std::string_view key) const { return find_metadata(key) != nullptr; }

  // Any integer type holding a non-negative value.
  std::uint64_t get_uint(std::string_view key) const {
    const GgufMetadataEntry& e = scalar(key, "get_uint", gguf_detail::is_integer(e_type(key)), "an integer");
    const gguf_detail::IntegerValue v = gguf_detail::load_integer(e.type, data_ + e.offset);
    if (v.negative)
      fail_key("get_uint", key,
               "is " + e.type_name() + " " + gguf_detail::integer_text(v) + ": expected a non-negative integer");
    return v.magnitude;
  }
  // Any integer type holding a value in the int64 range.
  std::int64_t get_int(std::string_view key) const {
    const GgufMetadataEntry& e = scalar(key, "get_int", gguf_detail::is_integer(e_type(key)), "an integer");
    return to_int64(gguf_detail::load_integer(e.type, data_ + e.offset), "get_int", key, e.type_name());
  }
  // float32 or float64 (integers are converted too).
  double get_float(std::string_view key) const {
    const std::uint32_t type = e_type(key);
    const GgufMetadataEntry& e =
        scalar(key, "get_float", gguf_detail::is_float(type) || gguf_detail::is_integer(type), "a number");
    return number_at(e.type, data_ + e.offset);
  }
  bool get_bool(std::string_view key) const {
    const GgufMetadataEntry& e =
        scalar(key, "get_bool", e_type(key) == static_cast<std::uint32_t>(GgufValueType::boolean), "bool");
    return data_[e.offset] != 0;
  }
  std::string get_string(std::string_view key) const {
    const GgufMetadataEntry& e =
        scalar(key, "get_string", e_type(key) == static_cast<std::uint32_t>(GgufValueType::string), "string");
    return std::string(reinterpret_cast<const char*>(data_ + e.offset + 8), static_cast<std::size_t>(e.bytes - 8));
  }
  // An array of strings (tokenizer.ggml.tokens, tokenizer.ggml.merges).
  std::vector<std::string> get_strings(std::string_view key) const {
    const GgufMetadataEntry& e = array(
        key, "get_strings", [](std::uint32_t t) { return t == static_cast<std::uint32_t>(GgufValueType::string); },
        "array[string]");
    std::vector<std::string> out;
    out.reserve(static_cast<std::size_t>(e.count));  // bounded by the file's size when it was opened
    const std::uint8_t* p = data_ + e.offset;
    for (std::uint64_t i = 0; i < e.count; ++i) {
      const std::uint64_t length = gguf_detail::load_u64(p);
      out.emplace_back(reinterpret_cast<const char*>(p + 8), static_cast<std::size_t>(length));
      p += 8 + length;
    }
    return out;
  }
  // An array of any integer type, each value in the int64 range (tokenizer.ggml.token_type).
  std::vector<std::int64_t> get_ints(std::string_view key) const {
    const GgufMetadataEntry& e = array(key, "get_ints", gguf_detail::is_integer, "an array of integers");
    const std::uint64_t size = gguf_detail::fixed_size(e.element_type);
    std::vector<std::int64_t> out(static_cast<std::size_t>(e.count));
    for (std::uint64_t i = 0; i < e.count; ++i)
      out[i] = to_int64(gguf_detail::load_integer(e.element_type, data_ + e.offset + i * size), "get_ints", key,
                        e.type_name());
    return out;
  }
  // An array of numbers, float or integer (tokenizer.ggml.scores).
  std::vector<double> get_floats(std::string_view key) const {
    const GgufMetadataEntry& e = array(
        key, "get_floats", [](std::uint32_t t) { return gguf_detail::is_float(t) || gguf_detail::is_integer(t); },
        "an array of numbers");
    const std::uint64_t size = gguf_detail::fixed_size(e.element_type);
    std::vector<double> out(static_cast<std::size_t>(e.count));
    for (std::uint64_t i = 0; i < e.count; ++i) out[i] = number_at(e.element_type, data_ + e.offset + i * size);
    return out;
  }

  // A short printable form of a value: numbers, true/false, a string quoted (cut after `max_chars`), an array as
  // "[string x 49152]".
  std::string value_text(const GgufMetadataEntry& e, std::size_t max_chars = 60) const {
    const std::uint8_t* p = data_ + e.offset;
    if (e.is_array())
      return "[" + std::string(gguf_value_type_name(e.element_type)) + " x " + std::to_string(e.count) + "]";
    if (gguf_detail::is_integer(e.type)) return gguf_detail::integer_text(gguf_detail::load_integer(e.type, p));
    if (gguf_detail::is_float(e.type)) return to_text(gguf_detail::load_float(e.type, p));
    if (e.type == static_cast<std::uint32_t>(GgufValueType::boolean)) return p[0] ? "true" : "false";
    const std::string_view text(reinterpret_cast<const char*>(p + 8), static_cast<std::size_t>(e.bytes - 8));
    if (text.size() <= max_chars) return gguf_detail::quoted(text);
    return gguf_detail::quoted(text.substr(0, max_chars)) + "... (" + std::to_string(text.size()) + " bytes)";
  }

  // Tensors, in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const {
    const auto found = tensor_index_.find(std::string(name));
    return found == tensor_index_.end() ? nullptr : &tensors_[found->second];
  }
  const GgufTensorInfo& tensor(std::string_view name) const {
    const GgufTensorInfo* t = find_tensor(name);
    if (t == nullptr)
      fail("shrink::io::GgufFile::tensor", label_ + ": no tensor " + gguf_detail::quoted(name) + " among its " +
                                               std::to_string(tensors_.size()) + " tensors");
    return *t;
  }
  // The stored bytes of a metadata value of this file (e.bytes of them, from e.offset: of an array, its elements).
  const std::uint8_t* value_data(const GgufMetadataEntry& e) const {
    const GgufMetadataEntry* mine = find_metadata(e.key);
    if (mine == nullptr || mine->offset != e.offset || mine->bytes != e.bytes || mine->type != e.type)
      fail("shrink::io::GgufFile::value_data",
           label_ + ": key " + gguf_detail::quoted(e.key) + " is not a metadata entry of this file");
    return data_ + mine->offset;
  }
  // The stored bytes of a tensor of this file (t.bytes of them).
  const std::uint8_t* tensor_data(const GgufTensorInfo& t) const { return data_ + own(t, "tensor_data").offset; }

  // The tensor as row-major float32 of its shape.
  std::vector<float> dequantize(const GgufTensorInfo& t) const {
    require_supported(own(t, "dequantize"), "dequantize");
    std::vector<float> out(static_cast<std::size_t>(t.elements()));
    dequantize_into(t, out.data(), out.size());
    return out;
  }
  std::vector<float> dequantize(std::string_view name) const { return dequantize(tensor(name)); }
  // Into out[0, count); count must equal t.elements(). Nothing is written when the tensor's type is unsupported.
  void dequantize_into(const GgufTensorInfo& t, float* out, std::size_t count) const {
    const GgufTensorInfo& own_t = own(t, "dequantize_into");
    require_supported(own_t, "dequantize_into");
    const std::int64_t elements = own_t.elements();
    if (count != static_cast<std::uint64_t>(elements))
      fail("shrink::io::GgufFile::dequantize_into", label_ + ": tensor " + gguf_detail::quoted(t.name) +
                                                        ": count = " + std::to_string(count) + ": expected " +
                                                        std::to_string(elements) + " (its elements)");
    if (elements > 0 && out == nullptr)
      fail("shrink::io::GgufFile::dequantize_into",
           label_ + ": tensor " + gguf_detail::quoted(t.name) + ": out = null");
    const GgufTypeLayout layout = gguf_type_layout(own_t.type);
    const std::int64_t blocks = elements / layout.block_elements;
    const std::uint8_t* data = data_ + own_t.offset;
    // Blocks are independent: each chunk of blocks gives the same bits on any executor.
    parallel_for(blocks, chunk_size(blocks, 2.0 * layout.block_elements), [&](std::int64_t begin, std::int64_t end) {
      gguf_dequantize(own_t.type, data + begin * layout.block_bytes, (end - begin) * layout.block_elements,
                      out + begin * layout.block_elements);
    });
  }

 private:
  GgufFile() = default;

  [[noreturn]] void fail_key(const char* method, std::string_view key, const std::string& what) const {
    fail((std::string("shrink::io::GgufFile::") + method).c_str(),
         label_ + ": key " + gguf_detail::quoted(key) + " " + what);
  }
  std::uint32_t e_type(std::string_view key) const {
    const GgufMetadataEntry* e = find_metadata(key);
    return e == nullptr ? 0 : e->type;
  }
  const GgufMetadataEntry& present(std::string_view key, const char* method, const char* expected) const {
    const GgufMetadataEntry* e = find_metadata(key);
    if (e == nullptr) fail_key(method, key, std::string("is absent: expected ") + expected);
    return *e;
  }
  const GgufMetadataEntry& scalar(std::string_view key, const char* method, bool type_ok, const char* expected) const {
    const GgufMetadataEntry& e = present(key, method, expected);
    if (!type_ok) fail_key(method, key, "is " + e.type_name() + ": expected " + expected);
    return e;
  }
  template <class Accept>
  const GgufMetadataEntry& array(std::string_view key, const char* method, Accept accept, const char* expected) const {
    const GgufMetadataEntry& e = present(key, method, expected);
    if (!e.is_array() || !accept(e.element_type))
      fail_key(method, key, "is " + e.type_name() + ": expected " + expected);
    return e;
  }
  std::int64_t to_int64(gguf_detail::IntegerValue v, const char* method, std::string_view key,
                        const std::string& type) const {
    constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    if (v.magnitude > kMax + (v.negative ? 1 : 0))
      fail_key(method, key,
               "is " + type + " " + gguf_detail::integer_text(v) + ": expected a value in the int64 range");
    // The magnitude of INT64_MIN is kMax + 1: negate in unsigned arithmetic, then convert.
    return v.negative ? static_cast<std::int64_t>(0 - v.magnitude) : static_cast<std::int64_t>(v.magnitude);
  }
  static double number_at(std::uint32_t type, const std::uint8_t* p) {
    if (gguf_detail::is_float(type)) return gguf_detail::load_float(type, p);
    const gguf_detail::IntegerValue v = gguf_detail::load_integer(type, p);
    return v.negative ? -static_cast<double>(v.magnitude) : static_cast<double>(v.magnitude);
  }
  // This file's entry for t (a caller's copy is looked up by name and must match it).
  const GgufTensorInfo& own(const GgufTensorInfo& t, const char* method) const {
    if (&t >= tensors_.data() && &t < tensors_.data() + tensors_.size()) return t;
    const GgufTensorInfo* mine = find_tensor(t.name);
    if (mine == nullptr || mine->offset != t.offset || mine->bytes != t.bytes || mine->type != t.type ||
        mine->shape != t.shape)
      fail((std::string("shrink::io::GgufFile::") + method).c_str(),
           label_ + ": tensor " + gguf_detail::quoted(t.name) + " is not a tensor of this file");
    return *mine;
  }
  void require_supported(const GgufTensorInfo& t, const char* method) const {
    if (!gguf_type_supported(t.type))
      fail((std::string("shrink::io::GgufFile::") + method).c_str(),
           label_ + ": tensor " + gguf_detail::quoted(t.name) + " has type " + gguf_type_name(t.type) + " (" +
               std::to_string(t.type) + "): expected one of " + gguf_supported_type_names());
  }

  void read_header() {
    gguf_detail::Cursor cursor(data_, size_, label_);
    if (size_ == 0) cursor.fail("empty file: expected a GGUF file (magic \"GGUF\")");
    cursor.need(4, "the magic");
    if (std::memcmp(data_, "FUGG", 4) == 0)
      cursor.fail("a big-endian GGUF file (magic bytes \"FUGG\"): expected a little-endian one");
    if (std::memcmp(data_, "GGUF", 4) != 0)
      cursor.fail("starts with " + gguf_detail::quoted(std::string_view(reinterpret_cast<const char*>(data_), 4)) +
                  ": expected the magic \"GGUF\"");
    cursor.skip(4, "the magic");
    version_ = cursor.u32("the version");
    const std::uint32_t swapped = (version_ >> 24) | ((version_ >> 8) & 0xFF00u);
    if ((version_ & 0xFFFFu) == 0 && swapped >= 1 && swapped <= 3)
      cursor.fail("version field reads " + std::to_string(version_) + ", a big-endian GGUF file of version " +
                  std::to_string(swapped) + ": expected a little-endian one");
    if (version_ == 1)
      cursor.fail("GGUF version 1 (32-bit counts and lengths): expected version 2 or 3 (convert it with a newer tool)");
    if (version_ != 2 && version_ != 3)
      cursor.fail("GGUF version " + std::to_string(version_) + ": expected version 2 or 3");
    const std::uint64_t tensor_count = cursor.u64("tensor_count");
    const std::uint64_t kv_count = cursor.u64("kv_count");
    if (kv_count > cursor.left() / gguf_detail::kMinKeyValueBytes)
      cursor.fail("kv_count = " + std::to_string(kv_count) + ": more than the " + std::to_string(cursor.left()) +
                  " bytes left can hold (" + std::to_string(gguf_detail::kMinKeyValueBytes) + " bytes at least each)");
    if (tensor_count > cursor.left() / gguf_detail::kMinTensorInfoBytes)
      cursor.fail("tensor_count = " + std::to_string(tensor_count) + ": more than the " +
                  std::to_string(cursor.left()) + " bytes left can hold (" +
                  std::to_string(gguf_detail::kMinTensorInfoBytes) + " bytes at least each)");
    read_metadata(cursor, kv_count);
    read_alignment(cursor);
    read_tensor_infos(cursor, tensor_count);
    place_tensors(cursor);
  }

  void read_metadata(gguf_detail::Cursor& cursor, std::uint64_t kv_count) {
    metadata_.reserve(static_cast<std::size_t>(kv_count));
    for (std::uint64_t i = 0; i < kv_count; ++i) {
      const std::string index = "key/value " + std::to_string(i);
      GgufMetadataEntry e;
      e.key = std::string(cursor.string(index + " key"));
      const std::string what = "key " + gguf_detail::quoted(e.key);
      if (key_index_.count(e.key)) cursor.fail(what + " appears twice: expected unique keys");
      e.type = cursor.u32(what + " value type");
      if (e.type > static_cast<std::uint32_t>(GgufValueType::float64))
        cursor.fail(what + ": value type " + std::to_string(e.type) + ": expected a GGUF value type (0 to 12)");
      if (e.is_array()) {
        e.element_type = cursor.u32(what + " array type");
        if (e.element_type > static_cast<std::uint32_t>(GgufValueType::float64))
          cursor.fail(what + ": array element type " + std::to_string(e.element_type) +
                      ": expected a GGUF value type (0 to 12)");
        e.count = cursor.u64(what + " array count");
        e.offset = cursor.position();
        gguf_detail::skip_elements(cursor, e.element_type, e.count, what, 1);
      } else {
        e.offset = cursor.position();
        gguf_detail::skip_value(cursor, e.type, what, 0);
      }
      e.bytes = cursor.position() - e.offset;
      key_index_.emplace(e.key, metadata_.size());
      metadata_.push_back(std::move(e));
    }
  }

  void read_alignment(const gguf_detail::Cursor& cursor) {
    alignment_ = gguf_detail::kDefaultAlignment;
    const GgufMetadataEntry* e = find_metadata("general.alignment");
    if (e == nullptr) return;
    if (!gguf_detail::is_integer(e->type))
      cursor.fail("key \"general.alignment\" is " + e->type_name() + ": expected an unsigned integer (uint32)");
    const gguf_detail::IntegerValue v = gguf_detail::load_integer(e->type, data_ + e->offset);
    if (v.negative || v.magnitude == 0 || (v.magnitude & (v.magnitude - 1)) != 0)
      cursor.fail("key \"general.alignment\" = " + gguf_detail::integer_text(v) + ": expected a power of two");
    alignment_ = v.magnitude;
  }

  void read_tensor_infos(gguf_detail::Cursor& cursor, std::uint64_t tensor_count) {
    constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    tensors_.reserve(static_cast<std::size_t>(tensor_count));
    for (std::uint64_t i = 0; i < tensor_count; ++i) {
      GgufTensorInfo t;
      t.name = std::string(cursor.string("tensor info " + std::to_string(i) + " name"));
      const std::string what = "tensor " + gguf_detail::quoted(t.name);
      if (tensor_index_.count(t.name)) cursor.fail(what + " appears twice: expected unique tensor names");
      const std::uint32_t n_dims = cursor.u32(what + " n_dims");
      if (n_dims > gguf_detail::kMaxDims)
        cursor.fail(what + ": n_dims = " + std::to_string(n_dims) + ": expected at most " +
                    std::to_string(gguf_detail::kMaxDims) + " (ggml's limit)");
      std::uint64_t ne[gguf_detail::kMaxDims] = {1, 1, 1, 1};
      std::uint64_t elements = 1;
      for (std::uint32_t d = 0; d < n_dims; ++d) {
        ne[d] = cursor.u64(what + " ne[" + std::to_string(d) + "]");
        if (ne[d] > kLimit)
          cursor.fail(what + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne[d]) +
                      ": expected at most 2^63 - 1");
        if (!gguf_detail::checked_mul(elements, ne[d], kLimit, elements))
          cursor.fail(what + ": ne = " + ne_text(ne, d + 1) + ": element count overflows int64");
      }
      t.type = cursor.u32(what + " type");
      const GgufTypeLayout layout = gguf_type_layout(t.type);
      if (layout.block_elements == 0)
        cursor.fail(what + ": type " + std::to_string(t.type) + " is not a ggml type: expected one of " +
                    gguf_supported_type_names() + " (or another known ggml type)");
      if (ne[0] % layout.block_elements != 0)
        cursor.fail(what + ": ne = " + ne_text(ne, n_dims) + " of type " + layout.name +
                    ": expected ne[0] a multiple of " + std::to_string(layout.block_elements) + " (its block size)");
      if (!gguf_detail::checked_mul(elements / layout.block_elements, layout.block_bytes, kLimit, t.bytes))
        cursor.fail(what + ": ne = " + ne_text(ne, n_dims) + " of type " + layout.name + ": byte size overflows int64");
      t.offset = cursor.u64(what + " offset");  // relative to the data section until place_tensors()
      for (std::uint32_t d = n_dims; d-- > 0;) t.shape.push_back(static_cast<std::int64_t>(ne[d]));
      tensor_index_.emplace(t.name, tensors_.size());
      tensors_.push_back(std::move(t));
    }
  }

  // Finds the data section and checks every tensor lies inside the file, aligned, overlapping no other.
  void place_tensors(const gguf_detail::Cursor& cursor) {
    const std::uint64_t end_of_infos = cursor.position();
    const std::uint64_t padding = (alignment_ - end_of_infos % alignment_) % alignment_;
    const bool any_tensor = !tensors_.empty();
    if (any_tensor && padding > cursor.left())
      cursor.fail("the data section starts at byte " + std::to_string(end_of_infos) + " + " + std::to_string(padding) +
                  " bytes of padding to the alignment " + std::to_string(alignment_) + ", past the end of the file (" +
                  std::to_string(size_) + " bytes)");
    data_start_ = any_tensor ? end_of_infos + padding : std::min<std::uint64_t>(size_, end_of_infos + padding);
    const std::uint64_t data_bytes = size_ - data_start_;
    for (GgufTensorInfo& t : tensors_) {
      const std::string what = "tensor " + gguf_detail::quoted(t.name);
      if (t.offset % alignment_ != 0)
        cursor.fail(what + ": offset = " + std::to_string(t.offset) + ": expected a multiple of the alignment " +
                    std::to_string(alignment_));
      if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
        cursor.fail(what + ": offset = " + std::to_string(t.offset) + " and " + std::to_string(t.bytes) +
                    " bytes: expected them inside the data section of " + std::to_string(data_bytes) +
                    " bytes (from byte " + std::to_string(data_start_) + ")");
      t.offset += data_start_;
    }
    std::vector<std::size_t> order(tensors_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return tensors_[a].offset != tensors_[b].offset ? tensors_[a].offset < tensors_[b].offset : a < b;
    });
    const GgufTensorInfo* previous = nullptr;  // the non-empty tensor ending last so far
    for (std::size_t i : order) {
      const GgufTensorInfo& t = tensors_[i];
      if (t.bytes == 0) continue;
      if (previous != nullptr && t.offset < previous->offset + previous->bytes)
        cursor.fail("tensor " + gguf_detail::quoted(t.name) + " at data offset " +
                    std::to_string(t.offset - data_start_) + " overlaps tensor " + gguf_detail::quoted(previous->name) +
                    " at [" + std::to_string(previous->offset - data_start_) + ", " +
                    std::to_string(previous->offset + previous->bytes - data_start_) + ")");
      if (previous == nullptr || t.offset + t.bytes > previous->offset + previous->bytes) previous = &t;
    }
  }

  static std::string ne_text(const std::uint64_t* ne, std::uint32_t n) {
    std::string s = "[";
    for (std::uint32_t d = 0; d < n; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
    return s + "]";
  }

  MappedFile mapped_;
  std::vector<std::uint8_t> copy_;
  std::string label_;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t size_ = 0;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = gguf_detail::kDefaultAlignment;
  std::uint64_t data_start_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  std::unordered_map<std::string, std::size_t> key_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace shrink::io
