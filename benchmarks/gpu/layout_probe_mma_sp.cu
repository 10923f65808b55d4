// The layout probe's mma.sp part: one warp of mma.sp m16n8k64 s8 and m16n8k32 f16 (the 2:4 kernel's wrappers,
// shrink/cuda/kernels/linear_nm.cuh) asked, with one-hot inputs, where each A fragment byte and each metadata nibble
// goes; then one k-step through the kernel's own path (ldmatrix lane roles, swizzle, metadata_register) on random
// 2:4 data, for each int8 metadata mapping, against a product on the host.
//
// B is "identity-like": B[k][c] = k / 8 + 1 when c == k % 8, else 0, so a lone product a · B[k][·] lands in column
// k % 8 with the value k / 8 + 1: position and value give k back. Metadata 0x4 everywhere (positions {0, 1}) is the
// base; one nibble set to 0xE (positions {2, 3}) moves its group's two values from k = 4j, 4j + 1 to 4j + 2, 4j + 3,
// which changes one row of D by a pattern that names j.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpu/layout_probe.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/linear_nm.cuh"

namespace shrink_probe {
namespace {

namespace nm = shrink::cuda::kernels::linear_nm;
using nm::Int8Metadata;
using shrink::half;

constexpr std::uint32_t kBaseMetadata = 0x44444444u;  // every group keeps positions {0, 1}

// ---------------------------------------------------------------------------------------------------------------
// Device side

// Run r: d[r] = A[r] · B with metadata e[r]; registers as given, per lane.
template <class T>
__global__ void mma_sp_runs(const std::uint32_t* a, const std::uint32_t* b, const std::uint32_t* e, int runs,
                            typename nm::Operand<T>::Accumulator* d) {
  const int lane = static_cast<int>(threadIdx.x);
  std::uint32_t breg[4];
  for (int r = 0; r < 4; ++r) breg[r] = b[lane * 4 + r];
  for (int run = 0; run < runs; ++run) {
    std::uint32_t areg[4];
    for (int r = 0; r < 4; ++r) areg[r] = a[(run * 32 + lane) * 4 + r];
    typename nm::Operand<T>::Accumulator acc[4] = {};
    nm::mma_sp(acc, areg, breg, e[run * 32 + lane], T{});
    for (int r = 0; r < 4; ++r) d[(run * 32 + lane) * 4 + r] = acc[r];
  }
}

// One k-step (h = 0) of gemm_sparse24_kernel for a 16-row tile of W and 8 rows of X, through the kernel's stage
// layout, ldmatrix lane roles, metadata_register and accumulator placement. values: [16][32 bytes] compressed W;
// x: [8][64 bytes]; words: the step's stored metadata. y[w_row * 8 + x_row].
template <class T>
__global__ void kernel_path(const unsigned char* values, const unsigned char* x, const std::uint32_t* words,
                            Int8Metadata mapping, typename nm::Operand<T>::Accumulator* y) {
  __shared__ __align__(128) unsigned char w_stage[16 * 64];
  __shared__ __align__(128) unsigned char x_stage[8 * 128];
  __shared__ std::uint32_t step_words[32];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < 16 * 64; i += 32) {  // chunks 2, 3 (the next k-step) hold junk: they must not be read
    const int row = i / 64, chunk = i % 64 / 16, byte = i % 16;
    w_stage[nm::w_chunk_offset(row, chunk) + byte] = chunk < 2 ? values[row * 32 + chunk * 16 + byte] : 0x5A;
  }
  for (int i = lane; i < 8 * 128; i += 32) {
    const int row = i / 128, chunk = i % 128 / 16, byte = i % 16;
    x_stage[nm::x_chunk_offset(row, chunk) + byte] = chunk < 4 ? x[row * 64 + chunk * 16 + byte] : 0x5A;
  }
  step_words[lane] = lane < nm::Operand<T>::kMetadataWords ? words[lane] : 0u;
  __syncwarp();
  std::uint32_t a[4], b[4];
  nm::load_matrices_x4(a, nm::shared_address(w_stage) + static_cast<std::uint32_t>(nm::w_chunk_offset(
                                                            nm::a_lane_row(lane), nm::a_lane_chunk(0, lane))));
  nm::load_matrices_x4(b, nm::shared_address(x_stage) + static_cast<std::uint32_t>(nm::x_chunk_offset(
                                                            nm::b_lane_row(lane), nm::b_lane_chunk(0, lane))));
  const std::uint32_t e = nm::Operand<T>::metadata_register(step_words, lane, mapping);
  typename nm::Operand<T>::Accumulator acc[4] = {};
  nm::mma_sp(acc, a, b, e, T{});
  for (int r = 0; r < 4; ++r) y[nm::accumulator_w_row(lane, r) * 8 + nm::accumulator_x_row(lane, r)] = acc[r];
}

// ---------------------------------------------------------------------------------------------------------------
// Host side: per value type, how registers pack elements (PTX ISA, sparse m16n8k32 16-bit / m16n8k64 8-bit).

template <class T>
struct Shape;
template <>
struct Shape<std::int8_t> {
  static constexpr int kK = 64, kPerRegister = 4, kGroups = 16;
  static const char* name() { return "mma.sp m16n8k64 s8"; }
  static std::uint32_t element_bits(int v) { return static_cast<std::uint8_t>(static_cast<std::int8_t>(v)); }
  static int element_value(std::uint32_t bits) { return static_cast<std::int8_t>(bits & 0xFFu); }
};
template <>
struct Shape<half> {
  static constexpr int kK = 32, kPerRegister = 2, kGroups = 8;
  static const char* name() { return "mma.sp m16n8k32 f16"; }
  static std::uint32_t element_bits(int v) { return half(static_cast<float>(v)).to_bits(); }
  static int element_value(std::uint32_t bits) {
    return static_cast<int>(static_cast<float>(half::from_bits(static_cast<std::uint16_t>(bits))));
  }
};

// Assumed fragments (the header comment of shrink/cuda/kernels/linear_nm_layout.hpp, from the PTX ISA), lane 4g + t:
// A register r, element v: row g + 8 (r & 1), compressed column (kK / 4) (r / 2) + kPerRegister t + v.
// B register r, element v: dense row (kK / 4) r + kPerRegister t + v, column g.
template <class T>
int a_row(int lane, int r) {
  return lane / 4 + 8 * (r & 1);
}
template <class T>
int a_column(int lane, int r, int v) {
  return Shape<T>::kK / 4 * (r / 2) + Shape<T>::kPerRegister * (lane % 4) + v;
}
template <class T>
int b_row(int lane, int r, int v) {
  return Shape<T>::kK / 4 * r + Shape<T>::kPerRegister * (lane % 4) + v;
}

int identity_like_b(int k, int c) { return c == k % 8 ? k / 8 + 1 : 0; }

template <class T>
std::vector<std::uint32_t> b_registers() {
  std::vector<std::uint32_t> b(32 * 4, 0u);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int v = 0; v < Shape<T>::kPerRegister; ++v)
        b[static_cast<std::size_t>(lane * 4 + r)] |=
            Shape<T>::element_bits(identity_like_b(b_row<T>(lane, r, v), lane / 4))
            << (32 / Shape<T>::kPerRegister * v);
  return b;
}

// D of a run as a 16 x 8 matrix of integers, placed by the kernel's accumulator functions; false if not integral.
template <class Acc>
bool d_matrix(const Acc* d, int (&out)[16][8]) {
  bool integral = true;
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      const double v = static_cast<double>(d[lane * 4 + r]);
      integral = integral && std::nearbyint(v) == v;
      out[nm::accumulator_w_row(lane, r)][nm::accumulator_x_row(lane, r)] = static_cast<int>(v);
    }
  return integral;
}

// The stored metadata of one k-step (sparse/nm_compressed.hpp): group j of row r is nibble 4 (j % 4) + 16 (r / 8)
// of word (r % 8) · (kK / 16) + j / 4.
template <class T>
void store_nibble(std::vector<std::uint32_t>& words, int row, int group, std::uint32_t nibble) {
  words[static_cast<std::size_t>(row % 8 * (Shape<T>::kK / 16) + group / 4)] |= nibble
                                                                                << (16 * (row / 8) + 4 * (group % 4));
}

// The (row, group) one probe run's metadata change moved, from D minus the base run's D: {-1, -1} when nothing
// changed, {-2, -2} when the change fits no single group.
template <class T>
nm::MetadataGroup decode_moved_group(const int (&d)[16][8], const int (&base)[16][8]) {
  nm::MetadataGroup found{-1, -1};
  for (int i = 0; i < 16; ++i) {
    bool changed = false;
    for (int c = 0; c < 8; ++c) changed = changed || d[i][c] != base[i][c];
    if (!changed) continue;
    if (found.row != -1) return {-2, -2};
    found = {-2, -2};
    for (int j = 0; j < Shape<T>::kGroups; ++j) {
      bool fits = true;
      for (int c = 0; c < 8; ++c)
        fits = fits && d[i][c] - base[i][c] == identity_like_b(4 * j + 2, c) + identity_like_b(4 * j + 3, c) -
                                                   identity_like_b(4 * j, c) - identity_like_b(4 * j + 1, c);
      if (fits) found = {i, j};
    }
    if (found.row == -2) return found;
  }
  return found;
}

std::string group_text(nm::MetadataGroup g) {
  if (g.row == -1) return "none";
  if (g.row == -2) return "?";
  return text("%d.%d", g.row, g.group);
}

// The 16-bit mapping (selector 0): lanes t < 2 as word_per_lane, the others ignored.
nm::MetadataGroup assumed_16bit_group(int lane, int nibble) {
  if (lane % 4 >= 2) return {-1, -1};
  return nm::int8_metadata_group(Int8Metadata::word_per_lane, lane, nibble);
}

// One k-step of the kernel's path on random 2:4 data, each output checked into `row` against the product on the
// host; kError when a CUDA call failed.
template <class T>
int check_kernel_path(Int8Metadata mapping, std::mt19937& rng, Comparison& row) {
  using Acc = typename nm::Operand<T>::Accumulator;
  constexpr int kK = Shape<T>::kK, kBytes = static_cast<int>(sizeof(T));
  std::uniform_int_distribution<int> value(-7, 7), pair(0, 5);
  static constexpr int kPairs[6][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}};
  std::vector<int> w(16 * kK, 0), x(8 * kK);
  std::vector<unsigned char> values(16 * 32), x_bytes(8 * 64);
  std::vector<std::uint32_t> words(static_cast<std::size_t>(nm::Operand<T>::kMetadataWords), 0u);
  for (int r = 0; r < 16; ++r)
    for (int j = 0; j < kK / 4; ++j) {
      const int* p = kPairs[pair(rng)];
      store_nibble<T>(words, r, j, static_cast<std::uint32_t>(p[0] | p[1] << 2));
      for (int s = 0; s < 2; ++s) {
        const int v = value(rng);
        w[static_cast<std::size_t>(r * kK + 4 * j + p[s])] = v;
        const std::uint32_t bits = Shape<T>::element_bits(v);
        std::memcpy(&values[static_cast<std::size_t>(r * 32 + (2 * j + s) * kBytes)], &bits, sizeof(T));
      }
    }
  for (int i = 0; i < 8 * kK; ++i) {
    x[static_cast<std::size_t>(i)] = value(rng);
    const std::uint32_t bits = Shape<T>::element_bits(x[static_cast<std::size_t>(i)]);
    std::memcpy(&x_bytes[static_cast<std::size_t>(i * kBytes)], &bits, sizeof(T));
  }
  unsigned char *values_dev = nullptr, *x_dev = nullptr;
  std::uint32_t* words_dev = nullptr;
  Acc* y_dev = nullptr;
  PROBE_CHECK(cudaMalloc(&values_dev, values.size()));
  PROBE_CHECK(cudaMalloc(&x_dev, x_bytes.size()));
  PROBE_CHECK(cudaMalloc(&words_dev, words.size() * 4));
  PROBE_CHECK(cudaMalloc(&y_dev, 128 * sizeof(Acc)));
  PROBE_CHECK(cudaMemcpy(values_dev, values.data(), values.size(), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(x_dev, x_bytes.data(), x_bytes.size(), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(words_dev, words.data(), words.size() * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(y_dev, 0xFF, 128 * sizeof(Acc)));  // poisoned: an unwritten output shows
  kernel_path<T><<<1, 32>>>(values_dev, x_dev, words_dev, mapping, y_dev);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<Acc> y(128);
  PROBE_CHECK(cudaMemcpy(y.data(), y_dev, 128 * sizeof(Acc), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; ++i)
    for (int c = 0; c < 8; ++c) {
      long expected = 0;
      for (int k = 0; k < kK; ++k)
        expected +=
            static_cast<long>(w[static_cast<std::size_t>(i * kK + k)]) * x[static_cast<std::size_t>(c * kK + k)];
      const double got = static_cast<double>(y[static_cast<std::size_t>(i * 8 + c)]);
      row.check(got == static_cast<double>(expected),
                text("Y[w row %d][x row %d] = %.0f, expected %ld", i, c, got, expected));
    }
  PROBE_CHECK(cudaFree(values_dev));
  PROBE_CHECK(cudaFree(x_dev));
  PROBE_CHECK(cudaFree(words_dev));
  PROBE_CHECK(cudaFree(y_dev));
  return kMatch;
}

template <class T>
int probe_mma_sp(const Options& options) {
  using Acc = typename nm::Operand<T>::Accumulator;
  constexpr int kPer = Shape<T>::kPerRegister;
  constexpr int kNibbleRuns = 32 * 8, kFragmentRuns = 32 * 4 * kPer;
  constexpr int kRuns = 1 + kNibbleRuns + kFragmentRuns;  // base, one nibble each, one A element each
  const std::uint32_t one = Shape<T>::element_bits(1);
  std::uint32_t all_ones = 0;
  for (int v = 0; v < kPer; ++v) all_ones |= one << (32 / kPer * v);

  std::vector<std::uint32_t> a(static_cast<std::size_t>(kRuns) * 128, 0u),
      e(static_cast<std::size_t>(kRuns) * 32, kBaseMetadata);
  for (int run = 0; run < 1 + kNibbleRuns; ++run)
    for (int i = 0; i < 128; ++i) a[static_cast<std::size_t>(run * 128 + i)] = all_ones;
  for (int lane = 0; lane < 32; ++lane)
    for (int nibble = 0; nibble < 8; ++nibble) {
      std::uint32_t& word = e[static_cast<std::size_t>((1 + lane * 8 + nibble) * 32 + lane)];
      word = (word & ~(0xFu << (4 * nibble))) | 0xEu << (4 * nibble);
    }
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int v = 0; v < kPer; ++v) {
        const int run = 1 + kNibbleRuns + (lane * 4 + r) * kPer + v;
        a[static_cast<std::size_t>(run * 128 + lane * 4 + r)] = one << (32 / kPer * v);
      }
  const std::vector<std::uint32_t> b = b_registers<T>();

  std::uint32_t *a_dev = nullptr, *b_dev = nullptr, *e_dev = nullptr;
  Acc* d_dev = nullptr;
  PROBE_CHECK(cudaMalloc(&a_dev, a.size() * 4));
  PROBE_CHECK(cudaMalloc(&b_dev, b.size() * 4));
  PROBE_CHECK(cudaMalloc(&e_dev, e.size() * 4));
  PROBE_CHECK(cudaMalloc(&d_dev, a.size() * sizeof(Acc)));
  PROBE_CHECK(cudaMemcpy(a_dev, a.data(), a.size() * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(b_dev, b.data(), b.size() * 4, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(e_dev, e.data(), e.size() * 4, cudaMemcpyHostToDevice));
  mma_sp_runs<T><<<1, 32>>>(a_dev, b_dev, e_dev, kRuns, d_dev);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<Acc> d(a.size());
  PROBE_CHECK(cudaMemcpy(d.data(), d_dev, d.size() * sizeof(Acc), cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(a_dev));
  PROBE_CHECK(cudaFree(b_dev));
  PROBE_CHECK(cudaFree(e_dev));
  PROBE_CHECK(cudaFree(d_dev));

  int base[16][8];
  Comparison integral("D integral (exact products)", "every output an exact integer");
  integral.check(d_matrix(d.data(), base), "base run");

  // A fragment: the lone 1 at (lane, r, v) lands at (row i, column c) with value k / 8 + 1; metadata {0, 1} maps
  // compressed column 2j + s to k = 4j + s.
  Comparison fragment("A fragment (lane,reg,elem)", text("row g+8(r&1), col %d(r/2)+%dt+v", Shape<T>::kK / 4, kPer));
  std::vector<std::string> fragment_raw(32);
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r)
      for (int v = 0; v < kPer; ++v) {
        const int run = 1 + kNibbleRuns + (lane * 4 + r) * kPer + v;
        int m[16][8];
        integral.check(d_matrix(d.data() + run * 128, m), text("A run lane %d reg %d elem %d", lane, r, v));
        int found = 0, row = -1, column = -1;
        for (int i = 0; i < 16; ++i)
          for (int c = 0; c < 8; ++c)
            if (m[i][c] != 0) {
              ++found;
              const int k = 8 * (m[i][c] - 1) + c;
              row = i;
              column = k % 4 < 2 && k >= 0 ? 2 * (k / 4) + k % 4 : -1;
            }
        if (found != 1) row = column = -2;
        const int want_row = a_row<T>(lane, r), want_column = a_column<T>(lane, r, v);
        fragment.check(row == want_row && column == want_column,
                       text("lane %d reg %d elem %d: row %d col %d, assumed row %d col %d%s", lane, r, v, row, column,
                            want_row, want_column, found != 1 ? text(" (%d outputs set)", found).c_str() : ""));
        fragment_raw[static_cast<std::size_t>(lane)] += text(" %d.%d", row, column);
      }

  // Metadata: which (row, group) each (lane, nibble) moved.
  nm::MetadataGroup measured[32][8];
  for (int lane = 0; lane < 32; ++lane)
    for (int nibble = 0; nibble < 8; ++nibble) {
      int m[16][8];
      integral.check(d_matrix(d.data() + (1 + lane * 8 + nibble) * 128, m), text("nibble run %d.%d", lane, nibble));
      measured[lane][nibble] = decode_moved_group<T>(m, base);
    }
  auto compare = [&](Comparison& row, auto assumed) {
    for (int lane = 0; lane < 32; ++lane)
      for (int nibble = 0; nibble < 8; ++nibble) {
        const nm::MetadataGroup want = assumed(lane, nibble), got = measured[lane][nibble];
        row.check(want.row == got.row && want.group == got.group,
                  text("lane %d nibble %d: row.group %s, assumed %s", lane, nibble, group_text(got).c_str(),
                       group_text(want).c_str()));
      }
  };

  std::vector<Comparison> metadata, path;
  std::mt19937 rng(2024);
  if (std::is_same_v<T, std::int8_t>) {
    for (Int8Metadata mapping : {Int8Metadata::row_per_lane, Int8Metadata::word_per_lane}) {
      metadata.emplace_back(
          text("metadata nibble (lane,n)"),
          text("%s: %s", nm::to_string(mapping),
               mapping == Int8Metadata::row_per_lane ? "row q+8(t&1), group 8(t>>1)+n" : "row q+8(n/4), group 4t+n%4"));
      compare(metadata.back(), [&](int lane, int nibble) { return nm::int8_metadata_group(mapping, lane, nibble); });
      path.emplace_back("kernel path, one k-step",
                        text("metadata_register(%s), ldmatrix roles", nm::to_string(mapping)));
      if (check_kernel_path<T>(mapping, rng, path.back()) != kMatch) return kError;
    }
  } else {
    metadata.emplace_back("metadata nibble (lane,n)", "selector 0: t<2: row q+8(n/4), group 4t+n%4; t>=2 none");
    compare(metadata.back(), assumed_16bit_group);
    path.emplace_back("kernel path, one k-step", "metadata_register, ldmatrix roles");
    if (check_kernel_path<T>(Int8Metadata::row_per_lane, rng, path.back()) != kMatch) return kError;
  }

  print_table_header();
  integral.print();
  fragment.print();
  for (const Comparison& c : metadata) c.print();
  for (const Comparison& c : path) c.print();

  bool raw = options.verbose;
  for (const Comparison& c : metadata) raw = raw || !c.match();
  if (raw) {
    std::printf(
        "  raw metadata map, per lane: nibble 0..7 -> row.group it governs (none: ignored, ?: no single group)\n");
    for (int lane = 0; lane < 32; ++lane) {
      std::string line;
      for (int nibble = 0; nibble < 8; ++nibble) line += " " + group_text(measured[lane][nibble]);
      std::printf("    lane %2d:%s\n", lane, line.c_str());
    }
  }
  if (options.verbose || !fragment.match()) {
    std::printf("  raw A fragment map, per lane: (reg, elem) in order -> row.compressed column\n");
    for (int lane = 0; lane < 32; ++lane)
      std::printf("    lane %2d:%s\n", lane, fragment_raw[static_cast<std::size_t>(lane)].c_str());
  }

  std::vector<const Comparison*> required{&integral, &fragment};
  if (std::is_same_v<T, std::int8_t>) {
    // The run's verdict is for the mapping this environment selects; both are reported.
    const Int8Metadata selected = nm::int8_metadata_from_environment();
    const int index = selected == Int8Metadata::row_per_lane ? 0 : 1;
    std::string matching;
    for (int i = 0; i < 2; ++i)
      if (metadata[static_cast<std::size_t>(i)].match() && path[static_cast<std::size_t>(i)].match())
        matching += std::string(matching.empty() ? "" : ", ") +
                    nm::to_string(i == 0 ? Int8Metadata::row_per_lane : Int8Metadata::word_per_lane);
    std::printf("  int8 metadata: the hardware matches %s; this run selects %s (%s%s)\n",
                matching.empty() ? "neither mapping" : matching.c_str(), nm::to_string(selected),
                nm::kInt8MetadataVariable, std::getenv(nm::kInt8MetadataVariable) ? "" : " unset: the default");
    required.push_back(&metadata[static_cast<std::size_t>(index)]);
    required.push_back(&path[static_cast<std::size_t>(index)]);
  } else {
    required.push_back(&metadata[0]);
    required.push_back(&path[0]);
  }
  return result_of(required);
}

}  // namespace

int probe_mma_sp_s8(const Options& options) {
  std::printf("[mma_sp_s8] %s, one warp: A fragment, metadata nibbles, the 2:4 kernel's k-step\n",
              Shape<std::int8_t>::name());
  return probe_mma_sp<std::int8_t>(options);
}

int probe_mma_sp_f16(const Options& options) {
  std::printf("[mma_sp_f16] %s, one warp: A fragment, metadata nibbles, the 2:4 kernel's k-step\n",
              Shape<half>::name());
  return probe_mma_sp<half>(options);
}

}  // namespace shrink_probe
