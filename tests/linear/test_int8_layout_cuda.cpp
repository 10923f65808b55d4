// [host] models of what the int8 GEMM kernels do with shared memory, for a machine without a GPU: the index arithmetic
// the kernels call (shrink/cuda/kernels/linear_int8_layout.hpp) replayed with the PTX ISA's rules, stated below
// independently of that header:
//   a. mma.sync (MmaLarge, MmaSmall): load_tile's copies fill the stages, ldmatrix.x4 hands out fragments, mma.m16n8k32
//      multiplies them, the accumulators land through the kernel's mapping; the sum over K splits must be X · Wᵀ.
//   b. wgmma (WgmmaConfig): the SW128 K-major descriptor's address model, element (row, k) → shared byte, against
//      where load_tile put the element, for every k32 advance, both warpgroups' A and B, all stages; then the product.
//   c. the cp.async stage ring of every pipelined kernel (int8 mma, wgmma, 2:4): a tile is read from the stage it was
//      loaded into, after its group landed and a barrier, and no stage is refilled before a barrier follows its reads.
//      (The weight-only tensor-core kernel keeps its blocks ahead in registers, with no shared memory: no ring.)
//
// PTX ISA rules used (g = lane / 4, t = lane % 4):
//   ldmatrix.sync.aligned.m8n8.x4.b16: lanes 8q .. 8q + 7 give the row addresses (16 bytes each) of matrix q; lane T
//     receives in register q the 4 bytes at row T / 4 of matrix q, bytes 4 (T % 4) .. + 3.
//   mma.m16n8k32 .s8 A (16 x 32, row): register r, byte j of lane = A[g + 8 (r % 2)][4t + j + 16 (r / 2)].
//                     B (32 x 8, col): register r, byte j of lane = B[4t + j + 16 r][g].
//                     C/D (16 x 8, s32): register i of lane = D[g + 8 (i / 2)][2t + i % 2].
//   wgmma descriptor: bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset, 62-63 layout type
//     (1: 128-byte swizzle). The base offset must be (start >> 7) % 8 when the start is not on the 1024-byte repeat of
//     the pattern. Canonical K-major 128-byte-swizzled layout of 8-bit elements: 8-row groups of core matrices,
//     row i of a group 128 bytes after row i − 1, K contiguous in the row, groups SBO bytes apart; the swizzle XORs
//     address bits [4:6] with bits [7:9] of the final address.
//   wgmma m64nNk32 .s32 D: register i of lane of warp w (of the warpgroup) = D[16 w + g + 8 ((i / 2) % 2)][8 (i / 4) +
//     2t + i % 2].
//   cp.async.wait_group N: waits until at most the N most recent committed groups of this thread are pending.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "shrink/cuda/kernels/linear_int8_layout.hpp"
#include "shrink/cuda/kernels/linear_nm_layout.hpp"
#include "support/ldmatrix_model.hpp"

namespace int8_layout_replay {

namespace i8 = shrink::cuda::kernels::linear_int8;

// Row-major int8 x [m, k] and w [n, k] with row pitches past k; the padding holds values too, so a read past K shows.
struct Problem {
  int m, n, k;
  std::int64_t ldx, ldw;
  std::vector<std::int8_t> x, w;
};

Problem make_problem(int m, int n, int k, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> value(-128, 127);
  Problem p{m, n, k, k + 32, k + 48, {}, {}};
  p.x.resize(static_cast<std::size_t>(m * p.ldx));
  p.w.resize(static_cast<std::size_t>(n * p.ldw));
  for (auto& v : p.x) v = static_cast<std::int8_t>(value(rng));
  for (auto& v : p.w) v = static_cast<std::int8_t>(value(rng));
  return p;
}

std::vector<std::int32_t> reference(const Problem& p) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(p.m * p.n), 0);
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      std::int32_t sum = 0;
      for (int c = 0; c < p.k; ++c)
        sum += p.x[static_cast<std::size_t>(i * p.ldx + c)] * p.w[static_cast<std::size_t>(j * p.ldw + c)];
      out[static_cast<std::size_t>(i * p.n + j)] = sum;
    }
  return out;
}

// One stage of shared memory, the bytes each copy wrote and how often.
struct Stage {
  std::vector<std::uint8_t> bytes;
  std::vector<int> writes;
  explicit Stage(int size) : bytes(static_cast<std::size_t>(size), 0xCD), writes(static_cast<std::size_t>(size), 0) {}
};

// load_tile<Rows, RowBytes, Threads> of the kernel: thread `thread` copies i = thread, thread + Threads, ...; copy i
// moves rows_begin + row · ld + byte to tile + swizzled_offset(row, chunk) when inside, else 16 zeros. `tile` is the
// tile's offset in the stage, `stage_address` the stage's shared address (for the alignment checks).
template <int Rows, int RowBytes, int Threads>
void fill_tile(Stage& stage, int tile, std::uint32_t stage_address, const std::vector<std::int8_t>& matrix,
               std::int64_t first_row, std::int64_t ld, int valid_rows, int k0, int k) {
  constexpr int kChunks = Rows * RowBytes / 16;
  for (int thread = 0; thread < Threads; ++thread)
    for (int i = thread; i < kChunks; i += Threads) {
      const i8::TileCopy copy = i8::tile_copy<RowBytes>(i, valid_rows, k0, k);
      const std::int64_t destination =
          tile + static_cast<std::int64_t>(i8::swizzled_offset<RowBytes>(copy.row, copy.chunk));
      INFO("copy " << i << " row " << copy.row << " chunk " << copy.chunk << " destination " << destination);
      REQUIRE((destination >= 0 && destination + 16 <= static_cast<std::int64_t>(stage.bytes.size())));
      REQUIRE((stage_address + destination) % 16 == 0);  // cp.async 16: a 16-aligned shared destination
      for (int b = 0; b < 16; ++b) ++stage.writes[static_cast<std::size_t>(destination + b)];
      if (copy.inside) {
        const std::int64_t source = (first_row + copy.row) * ld + copy.byte;  // from the matrix's start
        REQUIRE(source % 16 == 0);  // 16-aligned when ld and the matrix are (the host API's checks)
        REQUIRE((copy.byte + 16 <= k && source + 16 <= static_cast<std::int64_t>(matrix.size())));
        std::memcpy(stage.bytes.data() + destination, matrix.data() + source, 16);
      } else {
        REQUIRE((copy.row >= valid_rows || copy.byte >= k));
        std::memset(stage.bytes.data() + destination, 0, 16);
      }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// a. mma.sync

using Registers4 = std::uint32_t[32][4];

std::int8_t byte_of(std::uint32_t word, int j) { return static_cast<std::int8_t>((word >> (8 * j)) & 0xFFu); }

// c += a · b, mma.sync.m16n8k32.row.col.s32.s8.s8.s32 by the PTX fragment rules.
void mma_s8_model(std::int32_t (&c)[32][4], const Registers4& a, const std::uint32_t (&b)[32][2]) {
  std::int32_t matrix_a[16][32] = {}, matrix_b[32][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < 4; ++j) {
      for (int r = 0; r < 4; ++r) matrix_a[g + 8 * (r % 2)][4 * t + j + 16 * (r / 2)] = byte_of(a[lane][r], j);
      for (int r = 0; r < 2; ++r) matrix_b[4 * t + j + 16 * r][g] = byte_of(b[lane][r], j);
    }
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const int row = lane / 4 + 8 * (i / 2), col = 2 * (lane % 4) + i % 2;
      std::int32_t sum = 0;
      for (int kk = 0; kk < 32; ++kk) sum += matrix_a[row][kk] * matrix_b[kk][col];
      c[lane][i] += sum;
    }
}

// The whole grid of gemm_int8_mma_kernel<C> with `per_split` k-tiles a split; returns Σ over splits of each split's
// output and checks that every (split, row, column) is written once.
template <class C>
std::vector<std::int32_t> replay_mma(const Problem& p, int per_split) {
  const int tiles_m = (p.m + C::kBM - 1) / C::kBM, tiles_n = (p.n + C::kBN - 1) / C::kBN;
  const int k_tiles = (p.k + C::kBK - 1) / C::kBK;
  const int splits = (k_tiles + per_split - 1) / per_split;
  std::vector<std::int32_t> out(static_cast<std::size_t>(p.m * p.n), 0);
  std::vector<int> writes(out.size(), 0);
  // acc[warp][i][j][lane][r]
  std::vector<std::int32_t> acc(static_cast<std::size_t>(C::kThreads / 32 * C::kFragsM * C::kFragsN * 32 * 4));
  const auto at = [](int warp, int i, int j) {
    return static_cast<std::size_t>(((warp * C::kFragsM + i) * C::kFragsN + j) * 32 * 4);
  };
  for (int z = 0; z < splits; ++z) {
    std::set<std::pair<int, int>> seen;
    for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
      const i8::TileCoord tile = i8::grouped_tile(linear, tiles_m, tiles_n);
      REQUIRE((tile.m >= 0 && tile.m < tiles_m && tile.n >= 0 && tile.n < tiles_n));
      seen.insert({tile.m, tile.n});
      const int m0 = tile.m * C::kBM, n0 = tile.n * C::kBN;
      const i8::KRange range = i8::split_k_range(k_tiles, per_split, z);
      std::fill(acc.begin(), acc.end(), 0);
      for (int k_tile = range.begin; k_tile < range.end; ++k_tile) {
        Stage stage(C::kStageBytes);
        const int slot = (k_tile - range.begin) % C::kStages;  // any stage: the ring is checked in part c
        const std::uint32_t stage_address = i8::stage_offset<C>(slot);
        fill_tile<C::kBM, C::kBK, C::kThreads>(stage, 0, stage_address, p.x, m0, p.ldx, std::min(p.m - m0, C::kBM),
                                               k_tile * C::kBK, p.k);
        fill_tile<C::kBN, C::kBK, C::kThreads>(stage, C::kTileBytesA, stage_address, p.w, n0, p.ldw,
                                               std::min(p.n - n0, C::kBN), k_tile * C::kBK, p.k);
        for (std::size_t b = 0; b < stage.writes.size(); ++b) {
          INFO("stage byte " << b << " written " << stage.writes[b] << " times");
          REQUIRE(stage.writes[b] == 1);
        }
        for (int warp = 0; warp < C::kThreads / 32; ++warp) {
          const int warp_m = warp / C::kWarpsN, warp_n = warp % C::kWarpsN;
          for (int kk = 0; kk < C::kBK / 32; ++kk) {
            std::vector<std::uint32_t> a(static_cast<std::size_t>(C::kFragsM * 32 * 4));
            std::vector<std::uint32_t> b(static_cast<std::size_t>(C::kFragsN * 32 * 2));
            for (int i = 0; i < C::kFragsM; ++i) {
              std::uint32_t address[32];
              for (int lane = 0; lane < 32; ++lane)
                address[lane] = i8::swizzled_offset<C::kBK>(i8::a_lane_row(warp_m * C::kWarpTileM, lane) + 16 * i,
                                                            2 * kk + i8::a_lane_chunk(lane));
              shrink::test::ldmatrix_x4_model(stage.bytes, address,
                                              *reinterpret_cast<Registers4*>(&a[static_cast<std::size_t>(i * 128)]));
            }
            for (int j = 0; j < C::kFragsN / 2; ++j) {
              std::uint32_t address[32];
              for (int lane = 0; lane < 32; ++lane)
                address[lane] =
                    C::kTileBytesA + i8::swizzled_offset<C::kBK>(i8::b_lane_row(warp_n * C::kWarpTileN, lane) + 16 * j,
                                                                 2 * kk + i8::b_lane_chunk(lane));
              Registers4 r;
              shrink::test::ldmatrix_x4_model(stage.bytes, address, r);
              for (int lane = 0; lane < 32; ++lane) {  // the kernel: registers 0, 1 → n8 tile 2j; 2, 3 → 2j + 1
                b[static_cast<std::size_t>(((2 * j) * 32 + lane) * 2)] = r[lane][0];
                b[static_cast<std::size_t>(((2 * j) * 32 + lane) * 2 + 1)] = r[lane][1];
                b[static_cast<std::size_t>(((2 * j + 1) * 32 + lane) * 2)] = r[lane][2];
                b[static_cast<std::size_t>(((2 * j + 1) * 32 + lane) * 2 + 1)] = r[lane][3];
              }
            }
            for (int i = 0; i < C::kFragsM; ++i)
              for (int j = 0; j < C::kFragsN; ++j)
                mma_s8_model(*reinterpret_cast<std::int32_t(*)[32][4]>(&acc[at(warp, i, j)]),
                             *reinterpret_cast<const Registers4*>(&a[static_cast<std::size_t>(i * 128)]),
                             *reinterpret_cast<const std::uint32_t(*)[32][2]>(&b[static_cast<std::size_t>(j * 64)]));
          }
        }
      }
      // The epilogue: store_pair(row, col) writes accumulators r, r + 1 at columns col, col + 1 (r = 0, 2).
      for (int warp = 0; warp < C::kThreads / 32; ++warp) {
        const int warp_m = warp / C::kWarpsN, warp_n = warp % C::kWarpsN;
        for (int i = 0; i < C::kFragsM; ++i)
          for (int j = 0; j < C::kFragsN; ++j)
            for (int lane = 0; lane < 32; ++lane)
              for (int r = 0; r < 4; ++r) {
                const int first_row = m0 + warp_m * C::kWarpTileM + 16 * i,
                          first_col = n0 + warp_n * C::kWarpTileN + 8 * j;
                const int row = i8::accumulator_row(first_row, lane, r - r % 2);
                const int col = i8::accumulator_col(first_col, lane, r - r % 2) + r % 2;
                CHECK(row == i8::accumulator_row(first_row, lane, r));
                CHECK(col == i8::accumulator_col(first_col, lane, r));
                if (row >= p.m || col >= p.n) continue;
                out[static_cast<std::size_t>(row * p.n + col)] +=
                    acc[at(warp, i, j) + static_cast<std::size_t>(lane * 4 + r)];
                ++writes[static_cast<std::size_t>(row * p.n + col)];
              }
      }
    }
    CHECK(seen.size() == static_cast<std::size_t>(tiles_m * tiles_n));
  }
  for (std::size_t e = 0; e < writes.size(); ++e) {
    INFO("output " << e / static_cast<std::size_t>(p.n) << ", " << e % static_cast<std::size_t>(p.n));
    REQUIRE(writes[e] == splits);
  }
  return out;
}

// Compares with the exact product; names the first mismatches.
void check_product(const Problem& p, const std::vector<std::int32_t>& got, const std::string& what) {
  const std::vector<std::int32_t> expected = reference(p);
  int bad = 0;
  for (int i = 0; i < p.m; ++i)
    for (int j = 0; j < p.n; ++j) {
      const std::size_t e = static_cast<std::size_t>(i * p.n + j);
      if (got[e] != expected[e] && bad++ < 5) {
        INFO(what << " M " << p.m << " N " << p.n << " K " << p.k << ": row " << i << " column " << j << " replayed "
                  << got[e] << " expected " << expected[e]);
        CHECK(false);
      }
    }
  CHECK(bad == 0);
}

template <class C>
void check_mma(int m, int n, int k, int per_split, std::uint32_t seed) {
  const Problem p = make_problem(m, n, k, seed);
  std::ostringstream what;
  what << "mma " << C::kBM << "x" << C::kBN << " k-tiles per split " << per_split;
  check_product(p, replay_mma<C>(p, per_split), what.str());
}

TEST_CASE("int8 mma.sync kernel arithmetic, replayed with the PTX fragment rules, gives X · Wᵀ", "[host]") {
  // K a multiple of 16, not of 64: a half-filled last k-tile; M and N not multiples of the tiles.
  check_mma<i8::MmaSmall>(1, 70, 208, 100, 1);
  check_mma<i8::MmaSmall>(33, 70, 208, 100, 2);
  check_mma<i8::MmaSmall>(40, 130, 336, 2, 3);  // 6 k-tiles, 3 splits
  check_mma<i8::MmaSmall>(300, 20, 80, 1, 4);   // 10 tile rows: two groups of grouped_tile
  check_mma<i8::MmaLarge>(130, 200, 208, 100, 5);
  check_mma<i8::MmaLarge>(17, 129, 272, 2, 6);  // 5 k-tiles in splits of 2, 2, 1
}

// ---------------------------------------------------------------------------------------------------------------
// b. wgmma

struct Descriptor {
  std::uint32_t start, leading, stride, base_offset, layout;
  std::uint64_t other_bits;
};

Descriptor decode(std::uint64_t d) {
  constexpr std::uint64_t kFields = 0x3FFFull | (0x3FFFull << 16) | (0x3FFFull << 32) | (7ull << 49) | (3ull << 62);
  return Descriptor{static_cast<std::uint32_t>(d & 0x3FFFu) << 4,
                    static_cast<std::uint32_t>((d >> 16) & 0x3FFFu) << 4,
                    static_cast<std::uint32_t>((d >> 32) & 0x3FFFu) << 4,
                    static_cast<std::uint32_t>((d >> 49) & 7u),
                    static_cast<std::uint32_t>(d >> 62),
                    d & ~kFields};
}

// The shared byte wgmma reads for element (row, k) (k in bytes, < 128 − start % 128) of a K-major operand with the
// 128-byte swizzle, from the descriptor alone, by the PTX rules at the top of this file.
std::uint32_t descriptor_address(std::uint64_t d, int row, int k) {
  const Descriptor f = decode(d);
  REQUIRE(f.layout == 1);
  REQUIRE(f.base_offset == ((f.start >> 7) & 7u));
  const std::uint32_t linear = f.start + static_cast<std::uint32_t>(row / 8) * f.stride +
                               static_cast<std::uint32_t>(row % 8) * 128u + static_cast<std::uint32_t>(k);
  return linear ^ (((linear >> 7) & 7u) << 4);
}

// A stage's owners: for each byte, operand (0 x, 1 w), row and K byte of the element load_tile put there, packed.
int owner(int operand, int row, int k_byte) { return (operand << 20) | (row << 8) | k_byte; }

TEST_CASE("int8 wgmma SW128 K-major descriptors address the bytes load_tile wrote, for every k32 step and stage",
          "[host]") {
  using C = i8::WgmmaConfig;
  using Ring = i8::StageRing<C::kStages>;
  static_assert(C::kTileBytesA % 1024 == 0 && C::kStageBytes % 1024 == 0, "every tile base 1024-aligned");
  // Where the dynamic shared memory may start (16-aligned, within the 228 KiB window the 18-bit address field covers).
  for (std::uint32_t start :
       {0u, 16u, 528u, 1008u, 1024u, 4096u + 48u, 227u * 1024u - static_cast<std::uint32_t>(C::kSharedBytes)}) {
    INFO("dynamic shared memory at " << start);
    const std::uint32_t base = i8::align_1024(start);
    REQUIRE(base % 1024 == 0);
    REQUIRE(base >= start);
    REQUIRE(base + static_cast<std::uint32_t>(C::kStages * C::kStageBytes) <= start + C::kSharedBytes);
    REQUIRE(start + C::kSharedBytes <= (1u << 18));
    for (int s = 0; s < C::kStages; ++s) {
      const std::uint32_t stage = base + i8::stage_offset<C>(s);
      INFO("stage " << s << " at " << stage);
      REQUIRE(stage % 1024 == 0);
      REQUIRE(Ring::stage_of(s) == s);
      // Owners of the stage's bytes: the full tiles of x and w (all rows and K valid).
      std::vector<int> owners(static_cast<std::size_t>(C::kStageBytes), -1);
      for (int operand = 0; operand < 2; ++operand)
        for (int i = 0; i < C::kBM * C::kBK / 16; ++i) {
          const i8::TileCopy copy = i8::tile_copy<C::kBK>(i, C::kBM, 0, C::kBK);
          REQUIRE(copy.inside);
          const std::uint32_t at =
              static_cast<std::uint32_t>(operand * C::kTileBytesA) + i8::swizzled_offset<C::kBK>(copy.row, copy.chunk);
          for (int b = 0; b < 16; ++b) {
            REQUIRE(owners[at + static_cast<std::uint32_t>(b)] == -1);
            owners[at + static_cast<std::uint32_t>(b)] = owner(operand, copy.row, copy.byte + b);
          }
        }
      // Operand, first row, rows, descriptor at the start of the tile.
      struct Operand {
        int operand, first_row, rows;
        std::uint32_t address;
      };
      const Operand operands[3] = {{0, 0, 64, stage + i8::wgmma_a_offset<C>(0)},
                                   {0, 64, 64, stage + i8::wgmma_a_offset<C>(1)},
                                   {1, 0, C::kBN, stage + i8::wgmma_b_offset<C>()}};
      for (const Operand& o : operands) {
        INFO("operand " << (o.operand == 0 ? "A (x)" : "B (w)") << " rows from " << o.first_row);
        REQUIRE(o.address % 1024 == 0);
        const std::uint64_t d = i8::wgmma_descriptor(o.address);
        const Descriptor f = decode(d);
        CHECK(f.start == (o.address & 0x3FFF0u));
        CHECK(f.leading == 16);
        CHECK(f.stride == 1024);
        CHECK(f.base_offset == 0);
        CHECK(f.layout == i8::kLayoutSwizzle128);
        CHECK(f.other_bits == 0);
        for (int kk = 0; kk < C::kBK / 32; ++kk) {
          const std::uint64_t dk = i8::descriptor_at_k(d, kk);
          const Descriptor fk = decode(dk);
          INFO("k32 step " << kk);
          CHECK(fk.start == f.start + 32u * static_cast<std::uint32_t>(kk));  // no carry out of the 14-bit field
          CHECK((fk.leading == f.leading && fk.stride == f.stride && fk.base_offset == 0 && fk.layout == f.layout &&
                 fk.other_bits == 0));
          int bad = 0;
          for (int row = 0; row < o.rows; ++row)
            for (int k = 0; k < 32; ++k) {
              const std::uint32_t address = descriptor_address(dk, row, k);
              const bool in_stage = address >= stage && address < stage + static_cast<std::uint32_t>(C::kStageBytes);
              const int found = in_stage ? owners[address - stage] : -2;
              const int wanted = owner(o.operand, o.first_row + row, 32 * kk + k);
              if (found != wanted && bad++ < 5) {
                INFO("element (row " << o.first_row + row << ", k " << 32 * kk + k << ") read at shared " << address
                                     << ", which holds row " << (found >> 8 & 0xFFF) << " k " << (found & 0xFF)
                                     << " of operand " << (found >> 20));
                CHECK(false);
              }
            }
          CHECK(bad == 0);
        }
      }
    }
  }
}

// The whole grid of gemm_int8_wgmma_kernel: stages filled by load_tile, each warpgroup's 4 wgmma per k-tile read
// through the descriptor model, D handed out by the PTX rule and stored through the kernel's epilogue mapping.
std::vector<std::int32_t> replay_wgmma(const Problem& p, int per_split) {
  using C = i8::WgmmaConfig;
  const int tiles_m = (p.m + C::kBM - 1) / C::kBM, tiles_n = (p.n + C::kBN - 1) / C::kBN;
  const int k_tiles = (p.k + C::kBK - 1) / C::kBK;
  const int splits = (k_tiles + per_split - 1) / per_split;
  std::vector<std::int32_t> out(static_cast<std::size_t>(p.m * p.n), 0);
  std::vector<int> writes(out.size(), 0);
  constexpr std::uint32_t kStart = 528;  // where the dynamic shared memory starts: not 1024-aligned
  const std::uint32_t base = i8::align_1024(kStart);
  for (int z = 0; z < splits; ++z)
    for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
      const i8::TileCoord tile = i8::grouped_tile(linear, tiles_m, tiles_n);
      const int m0 = tile.m * C::kBM, n0 = tile.n * C::kBN;
      const i8::KRange range = i8::split_k_range(k_tiles, per_split, z);
      std::vector<std::int32_t> d(2 * 64 * C::kBN, 0);  // per warpgroup, D[64][128]
      for (int k_tile = range.begin; k_tile < range.end; ++k_tile) {
        const int s = i8::StageRing<C::kStages>::stage_of(k_tile - range.begin);
        const std::uint32_t stage_address = base + i8::stage_offset<C>(s);
        Stage stage(C::kStageBytes);
        fill_tile<C::kBM, C::kBK, C::kThreads>(stage, 0, stage_address, p.x, m0, p.ldx, std::min(p.m - m0, C::kBM),
                                               k_tile * C::kBK, p.k);
        fill_tile<C::kBN, C::kBK, C::kThreads>(stage, C::kTileBytesA, stage_address, p.w, n0, p.ldw,
                                               std::min(p.n - n0, C::kBN), k_tile * C::kBK, p.k);
        const auto read = [&](std::uint32_t address) {
          REQUIRE((address >= stage_address && address < stage_address + static_cast<std::uint32_t>(C::kStageBytes)));
          return static_cast<std::int8_t>(stage.bytes[address - stage_address]);
        };
        for (int g = 0; g < 2; ++g) {
          const std::uint64_t a = i8::wgmma_descriptor(stage_address + i8::wgmma_a_offset<C>(g));
          const std::uint64_t b = i8::wgmma_descriptor(stage_address + i8::wgmma_b_offset<C>());
          for (int kk = 0; kk < C::kBK / 32; ++kk) {
            const std::uint64_t ak = i8::descriptor_at_k(a, kk), bk = i8::descriptor_at_k(b, kk);
            std::int8_t tile_a[64][32], tile_b[C::kBN][32];
            for (int row = 0; row < 64; ++row)
              for (int k = 0; k < 32; ++k) tile_a[row][k] = read(descriptor_address(ak, row, k));
            for (int row = 0; row < C::kBN; ++row)
              for (int k = 0; k < 32; ++k) tile_b[row][k] = read(descriptor_address(bk, row, k));
            for (int row = 0; row < 64; ++row)
              for (int col = 0; col < C::kBN; ++col) {
                std::int32_t sum = 0;
                for (int k = 0; k < 32; ++k) sum += tile_a[row][k] * tile_b[col][k];
                d[static_cast<std::size_t>((g * 64 + row) * C::kBN + col)] += sum;
              }
          }
        }
      }
      // Registers by the PTX rule, stored through the kernel's mapping (store_pair at d[4j], d[4j + 2]).
      for (int thread = 0; thread < C::kThreads; ++thread) {
        const int g = thread / 128, warp = thread / 32 % 4, lane = thread % 32;
        for (int i = 0; i < C::kBN / 2; ++i) {
          const int ptx_row = 16 * warp + lane / 4 + 8 * (i / 2 % 2), ptx_col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
          const std::int32_t value = d[static_cast<std::size_t>((g * 64 + ptx_row) * C::kBN + ptx_col)];
          const int row = i8::wgmma_accumulator_row(m0 + g * 64, warp, lane, i - i % 2);
          const int col = i8::wgmma_accumulator_col(n0, lane, i - i % 2) + i % 2;
          CHECK(row == i8::wgmma_accumulator_row(m0 + g * 64, warp, lane, i));
          CHECK(col == i8::wgmma_accumulator_col(n0, lane, i));
          if (row >= p.m || col >= p.n) continue;
          out[static_cast<std::size_t>(row * p.n + col)] += value;
          ++writes[static_cast<std::size_t>(row * p.n + col)];
        }
      }
    }
  for (std::size_t e = 0; e < writes.size(); ++e) {
    INFO("output " << e / static_cast<std::size_t>(p.n) << ", " << e % static_cast<std::size_t>(p.n));
    REQUIRE(writes[e] == splits);
  }
  return out;
}

TEST_CASE("int8 wgmma kernel arithmetic, replayed with the PTX descriptor and fragment rules, gives X · Wᵀ", "[host]") {
  for (auto [m, n, k, per_split] :
       std::vector<std::tuple<int, int, int, int>>{{130, 200, 272, 100}, {1, 129, 144, 100}, {70, 64, 400, 2}}) {
    const Problem p = make_problem(m, n, k, static_cast<std::uint32_t>(m + n + k));
    check_product(p, replay_wgmma(p, per_split), "wgmma, k-tiles per split " + std::to_string(per_split));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// c. stage rings

// One thread's view of a cp.async ring (every thread runs the same schedule, so one stands for all, the barriers
// joining them). Records each violation as a sentence.
class RingModel {
 public:
  RingModel(int stages, int tiles)
      : stages_(stages),
        stage_tile_(static_cast<std::size_t>(stages), -1),
        read_barrier_(static_cast<std::size_t>(stages), -1),
        tile_group_(static_cast<std::size_t>(tiles), -1),
        reads_(static_cast<std::size_t>(tiles), 0),
        loads_(static_cast<std::size_t>(tiles), 0) {}

  void load(int tile, int stage) {
    if (stage < 0 || stage >= stages_) return fail("tile " + str(tile) + " loaded into stage " + str(stage));
    const int old = stage_tile_[index(stage)];
    if (old >= 0 && reads_[index(old)] == 0)
      fail("tile " + str(tile) + " loaded into stage " + str(stage) + " before tile " + str(old) + " was read there");
    if (old >= 0 && !(barriers_ > read_barrier_[index(stage)]))
      fail("tile " + str(tile) + " loaded into stage " + str(stage) + " with no barrier after the reads of tile " +
           str(old));
    stage_tile_[index(stage)] = tile;
    tile_group_[index(tile)] = static_cast<int>(groups_.size());  // the group the next commit closes
    ++loads_[index(tile)];
  }
  void commit() { groups_.push_back(Group{}); }
  void wait(int pending) {  // all but the `pending` most recent committed groups complete
    for (std::size_t g = 0; g + static_cast<std::size_t>(pending) < groups_.size(); ++g) groups_[g].landed = true;
  }
  void barrier() {
    ++barriers_;
    for (Group& g : groups_) g.visible = g.visible || g.landed;
  }
  // A read of `tile` from `stage` that ends at once (ldmatrix) or at a later wgmma wait (read_end).
  void read_begin(int tile, int stage) {
    if (tile != next_read_) fail("tile " + str(tile) + " read when tile " + str(next_read_) + " was due");
    check_holds(tile, stage, "read");
    const int group = tile_group_[index(tile)];
    if (group < 0 || static_cast<std::size_t>(group) >= groups_.size() || !groups_[index(group)].visible)
      fail("tile " + str(tile) + " read from stage " + str(stage) + " before its copy group " + str(group) +
           " had landed and passed a barrier");
  }
  void read_end(int tile, int stage) {
    check_holds(tile, stage, "still read");
    read_barrier_[index(stage)] = barriers_;
    ++reads_[index(tile)];
    ++next_read_;
  }
  void finish() {
    for (std::size_t t = 0; t < reads_.size(); ++t)
      if (reads_[t] != 1 || loads_[t] != 1)
        fail("tile " + str(static_cast<int>(t)) + " loaded " + str(loads_[t]) + " and read " + str(reads_[t]) +
             " times");
  }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  struct Group {
    bool landed = false, visible = false;
  };
  static std::string str(int v) { return std::to_string(v); }
  static std::size_t index(int v) { return static_cast<std::size_t>(v); }
  void fail(const std::string& what) { errors_.push_back(what); }
  void check_holds(int tile, int stage, const char* verb) {
    if (stage < 0 || stage >= stages_ || stage_tile_[index(stage)] != tile)
      fail("tile " + str(tile) + " " + verb + " from stage " + str(stage) + ", which holds tile " +
           str(stage >= 0 && stage < stages_ ? stage_tile_[index(stage)] : -1));
  }

  int stages_;
  std::vector<int> stage_tile_, read_barrier_, tile_group_, reads_, loads_;
  std::vector<Group> groups_;
  int barriers_ = 0, next_read_ = 0;
  std::vector<std::string> errors_;
};

// The pipelined kernels' loop (gemm_int8_mma_kernel, gemm_int8_wgmma_kernel, gemm_sparse24_kernel), over their
// StageRing: prologue loads and commits, then per tile wait, [fence.proxy.async,] barrier, load ahead, commit, read
// (ldmatrix; wgmma reads until its wait_group 0, before the next barrier).
template <class Ring>
RingModel run_ring(int stages, int tiles, int pending_override = -1) {
  RingModel ring(stages, tiles);
  for (int s = 0; s < Ring::kPrologueTiles; ++s) {
    if (s < tiles) ring.load(s, Ring::stage_of(s));
    ring.commit();
  }
  for (int t = 0; t < tiles; ++t) {
    ring.wait(pending_override >= 0 ? pending_override : Ring::kPendingAtWait);
    ring.barrier();
    const int ahead = Ring::tile_loaded_at(t);
    if (ahead < tiles) ring.load(ahead, Ring::stage_of(ahead));
    ring.commit();
    ring.read_begin(t, Ring::stage_of(t));
    ring.read_end(t, Ring::stage_of(t));
  }
  ring.wait(0);
  ring.finish();
  return ring;
}

std::string joined(const std::vector<std::string>& errors) {
  std::string all;
  for (std::size_t i = 0; i < errors.size() && i < 5; ++i) all += errors[i] + "; ";
  return all;
}

template <class C>
void check_int8_ring(const char* name) {
  using Ring = i8::StageRing<C::kStages>;
  for (int tiles = 1; tiles <= 2 * C::kStages + 3; ++tiles) {
    const RingModel ring = run_ring<Ring>(C::kStages, tiles);
    INFO(name << " stages " << C::kStages << " tiles " << tiles << ": " << joined(ring.errors()));
    CHECK(ring.errors().empty());
  }
}

// The 2:4 kernel (gemm_sparse24_kernel) runs the same loop over the same StageRing, with its stage count.
template <class Config>
void check_nm_ring(const char* name) {
  for (int tiles = 1; tiles <= 2 * Config::kStages + 3; ++tiles) {
    const RingModel ring = run_ring<shrink::cuda::kernels::StageRing<Config::kStages>>(Config::kStages, tiles);
    INFO(name << " stages " << Config::kStages << " tiles " << tiles << ": " << joined(ring.errors()));
    CHECK(ring.errors().empty());
  }
}

// Rings with a fault: one stage too few in the modulus (refills the stage being read), or loads one tile too far.
template <int Stages>
struct ModulusTooSmall : i8::StageRing<Stages> {
  static constexpr int stage_of(int tile) { return tile % (Stages - 1); }
};
template <int Stages>
struct LoadsTooFarAhead : i8::StageRing<Stages> {
  static constexpr int tile_loaded_at(int iteration) { return iteration + Stages; }
};

TEST_CASE("cp.async stage rings: each tile is read from its stage after its group landed, no stage refilled early",
          "[host]") {
  namespace nm = shrink::cuda::kernels::linear_nm;
  check_int8_ring<i8::MmaLarge>("int8 mma 128x128");
  check_int8_ring<i8::MmaSmall>("int8 mma 32x64");
  check_int8_ring<i8::WgmmaConfig>("int8 wgmma");
  check_nm_ring<nm::Tile32x16>("2:4 32x16");
  check_nm_ring<nm::Tile64x64>("2:4 64x64");
  check_nm_ring<nm::Tile128x128>("2:4 128x128");

  // The model catches the faults it is there for.
  using Ring4 = i8::StageRing<4>;
  const RingModel waits_too_little = run_ring<Ring4>(4, 6, 3);  // wait_group Stages − 1
  CHECK_THAT(joined(waits_too_little.errors()), Catch::Matchers::Contains("before its copy group"));
  const RingModel refills_read_stage = run_ring<ModulusTooSmall<4>>(4, 6);
  CHECK_THAT(joined(refills_read_stage.errors()), Catch::Matchers::Contains("before tile 0 was read there"));
  const RingModel overwrites = run_ring<LoadsTooFarAhead<4>>(4, 9);
  CHECK_THAT(joined(overwrites.errors()),
             Catch::Matchers::Contains("tile 4 loaded into stage 0 before tile 0 was read there"));
  RingModel no_barrier(2, 3);  // a load into a stage right after its read, with no barrier between
  no_barrier.load(0, 0);
  no_barrier.commit();
  no_barrier.wait(0);
  no_barrier.barrier();
  no_barrier.read_begin(0, 0);
  no_barrier.read_end(0, 0);
  no_barrier.load(2, 0);
  CHECK_THAT(joined(no_barrier.errors()), Catch::Matchers::Contains("no barrier after the reads"));
  RingModel wrong_stage(2, 1);
  wrong_stage.load(0, 0);
  wrong_stage.commit();
  wrong_stage.wait(0);
  wrong_stage.barrier();
  wrong_stage.read_begin(0, 1);
  CHECK_THAT(joined(wrong_stage.errors()), Catch::Matchers::Contains("from stage 1, which holds tile -1"));
}

}  // namespace int8_layout_replay
