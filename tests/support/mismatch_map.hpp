// Where a device result differs from its reference, said once per check: how many elements differ, the first of them
// with both values, and counts by position (row mod 16, column mod 16, CTA tile, k step), so that one failing run on a
// lent GPU shows a wrong fragment, tile or pipeline mapping by its pattern.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/element_types.hpp"

namespace shrink::test {

class MismatchMap {
 public:
  // A rows x cols result computed in tiles of tile_rows x tile_cols (a CTA's output tile; 1 x cols for a flat one).
  MismatchMap(std::int64_t rows, std::int64_t cols, std::int64_t tile_rows = 64, std::int64_t tile_cols = 64)
      : rows_(rows),
        cols_(cols),
        tile_rows_(tile_rows > 0 ? tile_rows : 1),
        tile_cols_(tile_cols > 0 ? tile_cols : 1) {}

  // One differing element; k_step >= 0 when the check knows which step of the reduction the difference came from
  // (a one-hot-k input).
  void add(std::int64_t row, std::int64_t col, double got, double want, std::int64_t k_step = -1) {
    if (first_.size() < kFirst) first_.push_back(Entry{row, col, got, want, k_step});
    ++count_;
    ++by_row_mod_[row % 16];
    ++by_col_mod_[col % 16];
    ++by_tile_[{row / tile_rows_, col / tile_cols_}];
    if (k_step >= 0) ++by_k_step_[k_step];
  }

  std::size_t count() const { return count_; }

  std::string report() const {
    std::ostringstream out;
    out << count_ << " of " << rows_ * cols_ << " elements differ (" << rows_ << " x " << cols_ << ", tiles "
        << tile_rows_ << " x " << tile_cols_ << "); first:";
    for (const Entry& e : first_) {
      out << "\n  (" << e.row << ", " << e.col << ")";
      if (e.k_step >= 0) out << " k step " << e.k_step;
      out << ": got " << e.got << ", want " << e.want;
    }
    out << "\n  by row % 16:    " << histogram(by_row_mod_, 16);
    out << "\n  by column % 16: " << histogram(by_col_mod_, 16);
    out << "\n  by tile (row tile, column tile):";
    int shown = 0;
    for (const auto& [tile, n] : by_tile_) {
      if (shown++ == 24) {
        out << " ... (" << by_tile_.size() << " tiles)";
        break;
      }
      out << " (" << tile.first << "," << tile.second << "):" << n;
    }
    out << " of " << (rows_ + tile_rows_ - 1) / tile_rows_ << " x " << (cols_ + tile_cols_ - 1) / tile_cols_;
    if (!by_k_step_.empty()) {
      out << "\n  by k step:";
      for (const auto& [k, n] : by_k_step_) out << " " << k << ":" << n;
    }
    return out.str();
  }

 private:
  struct Entry {
    std::int64_t row, col;
    double got, want;
    std::int64_t k_step;
  };
  static constexpr std::size_t kFirst = 8;

  static std::string histogram(const std::map<std::int64_t, std::int64_t>& counts, int buckets) {
    std::ostringstream out;
    for (int b = 0; b < buckets; ++b) {
      const auto it = counts.find(b);
      out << (b ? " " : "") << (it == counts.end() ? 0 : it->second);
    }
    return out.str();
  }

  std::int64_t rows_, cols_, tile_rows_, tile_cols_;
  std::size_t count_ = 0;
  std::vector<Entry> first_;
  std::map<std::int64_t, std::int64_t> by_row_mod_, by_col_mod_, by_k_step_;
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> by_tile_;
};

// The report of a map with differences, or "" when it has none.
inline std::string mismatch_report(const MismatchMap& map) { return map.count() == 0 ? std::string() : map.report(); }

// "" when got and want have equal sizes and equal bits (as same_bits), else the map of the differing elements, read as
// a rows x cols result (cols 0: one flat row) computed in tiles of tile_rows x tile_cols.
template <class T>
std::string bits_mismatch_report(const std::vector<T>& got, const std::vector<T>& want, std::int64_t cols = 0,
                                 std::int64_t tile_rows = 64, std::int64_t tile_cols = 64) {
  if (got.size() != want.size())
    return "got " + std::to_string(got.size()) + " elements, want " + std::to_string(want.size());
  const bool flat = cols <= 0;
  if (flat) cols = static_cast<std::int64_t>(got.size());
  MismatchMap map(cols > 0 ? static_cast<std::int64_t>(got.size()) / cols : 0, cols, flat ? 1 : tile_rows,
                  flat ? 256 : tile_cols);
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      map.add(static_cast<std::int64_t>(i) / cols, static_cast<std::int64_t>(i) % cols, to_float(got[i]),
              to_float(want[i]));
  return mismatch_report(map);
}

}  // namespace shrink::test

// One check for a whole result, failing once with the map (and the caller's line) instead of once per element.
#define CHECK_NO_MISMATCHES(map)                                               \
  do {                                                                         \
    const std::string shrink_mismatches_ = shrink::test::mismatch_report(map); \
    INFO(shrink_mismatches_);                                                  \
    CHECK(shrink_mismatches_.empty());                                         \
  } while (false)

// CHECK(same_bits(got, want)) that says where the bits differ; the optional arguments are bits_mismatch_report's.
#define CHECK_SAME_BITS(...)                                                                \
  do {                                                                                      \
    const std::string shrink_mismatches_ = shrink::test::bits_mismatch_report(__VA_ARGS__); \
    INFO(shrink_mismatches_);                                                               \
    CHECK(shrink_mismatches_.empty());                                                      \
  } while (false)
