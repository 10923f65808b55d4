// N:M compressed storage of a 2-D tensor: the n kept values of every group of m, their positions, and for 2:4 with
// 16-bit or 8-bit values the metadata words NVIDIA sparse tensor cores (mma.sp) read.
//
// values    [rows, cols / m * n] row-major: each group's n entries in increasing position order.
// positions same layout: the position in [0, m) of each entry within its group, strictly increasing in a group.
// A group the mask leaves with fewer than n kept elements is filled up to n with zeros at its lowest unused
// positions (mma.sp needs n distinct increasing indices per group); decompressing writes those zeros back where the
// mask pruned, so decompress(compress(W, mask)) equals apply_mask(W, mask) bit for bit.
// cols must be a multiple of m. NaN/inf values (float types) are bad input, as in to_csr.
//
// mma.sp metadata (pattern 2:4 and sizeof(T) 2: half, bfloat16; or sizeof(T) 1: int8, uint8, fp8), from the PTX ISA,
// "Sparse matrix storage" and the metadata fragment figures of mma.sp m16n8k32 (.f16/.bf16, also .s8/.u8) and
// m16n8k64 (.s8/.u8/.e4m3):
//   nibble     A group of 4 gives 4 bits: bits [1:0] the lower kept position, bits [3:2] the higher one, so
//              0b0100 keeps {0, 1}, 0b1000 {0, 2}, 0b1001 {1, 2}, 0b1100 {0, 3}, 0b1101 {1, 3}, 0b1110 {2, 3}
//              (the values mma.sp::ordered_metadata allows).
//   word       One uint32 covers rows r and r + 8 of a 16-row tile and 16 consecutive columns (4 groups) c..c+15,
//              c a multiple of 16: bits [4j+3 : 4j] hold group j (columns c+4j..c+4j+3) of row r, bits
//              [16+4j+3 : 16+4j] the same group of row r + 8. This is what thread lane 4q + t of the warp holds in
//              its metadata register, for q = r % 8 and t = (c % tile_k) / 16.
//   tiles      A is cut into tiles of 16 rows x tile_k columns: tile_k = 32 for 16-bit values (one m16n8k32) and
//              64 for 8-bit values (one m16n8k64). Tiles are stored row-tile major: tile (i, k) is tile number
//              i * (padded_cols / tile_k) + k, and holds 16 words (tile_k 32) or 32 words (tile_k 64).
//   in a tile  word q * (tile_k / 16) + t covers rows 16i + q and 16i + q + 8, columns k * tile_k + 16t .. +15.
// Thread -> word, sparsity selector 0: m16n8k32 (16-bit): lane L loads word (L / 4) * 2 + L % 2; lanes with
// L % 4 >= 2 are ignored by the instruction (a kernel alternating selectors 0 and 1 over two k-steps gives those
// lanes the next tile's words, 16 further on). m16n8k64 (8-bit): not one word per lane. Lane 4q + t holds row
// q + 8 (t & 1), columns 32 (t >> 1) .. +31, i.e. the low (t even) or high (t odd) halves of words 4q + 2 (t >> 1) and
// 4q + 2 (t >> 1) + 1 — the mapping Triton's dot_sparse reports measured on hardware; cuda/kernels/linear_nm_layout.hpp
// composes it (Operand<int8>::metadata_register).
// Padding: rows are padded to a multiple of 16 and columns to a multiple of tile_k; padded groups hold 0b0100
// (positions 0 and 1), a valid pattern whose values a kernel zero-fills. `values` is not padded.
// Not yet run through mma.sp on a GPU: the thread mapping is read from the PTX ISA figures (a kernel test should
// confirm it against a dense GEMM).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/huge_pages.hpp"
#include "shrink/cpu/nm_pack.hpp"
#include "shrink/prune/mask.hpp"
#include "shrink/prune/nm.hpp"
#include "shrink/sparse/csr.hpp"

namespace shrink::sparse {

template <class T>
struct NmCompressed {
  std::int64_t rows = 0;
  std::int64_t cols = 0;  // dense columns, a multiple of pattern.m
  prune::NmPattern pattern{2, 4};
  std::vector<T> values;                // [rows, cols / m * n], see the file comment
  std::vector<std::uint8_t> positions;  // same layout: position of each value within its group
  std::vector<std::uint32_t> metadata;  // mma.sp words (2:4 with 16-bit or 8-bit T), else empty

  std::int64_t kept_per_row() const { return cols / pattern.m * pattern.n; }
};

// Where the metadata of a [rows, cols] A lives: tile sizes, padding, and each group's word and bit shift.
struct MmaSpMetadataLayout {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  int tile_k = 32;  // 32 for 16-bit values (m16n8k32), 64 for 8-bit values (m16n8k64)

  static constexpr int kTileRows = 16;
  static constexpr std::uint32_t kPaddingNibble = 0x4;  // positions {0, 1}

  std::int64_t padded_rows() const { return (rows + kTileRows - 1) / kTileRows * kTileRows; }
  std::int64_t padded_cols() const { return (cols + tile_k - 1) / tile_k * tile_k; }
  std::int64_t words_per_tile() const { return kTileRows * tile_k / 32; }  // 32 elements a word
  std::int64_t word_count() const { return padded_rows() * padded_cols() / 32; }
  // The word holding the group that starts at (row, column); column is a multiple of 4.
  std::int64_t word_index(std::int64_t row, std::int64_t column) const {
    const std::int64_t tile = row / kTileRows * (padded_cols() / tile_k) + column / tile_k;
    return tile * words_per_tile() + (row % 8) * (tile_k / 16) + (column % tile_k) / 16;
  }
  // Shift of that group's nibble within its word.
  int bit_shift(std::int64_t row, std::int64_t column) const {
    return static_cast<int>((row % kTileRows) / 8 * 16 + (column % 16) / 4 * 4);
  }
};

// Element types whose 2:4 compression carries mma.sp metadata: 16-bit (tile_k 32) and 8-bit (tile_k 64) values.
template <class T>
constexpr bool has_mma_sp_metadata(prune::NmPattern pattern) {
  return pattern.n == 2 && pattern.m == 4 && (sizeof(T) == 2 || sizeof(T) == 1);
}

template <class T>
MmaSpMetadataLayout mma_sp_metadata_layout(std::int64_t rows, std::int64_t cols) {
  static_assert(sizeof(T) == 2 || sizeof(T) == 1, "mma.sp metadata exists for 16-bit and 8-bit values");
  return MmaSpMetadataLayout{rows, cols, sizeof(T) == 2 ? 32 : 64};
}

// The 4 bits of a 2:4 group keeping positions first < second.
constexpr std::uint32_t encode_2of4(int first, int second) {
  return static_cast<std::uint32_t>(first) | static_cast<std::uint32_t>(second) << 2;
}

// The two positions of a nibble: {nibble & 3, nibble >> 2}.
struct PositionPair {
  int first;
  int second;
};
constexpr PositionPair decode_2of4(std::uint32_t nibble) {
  return PositionPair{static_cast<int>(nibble & 3u), static_cast<int>((nibble >> 2) & 3u)};
}

// The nibble of the group starting at (row, column) in a metadata array laid out by `layout`.
inline std::uint32_t metadata_nibble(const std::vector<std::uint32_t>& metadata, const MmaSpMetadataLayout& layout,
                                     std::int64_t row, std::int64_t column) {
  return (metadata[static_cast<std::size_t>(layout.word_index(row, column))] >> layout.bit_shift(row, column)) & 0xFu;
}

namespace detail {

template <class T>
void require_nm_source(const TensorView<const T>& dense, prune::NmPattern pattern, const char* function) {
  prune::require_nm_pattern(pattern, function);
  require_host_view(dense, function, "dense");
  if (dense.rank() != 2) fail(function, "dense.shape", to_string(dense.shape()), "a 2-D tensor [rows, cols]");
  require_nonempty(dense, function, "dense");
  if (dense.size(1) % pattern.m != 0)
    fail(function, "dense.shape", to_string(dense.shape()),
         "a column count divisible by m = " + std::to_string(pattern.m));
}

// Sizes, positions and, when present, metadata that agrees with them: a struct that may come from a file.
template <class T>
void validate_nm(const NmCompressed<T>& c, const char* function) {
  prune::require_nm_pattern(c.pattern, function);
  if (c.rows < 0) fail(function, "compressed.rows", c.rows, "a count >= 0");
  if (c.cols < 0 || c.cols % c.pattern.m != 0)
    fail(function, "compressed.cols", c.cols, "a count >= 0 divisible by m = " + std::to_string(c.pattern.m));
  const std::int64_t count = c.rows * c.kept_per_row();
  if (static_cast<std::int64_t>(c.values.size()) != count)
    fail(function, "compressed.values.size()", c.values.size(), "rows * cols / m * n = " + std::to_string(count));
  if (static_cast<std::int64_t>(c.positions.size()) != count)
    fail(function, "compressed.positions.size()", c.positions.size(), "rows * cols / m * n = " + std::to_string(count));
  const int n = c.pattern.n;
  for (std::int64_t g = 0; g < count / n; ++g)
    for (int k = 0; k < n; ++k) {
      const int p = c.positions[static_cast<std::size_t>(g * n + k)];
      const int lowest = k == 0 ? 0 : c.positions[static_cast<std::size_t>(g * n + k - 1)] + 1;
      if (p < lowest || p >= c.pattern.m)
        fail(function, ("compressed.positions[" + std::to_string(g * n + k) + "]").c_str(), p,
             "a position in [" + std::to_string(lowest) + ", " + std::to_string(c.pattern.m) +
                 ") (in range, strictly increasing within a group)");
    }
  if constexpr (sizeof(T) == 2 || sizeof(T) == 1) {
    if (has_mma_sp_metadata<T>(c.pattern)) {
      const MmaSpMetadataLayout layout = mma_sp_metadata_layout<T>(c.rows, c.cols);
      if (static_cast<std::int64_t>(c.metadata.size()) != layout.word_count())
        fail(function, "compressed.metadata.size()", c.metadata.size(),
             std::to_string(layout.word_count()) + " words for " + std::to_string(c.rows) + " x " +
                 std::to_string(c.cols) + " padded to " + std::to_string(layout.padded_rows()) + " x " +
                 std::to_string(layout.padded_cols()));
      for (std::int64_t r = 0; r < c.rows; ++r)
        for (std::int64_t col = 0; col < c.cols; col += 4) {
          const std::int64_t g = r * (c.cols / 4) + col / 4;
          const std::uint32_t nibble = metadata_nibble(c.metadata, layout, r, col);
          if (nibble != encode_2of4(c.positions[static_cast<std::size_t>(2 * g)],
                                    c.positions[static_cast<std::size_t>(2 * g + 1)]))
            fail(function, ("compressed.metadata[" + std::to_string(layout.word_index(r, col)) + "]").c_str(), nibble,
                 "the nibble of positions " + std::to_string(c.positions[static_cast<std::size_t>(2 * g)]) + ", " +
                     std::to_string(c.positions[static_cast<std::size_t>(2 * g + 1)]) + " (row " + std::to_string(r) +
                     ", column " + std::to_string(col) + ")");
        }
      return;
    }
  }
  if (!c.metadata.empty())
    fail(function, "compressed.metadata.size()", c.metadata.size(), "0 (metadata exists for 2:4 with 8/16-bit values)");
}

// The mma.sp metadata of a 2:4 mask whose groups all keep at most 2, read 16 columns (one half word) at a time.
inline void write_2of4_metadata(const std::uint64_t* words, const MmaSpMetadataLayout& layout,
                                std::vector<std::uint32_t>& metadata) {
  const cpu::TwoGroupTables& tables = cpu::two_group_tables();
  const cpu::Fill2of4* fill = cpu::fill_2of4_table();
  const std::int64_t tiles_per_row = layout.padded_cols() / layout.tile_k;
  const std::int64_t spans_per_tile = layout.tile_k / 16;
  for (std::int64_t r = 0; r < layout.rows; ++r) {
    // word_index(r, c) = row_base + (c / tile_k) * words_per_tile + (c % tile_k) / 16
    const std::int64_t row_base =
        r / MmaSpMetadataLayout::kTileRows * tiles_per_row * layout.words_per_tile() + (r % 8) * spans_per_tile;
    const int shift = layout.bit_shift(r, 0);
    for (std::int64_t c = 0; c < layout.cols; c += 16) {
      const std::int64_t flat = r * layout.cols + c;
      std::uint64_t bits = words[flat >> 6] >> (flat & 63);
      if ((flat & 63) > 48 && ((flat + 15) >> 6) != (flat >> 6) && c + 16 <= layout.cols)
        bits |= words[(flat >> 6) + 1] << (64 - (flat & 63));
      std::uint32_t half_word;
      if (c + 16 <= layout.cols) {
        half_word = tables.metadata[bits & 0xFFu] | static_cast<std::uint32_t>(tables.metadata[(bits >> 8) & 0xFFu])
                                                        << 8;
      } else {  // a row's last, partial span: its groups past cols keep the padding nibble
        half_word = 0x4444u;
        for (std::int64_t g = 0; g < (layout.cols - c) / 4; ++g) {
          const std::int64_t at = flat + 4 * g;
          const cpu::Fill2of4 f = fill[(words[at >> 6] >> (at & 63)) & 0xFu];
          half_word = (half_word & ~(0xFu << (4 * g))) | encode_2of4(f.first, f.second) << (4 * g);
        }
      }
      const std::int64_t tile_span = c / 16;
      std::uint32_t& word = metadata[static_cast<std::size_t>(
          row_base + tile_span / spans_per_tile * layout.words_per_tile() + tile_span % spans_per_tile)];
      word = (word & ~(0xFFFFu << shift)) | half_word << shift;
    }
  }
}

}  // namespace detail

// Compresses dense (2-D, any strides) under an N:M mask of its shape. Errors: invalid pattern, empty tensor, cols
// not divisible by m, a mask of another shape, a group keeping more than n (named by row and column), NaN/inf.
template <class T>
NmCompressed<std::remove_const_t<T>> compress_nm(const TensorView<T>& dense, const prune::Mask& mask,
                                                 prune::NmPattern pattern) {
  using Value = std::remove_const_t<T>;
  const char* fn = "shrink::sparse::compress_nm";
  const TensorView<const Value> view = dense;
  detail::require_nm_source(view, pattern, fn);
  if (mask.shape() != view.shape())
    fail(fn, "mask.shape", to_string(mask.shape()), "the shape of dense, " + to_string(view.shape()));

  NmCompressed<Value> out;
  out.rows = view.size(0);
  out.cols = view.size(1);
  out.pattern = pattern;
  const int n = pattern.n, m = pattern.m;
  const std::int64_t groups_per_row = out.cols / m;
  cpu::resize_on_huge_pages(out.values, static_cast<std::size_t>(out.rows * groups_per_row * n));
  cpu::resize_on_huge_pages(out.positions, out.values.size());
  const std::uint64_t* words = mask.words().data();
  const std::int64_t col_stride = view.stride(1);
  bool finite = true;
  auto fail_group = [&](std::int64_t r, std::int64_t start, int kept) {
    fail(fn, "mask",
         std::to_string(kept) + " kept in the group at row " + std::to_string(r) + ", columns " +
             std::to_string(start) + ".." + std::to_string(start + m - 1),
         "at most n = " + std::to_string(n) + " kept in every group of m = " + std::to_string(m) + " (an N:M mask)");
  };

  bool compressed = false;
  if (n == 2 && m == 4 && view.is_contiguous()) {
    // Groups never straddle 64-element mask words (cols % 4 == 0), so the tensor is one run of whole words + a tail.
    const std::int64_t whole_words = view.numel() / 64;
    compressed =
        cpu::compress_2of4_words(view.data(), words, whole_words, out.values.data(), out.positions.data(), finite);
    if (compressed) {
      const cpu::Fill2of4* table = cpu::fill_2of4_table();
      for (std::int64_t flat = whole_words * 64; flat < view.numel(); flat += 4) {
        const cpu::Fill2of4 fill = table[(words[flat >> 6] >> (flat & 63)) & 0xFu];
        if (!fill.valid) {
          compressed = false;  // the loop below names the group
          break;
        }
        const auto kept = static_cast<unsigned>((words[flat >> 6] >> (flat & 63)) & 0xFu);
        out.values[static_cast<std::size_t>(flat / 2)] =
            (kept >> fill.first) & 1u ? view.data()[flat + fill.first] : Value{};
        out.values[static_cast<std::size_t>(flat / 2 + 1)] =
            (kept >> fill.second) & 1u ? view.data()[flat + fill.second] : Value{};
        out.positions[static_cast<std::size_t>(flat / 2)] = fill.first;
        out.positions[static_cast<std::size_t>(flat / 2 + 1)] = fill.second;
      }
      const std::int64_t tail = view.numel() - whole_words * 64;
      finite = finite && detail::row_is_finite(view.data() + whole_words * 64, tail, 1);
    }
  }
  if (compressed) {
  } else if (n == 2 && m == 4) {  // nibble lookup: one table entry a group
    const cpu::Fill2of4* table = cpu::fill_2of4_table();
    for (std::int64_t r = 0; r < out.rows; ++r) {
      const Value* row = view.data() + r * view.stride(0);
      if constexpr (detail::is_float_like<Value>()) finite &= detail::row_is_finite(row, out.cols, col_stride);
      Value* values = out.values.data() + r * groups_per_row * 2;
      std::uint8_t* positions = out.positions.data() + r * groups_per_row * 2;
      for (std::int64_t g = 0; g < groups_per_row; ++g) {
        const std::int64_t flat = r * out.cols + g * 4;  // a multiple of 4: the nibble never straddles words
        const auto kept = static_cast<unsigned>((words[flat >> 6] >> (flat & 63)) & 0xFu);
        const cpu::Fill2of4 fill = table[kept];
        if (!fill.valid) fail_group(r, g * 4, __builtin_popcount(kept));
        const Value a = row[(g * 4 + fill.first) * col_stride];
        const Value b = row[(g * 4 + fill.second) * col_stride];
        values[2 * g] = (kept >> fill.first) & 1u ? a : Value{};
        values[2 * g + 1] = (kept >> fill.second) & 1u ? b : Value{};
        positions[2 * g] = fill.first;
        positions[2 * g + 1] = fill.second;
      }
    }
  } else {
    for (std::int64_t r = 0; r < out.rows; ++r) {
      const Value* row = view.data() + r * view.stride(0);
      if constexpr (detail::is_float_like<Value>()) finite &= detail::row_is_finite(row, out.cols, col_stride);
      for (std::int64_t g = 0; g < groups_per_row; ++g) {
        int kept = 0;
        for (int j = 0; j < m; ++j) kept += mask.kept(r * out.cols + g * m + j);
        if (kept > n) fail_group(r, g * m, kept);
        int spare = n - kept;  // filled by the lowest unused positions
        std::size_t slot = static_cast<std::size_t>((r * groups_per_row + g) * n);
        for (int j = 0; j < m && slot < static_cast<std::size_t>((r * groups_per_row + g + 1) * n); ++j) {
          const bool keep = mask.kept(r * out.cols + g * m + j);
          if (!keep && spare == 0) continue;
          if (!keep) --spare;
          const Value v = row[(g * m + j) * col_stride];
          out.values[slot] = keep ? v : Value{};
          out.positions[slot] = static_cast<std::uint8_t>(j);
          ++slot;
        }
      }
    }
  }
  if (!finite) {  // name the first non-finite element
    for (std::int64_t r = 0; r < out.rows; ++r)
      for (std::int64_t c = 0; c < out.cols; ++c)
        if (!detail::is_finite_value(view(r, c))) detail::fail_nonfinite(view, r, c, fn);
  }

  if constexpr (sizeof(Value) == 2 || sizeof(Value) == 1) {
    if (has_mma_sp_metadata<Value>(pattern)) {
      const MmaSpMetadataLayout layout = mma_sp_metadata_layout<Value>(out.rows, out.cols);
      out.metadata.assign(static_cast<std::size_t>(layout.word_count()), 0x44444444u);  // padding nibbles
      detail::write_2of4_metadata(words, layout, out.metadata);
    }
  }
  return out;
}

// Compresses under nm_mask(dense, pattern): the n largest |values| of each group (float, half, bfloat16, int8).
template <class T>
NmCompressed<std::remove_const_t<T>> compress_nm(const TensorView<T>& dense, prune::NmPattern pattern) {
  using Value = std::remove_const_t<T>;
  const TensorView<const Value> view = dense;
  detail::require_nm_source(view, pattern, "shrink::sparse::compress_nm");
  return compress_nm(view, prune::nm_mask(view, pattern), pattern);
}

// Writes the dense [rows, cols] tensor into out (any strides). For 2:4 with metadata the positions are read from the
// metadata words (and must agree with `positions`); the struct and out's shape are checked before anything is written.
template <class T>
void decompress_nm_into(const NmCompressed<T>& compressed, const TensorView<T>& out) {
  const char* fn = "shrink::sparse::decompress_nm_into";
  detail::validate_nm(compressed, fn);
  require_host_view(out, fn, "out");
  if (out.shape() != Shape{compressed.rows, compressed.cols})
    fail(fn, "out.shape", to_string(out.shape()),
         "the compressed shape " + to_string(Shape{compressed.rows, compressed.cols}));
  const int n = compressed.pattern.n, m = compressed.pattern.m;
  const std::int64_t groups_per_row = compressed.cols / m;
  bool from_metadata = false;
  MmaSpMetadataLayout layout;
  if constexpr (sizeof(T) == 2 || sizeof(T) == 1) {
    from_metadata = has_mma_sp_metadata<T>(compressed.pattern);
    if (from_metadata) layout = mma_sp_metadata_layout<T>(compressed.rows, compressed.cols);
  }
  for (std::int64_t r = 0; r < compressed.rows; ++r) {
    T* row = out.data() + r * out.stride(0);
    for (std::int64_t c = 0; c < compressed.cols; ++c) row[c * out.stride(1)] = T{};
    for (std::int64_t g = 0; g < groups_per_row; ++g) {
      const std::size_t at = static_cast<std::size_t>((r * groups_per_row + g) * n);
      if (from_metadata) {
        const PositionPair p = decode_2of4(metadata_nibble(compressed.metadata, layout, r, g * 4));
        row[(g * 4 + p.first) * out.stride(1)] = compressed.values[at];
        row[(g * 4 + p.second) * out.stride(1)] = compressed.values[at + 1];
        continue;
      }
      for (int k = 0; k < n; ++k)
        row[(g * m + compressed.positions[at + static_cast<std::size_t>(k)]) * out.stride(1)] =
            compressed.values[at + static_cast<std::size_t>(k)];
    }
  }
}

// The dense tensor, row-major [rows, cols], after the same checks.
template <class T>
std::vector<T> decompress_nm(const NmCompressed<T>& compressed) {
  detail::validate_nm(compressed, "shrink::sparse::decompress_nm");
  std::vector<T> dense(static_cast<std::size_t>(compressed.rows * compressed.cols), T{});
  decompress_nm_into(compressed, TensorView<T>(dense.data(), Shape{compressed.rows, compressed.cols}));
  return dense;
}

}  // namespace shrink::sparse
