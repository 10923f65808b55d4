// Safetensors model files: validated, memory-mapped reading (SafetensorsFile) and tensor-by-tensor streaming
// writing (SafetensorsWriter). Needs nlohmann_json 3.10 or later.
//
// The format (Hugging Face): 8 bytes little-endian u64 N, then N bytes of UTF-8 JSON
//   {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
// then the data area; offsets count bytes from the start of the data area, and the tensors, ordered by
// offset, cover it exactly: no gaps, no overlaps, no trailing bytes. Element data is little-endian, row-major.
//
// Files are untrusted: every length, offset, shape and name is checked before use, and a bad file raises
// shrink::Error naming the file, the tensor and what was expected.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/view.hpp"
#include "shrink/io/atomic_file.hpp"
#include "shrink/io/mapped_file.hpp"

namespace shrink::io {

// Largest header a reader accepts and a writer produces (the cap of the reference implementation).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// The safetensors name of a ScalarType ("F32", "BF16", "F8_E4M3", "BOOL", ...); nullptr for the packed 4-bit
// types, which safetensors does not define.
constexpr const char* safetensors_dtype_name(ScalarType type) {
  switch (type) {
    case ScalarType::f32: return "F32";
    case ScalarType::f64: return "F64";
    case ScalarType::f16: return "F16";
    case ScalarType::bf16: return "BF16";
    case ScalarType::f8_e4m3: return "F8_E4M3";
    case ScalarType::f8_e5m2: return "F8_E5M2";
    case ScalarType::i8: return "I8";
    case ScalarType::u8: return "U8";
    case ScalarType::i16: return "I16";
    case ScalarType::i32: return "I32";
    case ScalarType::i64: return "I64";
    case ScalarType::boolean: return "BOOL";
    case ScalarType::i4:
    case ScalarType::u4: return nullptr;
  }
  return nullptr;
}

// The ScalarType of a safetensors dtype name, or nothing for a name shrink does not read.
inline std::optional<ScalarType> safetensors_dtype_from_name(std::string_view name) {
  constexpr ScalarType supported[] = {ScalarType::f32,     ScalarType::f64,     ScalarType::f16, ScalarType::bf16,
                                      ScalarType::f8_e4m3, ScalarType::f8_e5m2, ScalarType::i8,  ScalarType::u8,
                                      ScalarType::i16,     ScalarType::i32,     ScalarType::i64, ScalarType::boolean};
  for (ScalarType type : supported)
    if (name == safetensors_dtype_name(type)) return type;
  return std::nullopt;
}

// One tensor of a file: where its bytes lie in the data area and how to read them.
struct TensorInfo {
  std::string name;
  ScalarType dtype = ScalarType::f32;
  std::vector<std::int64_t> shape;  // empty for a 0-d tensor (one element)
  std::uint64_t offset = 0;         // first byte, counted from the start of the data area
  std::uint64_t bytes = 0;          // = numel() * element size

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;  // validated not to overflow when the header was read
    return n;
  }
};

// What a validated header says: the tensors in file order (by offset), the metadata, and where the data lies.
struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // 8 + header length: file offset of the data area
  std::uint64_t data_bytes = 0;  // size of the data area
};

namespace detail {

// a * b into out when it stays <= limit.
inline bool checked_mul(std::uint64_t a, std::uint64_t b, std::uint64_t limit, std::uint64_t& out) {
  if (a != 0 && b > limit / a) return false;
  out = a * b;
  return out <= limit;
}

// Offset of the first byte that breaks UTF-8 (overlong forms, surrogates and code points past U+10FFFF
// included), or size when the text is valid.
inline std::size_t utf8_error_offset(const unsigned char* text, std::size_t size) {
  std::size_t i = 0;
  while (i < size) {
    const unsigned char c = text[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t length = 0;
    std::uint32_t code = 0;
    std::uint32_t minimum = 0;
    if ((c & 0xE0) == 0xC0) {
      length = 2, code = c & 0x1Fu, minimum = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      length = 3, code = c & 0x0Fu, minimum = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      length = 4, code = c & 0x07u, minimum = 0x10000;
    } else {
      return i;
    }
    if (size - i < length) return i;
    for (std::size_t k = 1; k < length; ++k) {
      if ((text[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (text[i + k] & 0x3Fu);
    }
    if (code < minimum || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return size;
}

inline bool is_utf8(const std::string& text) {
  return utf8_error_offset(reinterpret_cast<const unsigned char*>(text.data()), text.size()) == text.size();
}

// A name as a JSON string literal: quoted, control characters escaped, bad UTF-8 replaced.
inline std::string quoted(const std::string& name) {
  return nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Whether `s` is a non-empty stem followed by `suffix`.
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A shape as "[a, b, ...]", for messages (quant_read.hpp's shape_text writes JSON's "[a,b]").
inline std::string dims_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) out += (d ? ", " : "") + std::to_string(shape[d]);
  return out + "]";
}

inline std::string json_type(const nlohmann::json& value) {
  if (value.is_number_unsigned()) return "a non-negative integer";
  if (value.is_number_integer()) return "a negative integer";
  if (value.is_number_float()) return "a non-integer number";
  return std::string("a JSON ") + value.type_name();
}

// Reads a JSON value as an integer in [0, limit].
inline std::optional<std::uint64_t> as_count(const nlohmann::json& value, std::uint64_t limit) {
  if (!value.is_number_unsigned()) return std::nullopt;
  const std::uint64_t v = value.get<std::uint64_t>();
  if (v > limit) return std::nullopt;
  return v;
}

class HeaderErrors {
 public:
  HeaderErrors(const char* function, const std::string& label) : function_(function), label_(label) {}
  [[noreturn]] void fail(const std::string& what) const { shrink::fail(function_, label_ + ": " + what); }
  [[noreturn]] void fail_tensor(const std::string& name, const std::string& what) const {
    fail("tensor " + quoted(name) + ": " + what);
  }

 private:
  const char* function_;
  const std::string& label_;
};

inline std::uint64_t read_le64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = (v << 8) | static_cast<std::uint64_t>(p[k]);
  return v;
}

// Parses the header JSON, rejecting duplicate keys (which nlohmann would silently collapse), nesting deeper
// than the format uses and arrays longer than any shape, before a hostile header can grow a large tree.
inline nlohmann::json parse_header_json(const char* text, std::size_t size, const HeaderErrors& errors) {
  constexpr int kMaxDepth = 2;                 // object > tensor object > shape array
  constexpr std::size_t kMaxArrayLength = 1024;  // far beyond any real rank
  struct Level {
    bool is_array = false;
    std::size_t count = 0;
    std::set<std::string> keys;
  };
  std::vector<Level> levels;
  auto count_element = [&] {
    if (!levels.empty() && levels.back().is_array && ++levels.back().count > kMaxArrayLength)
      errors.fail("header: a JSON array longer than " + std::to_string(kMaxArrayLength) +
                  " elements: expected a safetensors header (shapes and offsets are short arrays)");
  };
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&](int depth, Event event, nlohmann::json& parsed) -> bool {
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        count_element();
        if (depth > kMaxDepth)
          errors.fail("header: JSON nested " + std::to_string(depth + 1) +
                      " levels deep: expected at most 3 (header object, tensor object, shape array)");
        levels.push_back(Level{event == Event::array_start, 0, {}});
        break;
      case Event::object_end:
      case Event::array_end:
        levels.pop_back();
        break;
      case Event::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        if (!levels.back().keys.insert(key).second)
          errors.fail("header: duplicate key " + quoted(key) +
                      (levels.size() == 1 ? std::string() : " inside an entry") + ": expected unique names");
        break;
      }
      case Event::value:
        count_element();
        break;
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, text + size, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
  } catch (const nlohmann::json::exception& e) {
    std::string message = e.what();
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    errors.fail("header is not valid JSON: " + message);
  }
}

inline std::vector<std::int64_t> read_shape(const nlohmann::json& shape, const std::string& name,
                                            const HeaderErrors& errors) {
  if (!shape.is_array()) errors.fail_tensor(name, "shape is " + json_type(shape) + ": expected an array of sizes");
  std::vector<std::int64_t> sizes;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    const auto size = as_count(shape[d], static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
    if (!size)
      errors.fail_tensor(name, "shape = " + shape.dump() + ": dimension " + std::to_string(d) + " is " +
                                   (shape[d].is_number_unsigned() ? "past the int64 range" : json_type(shape[d])) +
                                   ": expected a non-negative integer");
    sizes.push_back(static_cast<std::int64_t>(*size));
  }
  return sizes;
}

inline TensorInfo read_tensor_entry(const std::string& name, const nlohmann::json& entry, std::uint64_t data_bytes,
                                    const HeaderErrors& errors) {
  if (!entry.is_object())
    errors.fail_tensor(name, "entry is " + json_type(entry) + ": expected an object with dtype, shape, data_offsets");
  for (const auto& item : entry.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      errors.fail_tensor(name, "unexpected key " + quoted(item.key()) + ": expected only dtype, shape, data_offsets");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(key)) errors.fail_tensor(name, std::string("no ") + key + ": expected dtype, shape, data_offsets");

  TensorInfo info;
  info.name = name;
  const nlohmann::json& dtype = entry["dtype"];
  if (!dtype.is_string()) errors.fail_tensor(name, "dtype is " + json_type(dtype) + ": expected a string such as \"F32\"");
  const auto type = safetensors_dtype_from_name(dtype.get_ref<const std::string&>());
  if (!type)
    errors.fail_tensor(name, "dtype = " + dtype.dump() +
                                 ": expected one of F32, F16, BF16, F64, I8, U8, I16, I32, I64, BOOL, F8_E4M3, F8_E5M2");
  info.dtype = *type;
  info.shape = read_shape(entry["shape"], name, errors);

  const nlohmann::json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    errors.fail_tensor(name, "data_offsets = " + offsets.dump() + ": expected [begin, end]");
  const auto begin = as_count(offsets[0], std::numeric_limits<std::uint64_t>::max());
  const auto end = as_count(offsets[1], std::numeric_limits<std::uint64_t>::max());
  if (!begin || !end) errors.fail_tensor(name, "data_offsets = " + offsets.dump() + ": expected two non-negative integers");
  if (*begin > *end)
    errors.fail_tensor(name, "data_offsets = " + offsets.dump() + ": expected begin <= end");
  if (*end > data_bytes)
    errors.fail_tensor(name, "data_offsets = " + offsets.dump() + ": expected offsets inside the data area of " +
                                 std::to_string(data_bytes) + " bytes");

  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t numel = 1;
  for (std::int64_t d : info.shape)
    if (!checked_mul(numel, static_cast<std::uint64_t>(d), kLimit, numel))
      errors.fail_tensor(name, "shape = " + entry["shape"].dump() + ": element count overflows int64");
  std::uint64_t expected = 0;
  const auto element_bytes = static_cast<std::uint64_t>(element_bits(info.dtype) / 8);
  if (!checked_mul(numel, element_bytes, kLimit, expected))
    errors.fail_tensor(name, "shape = " + entry["shape"].dump() + ": byte size overflows int64");
  if (*end - *begin != expected)
    errors.fail_tensor(name, "data_offsets = " + offsets.dump() + " hold " + std::to_string(*end - *begin) +
                                 " bytes: expected " + std::to_string(expected) + " (" + std::to_string(numel) + " " +
                                 dtype.get_ref<const std::string&>() + " elements of shape " + entry["shape"].dump() + ")");
  info.offset = *begin;
  info.bytes = expected;
  return info;
}

inline std::string offsets_text(const TensorInfo& t) {
  return "[" + std::to_string(t.offset) + ", " + std::to_string(t.offset + t.bytes) + "]";
}

}  // namespace detail

// Parses and validates a whole safetensors file held in memory (e.g. mapped). `label` names the file in
// errors. Throws shrink::Error for any defect; reads nothing outside `file`.
inline SafetensorsHeader parse_safetensors(ByteView file, const std::string& label,
                                           const char* function = "shrink::io::parse_safetensors") {
  const detail::HeaderErrors errors(function, label);
  if (file.size == 0) errors.fail("empty file: expected an 8-byte header length, a JSON header and the tensor data");
  if (file.size < 8)
    errors.fail("truncated file of " + std::to_string(file.size) +
                " bytes: expected at least the 8-byte little-endian header length");
  const std::uint64_t header_bytes = detail::read_le64(file.data);
  // Two text files are often taken for the tensors: say what they are instead of "header length = 7017841271895827067".
  const bool impossible_length = header_bytes > kSafetensorsMaxHeaderBytes || header_bytes > file.size - 8;
  auto starts_with = [&](const char* prefix) {
    const std::size_t n = std::char_traits<char>::length(prefix);
    return file.size >= n && std::memcmp(file.data, prefix, n) == 0;
  };
  if (impossible_length && starts_with("version https://git-lfs"))
    errors.fail("a Git LFS pointer (" + std::to_string(file.size) +
                " bytes of text), not the tensor data: expected the file itself (git lfs pull, or download it)");
  if (impossible_length && (starts_with("{\n") || starts_with("{\r") || starts_with("{\"") || starts_with("{ ")))
    errors.fail(
        "a JSON document, not a safetensors file: expected a .safetensors file (a sharded checkpoint's "
        "model.safetensors.index.json lists its shard files)");
  if (header_bytes > kSafetensorsMaxHeaderBytes)
    errors.fail("header length = " + std::to_string(header_bytes) + ": expected at most " +
                std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  if (header_bytes > file.size - 8)
    errors.fail("header length = " + std::to_string(header_bytes) + ": runs past the end of the file (" +
                std::to_string(file.size) + " bytes): expected a complete header (truncated file?)");
  if (header_bytes == 0) errors.fail("header length = 0: expected a JSON object");

  const auto* text = reinterpret_cast<const unsigned char*>(file.data + 8);
  const std::size_t bad = detail::utf8_error_offset(text, static_cast<std::size_t>(header_bytes));
  if (bad != header_bytes)
    errors.fail("header byte " + std::to_string(bad) + " is not valid UTF-8: expected a UTF-8 JSON header");

  SafetensorsHeader header;
  header.data_start = 8 + header_bytes;
  header.data_bytes = file.size - header.data_start;
  const nlohmann::json root =
      detail::parse_header_json(reinterpret_cast<const char*>(text), static_cast<std::size_t>(header_bytes), errors);
  if (!root.is_object()) errors.fail("header is " + detail::json_type(root) + ": expected a JSON object");

  for (const auto& item : root.items()) {
    if (item.key() == "__metadata__") {
      const nlohmann::json& metadata = item.value();
      if (metadata.is_null()) continue;
      if (!metadata.is_object())
        errors.fail("__metadata__ is " + detail::json_type(metadata) + ": expected an object of strings");
      for (const auto& entry : metadata.items()) {
        if (!entry.value().is_string())
          errors.fail("__metadata__ value of " + detail::quoted(entry.key()) + " is " +
                      detail::json_type(entry.value()) + ": expected a string");
        header.metadata.emplace(entry.key(), entry.value().get<std::string>());
      }
      continue;
    }
    header.tensors.push_back(detail::read_tensor_entry(item.key(), item.value(), header.data_bytes, errors));
  }

  std::sort(header.tensors.begin(), header.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.bytes < b.bytes;
  });
  std::uint64_t position = 0;
  const TensorInfo* previous = nullptr;
  for (const TensorInfo& t : header.tensors) {
    if (t.offset < position)
      errors.fail_tensor(t.name, "data_offsets = " + detail::offsets_text(t) + " overlap tensor " +
                                     detail::quoted(previous->name) + " at " + detail::offsets_text(*previous) +
                                     ": expected tensors that do not overlap");
    if (t.offset > position)
      errors.fail_tensor(t.name, "data_offsets = " + detail::offsets_text(t) + " leave a gap of " +
                                     std::to_string(t.offset - position) + " bytes after " +
                                     (previous ? "tensor " + detail::quoted(previous->name)
                                               : std::string("the start of the data area")) +
                                     ": expected tensors that cover the data area without gaps");
    position = t.offset + t.bytes;
    previous = &t;
  }
  if (position != header.data_bytes)
    errors.fail("data area of " + std::to_string(header.data_bytes) + " bytes has " +
                std::to_string(header.data_bytes - position) + " bytes after the last tensor" +
                (previous ? " " + detail::quoted(previous->name) : std::string()) +
                ": expected tensors that end where the file ends");
  return header;
}

// A safetensors file opened, validated and mapped read-only. Views and byte ranges stay valid while it lives.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path)
      : file_(path), header_(parse_safetensors(file_.bytes(), path, "shrink::io::SafetensorsFile")) {
    for (std::size_t i = 0; i < header_.tensors.size(); ++i) index_.emplace(header_.tensors[i].name, i);
  }

  const std::string& path() const { return file_.path(); }
  // In file order (by offset).
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  bool contains(const std::string& name) const { return index_.count(name) != 0; }

  const TensorInfo& info(const std::string& name) const {
    const auto found = index_.find(name);
    if (found == index_.end())
      fail("shrink::io::SafetensorsFile", path() + ": no tensor " + detail::quoted(name) + " in the file");
    return header_.tensors[found->second];
  }

  // The tensor's raw little-endian bytes, inside the mapping.
  ByteView bytes(const std::string& name) const {
    const TensorInfo& t = info(name);
    return ByteView{file_.bytes().data + header_.data_start + t.offset, static_cast<std::size_t>(t.bytes)};
  }

  // A typed row-major view of the tensor. T is the element type of its dtype (float, double, half, bfloat16,
  // float8_e4m3, float8_e5m2, int8/16/32/64_t, uint8_t); uint8_t also reads BOOL and the FP8 types as bytes.
  // The data must be aligned for T; files written by SafetensorsWriter are when larger elements come first.
  template <class T>
  TensorView<const T> view(const std::string& name) const {
    using Element = std::remove_const_t<T>;
    static_assert(!std::is_same<Element, bool>::value,
                  "read BOOL tensors as uint8_t: a byte other than 0 or 1 is not a valid bool");
    const TensorInfo& t = info(name);
    const ScalarType wanted = scalar_type_v<Element>;
    const bool as_bytes = std::is_same<Element, std::uint8_t>::value &&
                          (t.dtype == ScalarType::boolean || t.dtype == ScalarType::f8_e4m3 ||
                           t.dtype == ScalarType::f8_e5m2);
    if (t.dtype != wanted && !as_bytes)
      fail("shrink::io::SafetensorsFile::view", path() + ": tensor " + detail::quoted(name) + " has dtype " +
                                                    safetensors_dtype_name(t.dtype) + ": expected the element type " +
                                                    to_string(wanted) + " to match it");
    if (t.shape.size() > static_cast<std::size_t>(kMaxRank))
      fail("shrink::io::SafetensorsFile::view", path() + ": tensor " + detail::quoted(name) + " has rank " +
                                                    std::to_string(t.shape.size()) + ": TensorView holds at most " +
                                                    std::to_string(kMaxRank) + " dimensions (use bytes())");
    const ByteView data = bytes(name);
    if (reinterpret_cast<std::uintptr_t>(data.data) % alignof(Element) != 0)
      fail("shrink::io::SafetensorsFile::view", path() + ": tensor " + detail::quoted(name) + " starts at file offset " +
                                                    std::to_string(header_.data_start + t.offset) +
                                                    ", not aligned to " + std::to_string(alignof(Element)) +
                                                    " bytes: copy it out through bytes() instead");
    return TensorView<const T>(reinterpret_cast<const Element*>(data.data), Shape(t.shape));
  }

 private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::unordered_map<std::string, std::size_t> index_;
};

// One tensor a writer will write.
struct TensorDeclaration {
  std::string name;
  ScalarType dtype = ScalarType::f32;
  std::vector<std::int64_t> shape;
};

// Writes a safetensors file tensor by tensor without holding it in memory: declare every tensor and the
// metadata, write_header() (the constructor taking declarations does it), then write each tensor's bytes in
// declaration order (one call or several pieces), then finish(). The file is written as an unnamed file in
// `path`'s directory (Linux O_TMPFILE), which finish() names and renames over `path`: a writer destroyed before
// finish(), or a process that dies (Ctrl-C, kill, crash), leaves nothing behind. Where the filesystem has no
// unnamed files, a temporary name beside `path` is used instead, removed by a writer destroyed before finish(). Tensors
// are laid out in declaration order: declare wider elements first (F64/I64, then F32/I32, ...) for every tensor to be
// aligned for view<T>.
class SafetensorsWriter {
 public:
  explicit SafetensorsWriter(std::string path) : path_(std::move(path)), file_(path_, kOwner) {}
  SafetensorsWriter(std::string path, std::vector<TensorDeclaration> tensors,
                    std::map<std::string, std::string> metadata = {})
      : path_(std::move(path)), file_(path_, kOwner) {
    for (auto& t : tensors) add_tensor(std::move(t.name), t.dtype, std::move(t.shape));
    for (auto& m : metadata) add_metadata(m.first, m.second);
    write_header();
  }

  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;
  ~SafetensorsWriter() = default;  // file_ removes an unfinished file

  void add_tensor(std::string name, ScalarType dtype, std::vector<std::int64_t> shape) {
    require_state(State::declaring, "add_tensor");
    if (!detail::is_utf8(name)) fail_here("add_tensor", "a tensor name is not valid UTF-8: expected UTF-8 names");
    if (name == "__metadata__") fail_here("add_tensor", "tensor name \"__metadata__\" is reserved for the metadata");
    if (index_.count(name)) fail_here("add_tensor", "tensor " + detail::quoted(name) + " declared twice");
    if (safetensors_dtype_name(dtype) == nullptr)
      fail_here("add_tensor", "tensor " + detail::quoted(name) + ": dtype " + to_string(dtype) +
                                  " has no safetensors name: expected a byte-sized dtype");
    constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    std::uint64_t bytes = static_cast<std::uint64_t>(element_bits(dtype) / 8);
    for (std::int64_t d : shape) {
      if (d < 0)
        fail_here("add_tensor", "tensor " + detail::quoted(name) + ": shape = " + to_text(shape) +
                                    ": expected non-negative sizes");
      if (!detail::checked_mul(bytes, static_cast<std::uint64_t>(d), kLimit, bytes))
        fail_here("add_tensor", "tensor " + detail::quoted(name) + ": shape = " + to_text(shape) +
                                    ": byte size overflows int64");
    }
    if (bytes > kLimit - data_bytes_)
      fail_here("add_tensor", "tensor " + detail::quoted(name) + ": the data area would pass 2^63 bytes");
    index_.emplace(name, tensors_.size());
    tensors_.push_back(Entry{TensorDeclaration{std::move(name), dtype, std::move(shape)}, data_bytes_, bytes});
    data_bytes_ += bytes;
  }

  void add_metadata(std::string key, std::string value) {
    require_state(State::declaring, "add_metadata");
    if (!detail::is_utf8(key) || !detail::is_utf8(value))
      fail_here("add_metadata", "a metadata key or value is not valid UTF-8: expected UTF-8 text");
    metadata_[std::move(key)] = std::move(value);
  }

  // Creates the temporary file and writes the 8-byte length and the JSON header, padded with spaces so the
  // data area starts 8-byte aligned.
  void write_header() {
    require_state(State::declaring, "write_header");
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    if (!metadata_.empty()) header["__metadata__"] = metadata_;
    for (const Entry& t : tensors_)
      header[t.declaration.name] = {{"dtype", safetensors_dtype_name(t.declaration.dtype)},
                                    {"shape", t.declaration.shape},
                                    {"data_offsets", {t.offset, t.offset + t.bytes}}};
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    if (text.size() > kSafetensorsMaxHeaderBytes)
      fail_here("write_header", "header of " + std::to_string(text.size()) + " bytes: expected at most " +
                                    std::to_string(kSafetensorsMaxHeaderBytes));
    io_step([&] { file_.open(); });
    unsigned char length[8];
    for (int k = 0; k < 8; ++k) length[k] = static_cast<unsigned char>(static_cast<std::uint64_t>(text.size()) >> (8 * k));
    io_step([&] {
      file_.append(length, 8);
      file_.append(text.data(), text.size());
    });
    state_ = State::writing;
  }

  // The next bytes of tensor `name`, which must be the tensor being written (declaration order). A tensor of
  // zero bytes is written too, by a call with size 0.
  void write(const std::string& name, const void* data, std::size_t size) {
    require_state(State::writing, "write");
    if (current_ == tensors_.size())
      fail_here("write", "tensor " + detail::quoted(name) + ": every declared tensor is already written");
    const Entry& t = tensors_[current_];
    if (name != t.declaration.name)
      fail_here("write", "tensor " + detail::quoted(name) + ": expected tensor " + detail::quoted(t.declaration.name) +
                             " next (tensors are written in declaration order)" +
                             (index_.count(name) ? "" : "; this name was never declared"));
    if (size > t.bytes - written_)
      fail_here("write", "tensor " + detail::quoted(name) + ": " + std::to_string(size) + " bytes after " +
                             std::to_string(written_) + ": expected at most " + std::to_string(t.bytes - written_) +
                             " more (declared " + std::to_string(t.bytes) + " bytes)");
    if (size > 0 && data == nullptr) fail_here("write", "tensor " + detail::quoted(name) + ": data = null");
    io_step([&] { file_.append(data, size); });
    written_ += size;
    if (written_ == t.bytes) {
      ++current_;
      written_ = 0;
    }
  }
  void write(const std::string& name, ByteView bytes) { write(name, bytes.data, bytes.size); }

  // A host view's elements (all of them, or the next piece); T must match the declared dtype (uint8_t also
  // writes BOOL and the FP8 types as bytes).
  template <class T>
  void write(const std::string& name, const TensorView<T>& values) {
    using Element = std::remove_const_t<T>;
    static_assert(sizeof(bool) == 1, "BOOL tensors are one byte an element");
    require_host_view(values, "shrink::io::SafetensorsWriter::write", "values");
    require_contiguous(values, "shrink::io::SafetensorsWriter::write", "values");
    const auto found = index_.find(name);
    if (found != index_.end()) {
      const ScalarType declared = tensors_[found->second].declaration.dtype;
      const bool as_bytes = std::is_same<Element, std::uint8_t>::value &&
                            (declared == ScalarType::boolean || declared == ScalarType::f8_e4m3 ||
                             declared == ScalarType::f8_e5m2);
      if (declared != scalar_type_v<Element> && !as_bytes)
        fail_here("write", "tensor " + detail::quoted(name) + " declared " + safetensors_dtype_name(declared) +
                               ": got elements of type " + to_string(scalar_type_v<Element>));
    }
    write(name, values.data(), static_cast<std::size_t>(values.numel()) * sizeof(Element));
  }

  // Checks every tensor was written in full, flushes, syncs and renames the file to `path`.
  void finish() {
    require_state(State::writing, "finish");
    if (current_ != tensors_.size()) {
      const Entry& t = tensors_[current_];
      fail_here("finish", "tensor " + detail::quoted(t.declaration.name) + " has " + std::to_string(written_) +
                              " of its " + std::to_string(t.bytes) + " bytes: expected every tensor written in full");
    }
    io_step([&] { file_.commit(); });
    state_ = State::finished;
  }

  const std::string& path() const { return path_; }

 private:
  enum class State { declaring, writing, finished, failed };
  struct Entry {
    TensorDeclaration declaration;
    std::uint64_t offset;
    std::uint64_t bytes;
  };
  static constexpr const char* kOwner = "shrink::io::SafetensorsWriter";

  static std::string to_text(const std::vector<std::int64_t>& shape) {
    return nlohmann::json(shape).dump();
  }
  [[noreturn]] void fail_here(const char* method, const std::string& what) const {
    fail((std::string("shrink::io::SafetensorsWriter::") + method).c_str(), path_ + ": " + what);
  }
  // Runs a step of file_'s; its I/O error (the temporary file already removed) leaves the writer failed.
  template <class Step>
  void io_step(Step&& step) {
    try {
      step();
    } catch (...) {
      state_ = State::failed;
      throw;
    }
  }
  void require_state(State wanted, const char* method) const {
    if (state_ == wanted) return;
    static const char* const names[] = {"declaring tensors (write_header() not called yet)",
                                        "writing tensors (the header is written)", "finished",
                                        "failed after an I/O error"};
    static const char* const needs[] = {"before write_header()", "after write_header() and before finish()", "", ""};
    fail_here(method, std::string("called while ") + names[static_cast<int>(state_)] + ": expected a call " +
                          needs[static_cast<int>(wanted)]);
  }
  std::string path_;
  std::vector<Entry> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t data_bytes_ = 0;
  State state_ = State::declaring;
  AtomicFile file_;
  std::size_t current_ = 0;   // the tensor being written
  std::uint64_t written_ = 0;  // its bytes written so far
};

}  // namespace shrink::io
