// The layout probe's wgmma part (sm_90a alone): one warpgroup of wgmma m64n128k32 s8 with the Hopper int8 kernel's
// descriptors (wgmma_descriptor), 128-byte swizzled fill (swizzled_offset<128>) and K advance (descriptor + 2 kk),
// shrink/cuda/kernels/linear_int8_wgmma.cuh. Measures, for each accumulator register of each thread, its (row, col);
// and for each K advance kk = 0..3, which shared byte the tensor cores read as A(m, k) and B(n, k); and the same for A
// with the descriptors' leading byte offset set to other values than the kernel's 1.
//
// Runs (D = A · Bᵀ over k = 0..31 of the slice):
//   accumulator map  A(m, k) = m for k % 32 < 2, 1 for k % 32 = 2; B(n, k) = 64, 64, n: D(m, n) = 128 m + n.
//   A read map       A's shared bytes hold 7 bits of their own offset (two runs: bits 0-6, 7-13); B(n, k) = 1 when
//                    k % 32 = n % 32: D(m, n) = the code of the byte read as A(m, n % 32).
//   B read map       the same with the roles swapped: D(m, n) = the code of the byte read as B(n, m % 32).
// The operand that is not coded is written through the kernel's swizzle, 1024-byte aligned as the kernel's stages.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gpu/layout_probe.hpp"
#include "shrink/cuda/kernels/linear_int8_wgmma.cuh"

namespace shrink_probe {
namespace {

namespace i8 = shrink::cuda::kernels::linear_int8;

constexpr int kBytesA = 64 * 128, kBytesB = 128 * 128;  // K-major tiles of 128-byte rows
enum Coded : int { kCodedA, kCodedB, kAccumulator };

struct Run {
  int coded;  // Coded
  int digit;  // which 7 bits of the offset the coded operand holds
  int kk;     // K advance: descriptors + 2 kk (32 bytes)
  int lbo;    // leading byte offset field (>> 4) of both descriptors; -1: as wgmma_descriptor sets it
};

__device__ std::uint8_t logical_value(int coded, bool is_a, int row, int k) {
  const int kk = k % 32;
  if (coded == kAccumulator) {
    if (is_a) return static_cast<std::uint8_t>(kk < 2 ? row : kk == 2 ? 1 : 0);
    return static_cast<std::uint8_t>(kk < 2 ? 64 : kk == 2 ? row : 0);
  }
  return kk == row % 32 ? 1 : 0;  // the selector
}

__global__ void __launch_bounds__(128) wgmma_probe(const Run* runs, int count, std::int32_t* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) std::uint8_t shared[];
  const std::uint32_t raw = i8::shared_address(shared);
  const std::uint32_t base = (raw + 1023u) & ~1023u;  // as gemm_int8_wgmma_kernel: swizzle atoms 1024-aligned
  std::uint8_t* tiles = shared + (base - raw);
  const int thread = static_cast<int>(threadIdx.x);
  for (int index = 0; index < count; ++index) {
    const Run run = runs[index];
    for (int operand = 0; operand < 2; ++operand) {
      const bool is_a = operand == 0;
      const int bytes = is_a ? kBytesA : kBytesB;
      std::uint8_t* tile = tiles + (is_a ? 0 : kBytesA);
      if (run.coded == (is_a ? kCodedA : kCodedB)) {
        for (int o = thread; o < bytes; o += 128) tile[o] = static_cast<std::uint8_t>((o >> (7 * run.digit)) & 0x7F);
      } else {
        for (int i = thread; i < bytes; i += 128)
          tile[i8::swizzled_offset<128>(i / 128, i % 128 / 16) + static_cast<std::uint32_t>(i % 16)] =
              logical_value(run.coded, is_a, i / 128, i % 128);
      }
    }
    i8::fence_proxy_async_shared();  // generic-proxy writes before the tensor cores' async-proxy reads
    __syncthreads();
    std::uint64_t a = i8::wgmma_descriptor(base), b = i8::wgmma_descriptor(base + kBytesA);
    if (run.lbo >= 0) {
      const std::uint64_t field = std::uint64_t{0x3FFF} << 16;
      a = (a & ~field) | static_cast<std::uint64_t>(run.lbo) << 16;
      b = (b & ~field) | static_cast<std::uint64_t>(run.lbo) << 16;
    }
    std::int32_t acc[64];
    for (int i = 0; i < 64; ++i) acc[i] = 0;
    i8::fence_accumulators(acc);
    i8::wgmma_fence();
    i8::wgmma_m64n128k32_s8(acc, a + 2 * static_cast<std::uint64_t>(run.kk),
                            b + 2 * static_cast<std::uint64_t>(run.kk));
    i8::wgmma_commit();
    i8::wgmma_wait<0>();
    i8::fence_accumulators(acc);
    for (int i = 0; i < 64; ++i) out[(index * 128 + thread) * 64 + i] = acc[i];
    __syncthreads();  // every read of this run's tiles is done before the next fill
  }
#endif
}

__global__ void swizzle_map_128(std::uint32_t* out) {
  for (int i = static_cast<int>(threadIdx.x); i < 128 * 128; i += static_cast<int>(blockDim.x))
    out[i] = i8::swizzled_offset<128>(i / 128, i % 128 / 16) + static_cast<std::uint32_t>(i % 16);
}

// The kernel's accumulator layout, as its epilogue calls it (linear_int8_layout.hpp): thread 32 w + lane, register i.
struct Cell {
  int row, col;
};
Cell assumed_cell(int thread, int i) {
  const int warp = thread / 32, lane = thread % 32;
  return Cell{i8::wgmma_accumulator_row(0, warp, lane, i), i8::wgmma_accumulator_col(0, lane, i)};
}

}  // namespace

int probe_wgmma_s8(const Options& options) {
  std::printf("[wgmma_s8] wgmma m64n128k32 s8, one warpgroup, the Hopper int8 kernel's descriptors and swizzle\n");
  int device = 0;
  cudaDeviceProp properties{};
  PROBE_CHECK(cudaGetDevice(&device));
  PROBE_CHECK(cudaGetDeviceProperties(&properties, device));
  if (properties.major != 9 || properties.minor != 0) {
    std::printf("  skipped: wgmma needs sm_90 (this device is sm_%d%d)\n", properties.major, properties.minor);
    return kSkipped;
  }
  const int kLbo[] = {-1, 0, 2, 64};  // the kernel's (1), then variants
  std::vector<Run> runs{{kAccumulator, 0, 0, -1}};
  for (int lbo : kLbo)
    for (int kk = 0; kk < 4; ++kk)
      for (int digit = 0; digit < 2; ++digit) runs.push_back({kCodedA, digit, kk, lbo});
  for (int kk = 0; kk < 4; ++kk)
    for (int digit = 0; digit < 2; ++digit) runs.push_back({kCodedB, digit, kk, -1});
  const int count = static_cast<int>(runs.size());
  const int shared_bytes = kBytesA + kBytesB + 1024;

  Run* runs_dev = nullptr;
  std::int32_t* out_dev = nullptr;
  std::uint32_t* map_dev = nullptr;
  PROBE_CHECK(cudaMalloc(&runs_dev, runs.size() * sizeof(Run)));
  PROBE_CHECK(cudaMalloc(&out_dev, static_cast<std::size_t>(count) * 128 * 64 * 4));
  PROBE_CHECK(cudaMalloc(&map_dev, 128 * 128 * 4));
  PROBE_CHECK(cudaMemcpy(runs_dev, runs.data(), runs.size() * sizeof(Run), cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemset(out_dev, 0xFF, static_cast<std::size_t>(count) * 128 * 64 * 4));
  PROBE_CHECK(cudaFuncSetAttribute(wgmma_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  wgmma_probe<<<1, 128, shared_bytes>>>(runs_dev, count, out_dev);
  PROBE_CHECK(cudaGetLastError());
  swizzle_map_128<<<1, 128>>>(map_dev);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<std::int32_t> out(static_cast<std::size_t>(count) * 128 * 64);
  std::vector<std::uint32_t> map(128 * 128);
  PROBE_CHECK(cudaMemcpy(out.data(), out_dev, out.size() * 4, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(map.data(), map_dev, map.size() * 4, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(runs_dev));
  PROBE_CHECK(cudaFree(out_dev));
  PROBE_CHECK(cudaFree(map_dev));
  auto value = [&](int run, int thread, int i) { return out[static_cast<std::size_t>((run * 128 + thread) * 64 + i)]; };

  // Accumulator map, measured; the read maps below are decoded through it when it is a bijection.
  Comparison accumulators("accumulator (thread,reg)", "row 16w+g+8(s/2), col 8j+2q+s%2 (reg 4j+s)");
  std::vector<Cell> cell(128 * 64);
  std::vector<int> seen(64 * 128, 0);
  bool bijection = true;
  for (int thread = 0; thread < 128; ++thread)
    for (int i = 0; i < 64; ++i) {
      const std::int32_t v = value(0, thread, i);
      const Cell got = v >= 0 && v < 64 * 128 ? Cell{v / 128, v % 128} : Cell{-1, -1};
      const Cell want = assumed_cell(thread, i);
      cell[static_cast<std::size_t>(thread * 64 + i)] = got;
      if (got.row < 0 || seen[static_cast<std::size_t>(got.row * 128 + got.col)]++ != 0) bijection = false;
      accumulators.check(got.row == want.row && got.col == want.col,
                         text("thread %d reg %d: (%d,%d), assumed (%d,%d) [raw %d]", thread, i, got.row, got.col,
                              want.row, want.col, v));
    }
  if (!bijection) {
    std::printf("  note: the measured accumulator map is not a bijection; read maps decoded with the assumed one\n");
    for (int thread = 0; thread < 128; ++thread)
      for (int i = 0; i < 64; ++i) cell[static_cast<std::size_t>(thread * 64 + i)] = assumed_cell(thread, i);
  }

  // The shared byte read as (row, k) of the coded operand, from the two digit runs: -1 no valid code, -2 copies of
  // one (row, k) disagree.
  auto read_map = [&](int run0, bool coded_a, int rows) {
    std::vector<int> read(static_cast<std::size_t>(rows * 32), -3);
    for (int thread = 0; thread < 128; ++thread)
      for (int i = 0; i < 64; ++i) {
        const Cell c = cell[static_cast<std::size_t>(thread * 64 + i)];
        const std::int32_t low = value(run0, thread, i), high = value(run0 + 1, thread, i);
        const int offset = low >= 0 && low < 128 && high >= 0 && high < 128 ? low | high << 7 : -1;
        const int row = coded_a ? c.row : c.col, k = (coded_a ? c.col : c.row) % 32;
        int& slot = read[static_cast<std::size_t>(row * 32 + k)];
        slot = slot == -3 || slot == offset ? offset : -2;
      }
    return read;
  };
  std::vector<int> inverse(128 * 128, -1);  // shared offset -> logical row * 128 + byte, by the kernel's swizzle
  for (int i = 0; i < 128 * 128; ++i) inverse[map[static_cast<std::size_t>(i)]] = i;
  auto logical = [&](int offset, int rows) {
    const int i = offset < rows * 128 ? inverse[static_cast<std::size_t>(offset)] : -1;
    return i < 0 ? text("%d?", offset) : text("(%d,%d)", i / 128, i % 128);
  };
  std::vector<Comparison> reads;
  std::vector<bool> kernel_descriptor;
  std::vector<std::string> raw;
  int run = 1;
  for (int operand = 0; operand < 2; ++operand)
    for (int lbo : (operand == 0 ? std::vector<int>{-1, 0, 2, 64} : std::vector<int>{-1})) {
      const bool is_a = operand == 0;
      const int rows = is_a ? 64 : 128;
      for (int kk = 0; kk < 4; ++kk, run += 2) {
        reads.emplace_back(text("%s read, kk %d%s", is_a ? "A" : "B", kk, lbo < 0 ? "" : text(", LBO %d", lbo).c_str()),
                           text("%s(r,k) at swizzled_offset<128>(r, (32kk+k)/16)+k%%16%s", is_a ? "A" : "B",
                                lbo < 0 ? " (desc + 2kk)" : ""));
        kernel_descriptor.push_back(lbo < 0);
        const std::vector<int> read = read_map(run, is_a, rows);
        for (int r = 0; r < rows; ++r)
          for (int k = 0; k < 32; ++k) {
            const int got = read[static_cast<std::size_t>(r * 32 + k)];
            const int want = static_cast<int>(map[static_cast<std::size_t>(r * 128 + 32 * kk + k)]);
            if (got == want) {
              reads.back().check(true, std::string());
              continue;
            }
            reads.back().check(
                false, text("%s(%d,%d): read offset %d = logical %s, assumed %d = (%d,%d)", is_a ? "A" : "B", r, k, got,
                            got >= 0 ? logical(got, rows).c_str() : "-", want, r, 32 * kk + k));
          }
        if (options.verbose || !reads.back().match()) {
          raw.push_back(text("    %s kk %d%s, rows 0..7: offset read for k = 0, 4, .., 28", is_a ? "A" : "B", kk,
                             lbo < 0 ? "" : text(" LBO %d", lbo).c_str()));
          for (int r = 0; r < 8; ++r) {
            std::string line = text("      row %d:", r);
            for (int k = 0; k < 32; k += 4) line += text(" %d", read[static_cast<std::size_t>(r * 32 + k)]);
            raw.push_back(line);
          }
        }
      }
    }

  print_table_header();
  accumulators.print();
  for (const Comparison& c : reads) c.print();
  std::printf(
      "  (LBO rows: the kernel sets LBO 1, which the PTX ISA says K-major swizzled layouts do not use; a MATCH\n"
      "   there means the field is ignored, a DIFFER that it matters: informational, not part of the verdict)\n");
  if (options.verbose || !accumulators.match()) {
    std::printf("  raw accumulator map, threads 0..3 and 32: reg -> row,col\n");
    for (int thread : {0, 1, 2, 3, 32}) {
      std::string line = text("    thread %3d:", thread);
      for (int i = 0; i < 64; ++i) {
        const std::int32_t v = value(0, thread, i);
        line += text(" %d,%d", v / 128, v % 128);
      }
      std::printf("%s\n", line.c_str());
    }
  }
  if (!raw.empty()) std::printf("  raw read maps (shared offsets from the tile start):\n");
  for (const std::string& line : raw) std::printf("%s\n", line.c_str());

  // The verdict: the accumulator map and the kernel's own descriptors (A and B, kk 0..3); the LBO variants inform.
  std::vector<const Comparison*> required{&accumulators};
  for (std::size_t i = 0; i < reads.size(); ++i)
    if (kernel_descriptor[i]) required.push_back(&reads[i]);
  return result_of(required);
}

}  // namespace shrink_probe
