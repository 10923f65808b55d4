// The layout probe's mma.sync part: one warp doing what gemm_int8_mma_kernel (shrink/cuda/kernels/linear_int8_mma.cuh)
// does for one 16 x 16 tile and 64 bytes of K: the 64-byte swizzle (swizzled_offset<64>), ldmatrix.x4 with the
// kernel's lane roles, two k32 steps of mma.sync m16n8k32 s8 (ldmatrix_x4, mma_s8). Reports which x / w element each
// fragment byte holds against the PTX ISA's fragments, and the product against the host's.
//
// To see where a byte came from, the tiles are first filled with their own shared-memory offsets (one run per byte of
// the offset), and the registers ldmatrix delivers are dumped as they are.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gpu/layout_probe.hpp"
#include "shrink/cuda/kernels/linear_int8_mma.cuh"

namespace shrink_probe {
namespace {

namespace i8 = shrink::cuda::kernels::linear_int8;

constexpr int kTileBytes = 16 * 64;  // 16 rows of 64 bytes: x (A) at 0, w (B) at kTileBytes, as one kernel stage

// mode 0, 1: byte `mode` of each shared byte's offset; mode 2: the logical x, w [16][64] through the kernel's swizzle.
// regs[(kk * 32 + lane) * 8 + i]: A registers (i < 4), then the 4 B registers of ldmatrix; d[(lane * 2 + j) * 4 + e].
__global__ void mma_probe(int mode, const std::uint8_t* x, const std::uint8_t* w, std::uint32_t* regs,
                          std::int32_t* d) {
  __shared__ __align__(128) std::uint8_t tiles[2 * kTileBytes];
  const int lane = static_cast<int>(threadIdx.x);
  if (mode < 2) {
    for (int o = lane; o < 2 * kTileBytes; o += 32) tiles[o] = static_cast<std::uint8_t>(o >> (8 * mode));
  } else {
    for (int i = lane; i < kTileBytes; i += 32) {
      const std::uint32_t at = i8::swizzled_offset<64>(i / 64, i % 64 / 16) + static_cast<std::uint32_t>(i % 16);
      tiles[at] = x[i];
      tiles[kTileBytes + at] = w[i];
    }
  }
  __syncwarp();
  const std::uint32_t base = i8::shared_address(tiles);
  // The ldmatrix lane roles gemm_int8_mma_kernel calls (linear_int8_layout.hpp), for its first A and B fragments.
  const int a_row = i8::a_lane_row(0, lane), a_chunk = i8::a_lane_chunk(lane);
  const int b_row = i8::b_lane_row(0, lane), b_chunk = i8::b_lane_chunk(lane);
  std::int32_t acc[2][4] = {};
  for (int kk = 0; kk < 2; ++kk) {
    std::uint32_t a[4], r[4];
    i8::ldmatrix_x4(a, base + i8::swizzled_offset<64>(a_row, 2 * kk + a_chunk));
    i8::ldmatrix_x4(r, base + kTileBytes + i8::swizzled_offset<64>(b_row, 2 * kk + b_chunk));
    for (int i = 0; i < 4; ++i) {
      regs[(kk * 32 + lane) * 8 + i] = a[i];
      regs[(kk * 32 + lane) * 8 + 4 + i] = r[i];
    }
    const std::uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
    i8::mma_s8(acc[0], a, b0);
    i8::mma_s8(acc[1], a, b1);
  }
  for (int j = 0; j < 2; ++j)
    for (int e = 0; e < 4; ++e) d[(lane * 2 + j) * 4 + e] = acc[j][e];
}

// out[row * RowBytes + byte]: the shared offset the kernels' swizzled_offset<RowBytes> gives logical (row, byte).
template <int RowBytes>
__global__ void swizzle_map(int rows, std::uint32_t* out) {
  for (int i = static_cast<int>(threadIdx.x); i < rows * RowBytes; i += static_cast<int>(blockDim.x))
    out[i] = i8::swizzled_offset<RowBytes>(i / RowBytes, i % RowBytes / 16) + static_cast<std::uint32_t>(i % 16);
}

}  // namespace

int probe_mma_s8(const Options& options) {
  std::printf(
      "[mma_s8] mma.sync m16n8k32 s8 + ldmatrix.x4, one warp, the sm_80 int8 kernel's lane roles and swizzle\n");
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> value(-20, 20);
  std::vector<std::uint8_t> x(kTileBytes), w(kTileBytes);
  for (auto& v : x) v = static_cast<std::uint8_t>(value(rng));
  for (auto& v : w) v = static_cast<std::uint8_t>(value(rng));

  std::uint8_t *x_dev = nullptr, *w_dev = nullptr;
  std::uint32_t *regs_dev = nullptr, *map_dev = nullptr;
  std::int32_t* d_dev = nullptr;
  PROBE_CHECK(cudaMalloc(&x_dev, kTileBytes));
  PROBE_CHECK(cudaMalloc(&w_dev, kTileBytes));
  PROBE_CHECK(cudaMalloc(&regs_dev, 3 * 2 * 32 * 8 * 4));
  PROBE_CHECK(cudaMalloc(&d_dev, 3 * 32 * 8 * 4));
  PROBE_CHECK(cudaMalloc(&map_dev, kTileBytes * 4));
  PROBE_CHECK(cudaMemcpy(x_dev, x.data(), kTileBytes, cudaMemcpyHostToDevice));
  PROBE_CHECK(cudaMemcpy(w_dev, w.data(), kTileBytes, cudaMemcpyHostToDevice));
  for (int mode = 0; mode < 3; ++mode) {
    mma_probe<<<1, 32>>>(mode, x_dev, w_dev, regs_dev + mode * 2 * 32 * 8, d_dev + mode * 32 * 8);
    PROBE_CHECK(cudaGetLastError());
  }
  swizzle_map<64><<<1, 128>>>(16, map_dev);
  PROBE_CHECK(cudaGetLastError());
  PROBE_CHECK(cudaDeviceSynchronize());
  std::vector<std::uint32_t> regs(3 * 2 * 32 * 8), map(kTileBytes);
  std::vector<std::int32_t> d(3 * 32 * 8);
  PROBE_CHECK(cudaMemcpy(regs.data(), regs_dev, regs.size() * 4, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(d.data(), d_dev, d.size() * 4, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaMemcpy(map.data(), map_dev, map.size() * 4, cudaMemcpyDeviceToHost));
  PROBE_CHECK(cudaFree(x_dev));
  PROBE_CHECK(cudaFree(w_dev));
  PROBE_CHECK(cudaFree(regs_dev));
  PROBE_CHECK(cudaFree(d_dev));
  PROBE_CHECK(cudaFree(map_dev));

  // The logical element (operand, row, byte) at each shared offset, by the kernel's swizzle.
  std::vector<std::string> at_offset(2 * kTileBytes, "unused");
  for (int i = 0; i < kTileBytes; ++i) {
    at_offset[map[static_cast<std::size_t>(i)]] = text("x(%d,%d)", i / 64, i % 64);
    at_offset[kTileBytes + map[static_cast<std::size_t>(i)]] = text("w(%d,%d)", i / 64, i % 64);
  }
  Comparison a_fragment("A fragment via ldmatrix", "x row g+8(r&1), byte 32kk+16(r/2)+4t+v (PTX)");
  Comparison b_fragment("B fragment via ldmatrix", "w row 8(r/2)+g, byte 32kk+16(r%2)+4t+v (PTX)");
  std::vector<std::string> raw;
  for (int kk = 0; kk < 2; ++kk)
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      std::string line = text("    kk %d lane %2d:", kk, lane);
      for (int i = 0; i < 8; ++i)
        for (int v = 0; v < 4; ++v) {
          const std::size_t at = static_cast<std::size_t>((kk * 32 + lane) * 8 + i);
          const std::uint32_t offset = (regs[at] >> (8 * v) & 0xFFu) | (regs[2 * 32 * 8 + at] >> (8 * v) & 0xFFu) << 8;
          const bool is_a = i < 4;
          const int r = i % 4;
          const int row = is_a ? g + 8 * (r & 1) : 8 * (r / 2) + g;
          const int byte = 32 * kk + (is_a ? 16 * (r / 2) : 16 * (r % 2)) + 4 * t + v;
          const std::uint32_t want = (is_a ? 0u : kTileBytes) + map[static_cast<std::size_t>(row * 64 + byte)];
          (is_a ? a_fragment : b_fragment)
              .check(offset == want,
                     text("kk %d lane %d %s[%d] byte %d: holds %s, the fragment wants %s", kk, lane, is_a ? "a" : "b",
                          r, v, at_offset[offset % (2 * kTileBytes)].c_str(), at_offset[want].c_str()));
          if (v == 0) line += " " + at_offset[offset % (2 * kTileBytes)];
        }
      raw.push_back(line);
    }

  Comparison product("mma_s8 D (two n8 fragments)", "c0,c1: row g, col 8j+2q+{0,1}; c2,c3: row g+8");
  for (int lane = 0; lane < 32; ++lane)
    for (int j = 0; j < 2; ++j)
      for (int e = 0; e < 4; ++e) {
        const int m = i8::accumulator_row(0, lane, e), n = i8::accumulator_col(8 * j, lane, e);  // the kernel's
        long expected = 0;
        for (int k = 0; k < 64; ++k)
          expected += static_cast<long>(static_cast<std::int8_t>(x[static_cast<std::size_t>(m * 64 + k)])) *
                      static_cast<std::int8_t>(w[static_cast<std::size_t>(n * 64 + k)]);
        const std::int32_t got = d[static_cast<std::size_t>(2 * 32 * 8 + (lane * 2 + j) * 4 + e)];
        product.check(got == expected,
                      text("lane %d acc[%d][%d] (m %d, n %d) = %d, expected %ld", lane, j, e, m, n, got, expected));
      }

  print_table_header();
  a_fragment.print();
  b_fragment.print();
  product.print();
  if (options.verbose || !a_fragment.match() || !b_fragment.match()) {
    std::printf("  raw: per kk and lane, byte 0 of a[0..3] then b[0..3] (ldmatrix's r[0..3]) as x/w(row,byte)\n");
    for (const std::string& line : raw) std::printf("%s\n", line.c_str());
  }
  return result_of({&a_fragment, &b_fragment, &product});
}

}  // namespace shrink_probe
