// CUDA realisation of prune/threshold.hpp's select_magnitude_threshold: a radix select over the bits of |w| in at most
// two reads of the weights (nvcc only; host-compiled callers use shrink/cuda/threshold.hpp).
//
// key: float: the float bits of |w| (sign cleared), below 2^31, two digits: bits [30:16] (32768 buckets), then [15:0]
// (65536) of the candidates whose top digit is the one chosen. half, bfloat16: their own 16 bits with the sign
// cleared, one 15-bit digit: these order exactly as the widened floats do (every float widened from 16 bits has
// zeros below, so its low digit would be moot) and the result reports the widened float's bits.
// Each pass is one launch over a list of up to kListCapacity tensors; each block counts into a privatised shared
// table of 16-bit counters (Counter: wraps are repaid in the global histogram, so counts stay exact), merged into
// the pass's 64-bit global histogram at the end.
// A one-block kernel then finds the bucket holding the remaining rank (the CPU's bucket_of_rank), so nothing waits
// for the host. State and histograms live in the caller's workspace, zeroed once per call. Pass 0 also flags NaN/inf
// anywhere, kept or not (kNonFinite); a rank above the candidates flags kBadRank. The result is bits, below, at,
// at_pruned, candidates exactly as the CPU computes them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/cuda/kernels/common/check.cuh"
#include "shrink/cuda/kernels/common/launch.cuh"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/threshold.hpp"
#include "shrink/prune/threshold.hpp"

namespace shrink::cuda::kernels {
namespace threshold {

// The select key of each weight type (see the file comment); raw: the element's bits (16-bit types in the low half).
template <class T>
struct KeyOf;
template <>
struct KeyOf<float> {
  static constexpr int digits = 2;
  static constexpr std::uint32_t nonfinite = 0x7F800000u;  // keys from here up are inf and NaN
  __host__ __device__ static std::uint32_t key(std::uint32_t raw) { return raw & 0x7FFFFFFFu; }
  __host__ __device__ static std::uint32_t float_bits(std::uint32_t key) { return key; }
};
template <>
struct KeyOf<half> {
  static constexpr int digits = 1;
  static constexpr std::uint32_t nonfinite = 0x7C00u;
  __host__ __device__ static std::uint32_t key(std::uint32_t raw) { return raw & 0x7FFFu; }
  __host__ __device__ static std::uint32_t float_bits(std::uint32_t key) {
    return shrink::float_to_bits(shrink::half_bits_to_float(static_cast<std::uint16_t>(key)));
  }
};
template <>
struct KeyOf<bfloat16> {
  static constexpr int digits = 1;
  static constexpr std::uint32_t nonfinite = 0x7F80u;
  __host__ __device__ static std::uint32_t key(std::uint32_t raw) { return raw & 0x7FFFu; }
  __host__ __device__ static std::uint32_t float_bits(std::uint32_t key) { return key << 16; }
};

constexpr int kHighBuckets = 1 << 15;  // digit 0: float key >> 16, or the whole 15-bit key of half and bfloat16
constexpr int kLowBuckets = 1 << 16;   // digit 1 (float only): key & 0xFFFF
template <int Pass>
constexpr int kBuckets = Pass == 0 ? kHighBuckets : kLowBuckets;

// Digit `Pass` of a key of type T.
template <class T, int Pass>
__device__ __forceinline__ std::uint32_t digit(std::uint32_t key) {
  if constexpr (Pass == 1) return key & 0xFFFFu;
  else return KeyOf<T>::digits == 2 ? key >> 16 : key;
}

// Select state (in the workspace after the status word), written by the bucket choice of pass 0 for pass 1.
struct SelectState {
  unsigned long long candidates;
  long long below;  // candidates below the chosen top bucket
  long long rank;   // 1-based rank still to find within it
  std::uint32_t prefix;  // the chosen top bucket
  int done;              // 1 when k = 0 or k exceeds the candidates: pass 1 is moot
};

// Workspace layout after the status word: the state, then the histograms of the two passes.
constexpr std::size_t kStateOffset = kStatusBytes;
constexpr std::size_t kHistogramOffset[2] = {kStatusBytes + 48, kStatusBytes + 48 + kHighBuckets * 8};
constexpr std::size_t kWorkspaceBytes = kHistogramOffset[1] + kLowBuckets * sizeof(unsigned long long);
static_assert(sizeof(SelectState) <= 48, "the select state fits its slot");
static_assert(kHistogramOffset[0] % 16 == 0 && kHistogramOffset[1] % 16 == 0, "histograms are read 16 bytes a load");

// One tensor of a launch: `vectors` 16-byte loads from data (0 when data is not 16-byte aligned), then elements
// [vectors * lanes, n) one at a time.
template <class T>
struct TensorEntry {
  const T* data;
  std::int64_t n;
  std::int64_t vectors;
  const std::uint64_t* current;  // mask words; nullptr: every element is a candidate
};
constexpr int kListCapacity = 64;
template <class T>
struct TensorList {
  TensorEntry<T> entry[kListCapacity];
  int count;
};
static_assert(sizeof(TensorList<float>) <= 4000, "a tensor list fits the classic 4 KB of kernel parameters");

constexpr int kCountThreads = 1024;
constexpr int kUnroll = 4;  // 16-byte loads in flight a thread: 64 KiB an SM at one block of 1024 threads
constexpr unsigned kFullWarp = 0xFFFFFFFFu;
// Fewest elements a counting block is given: below this, zeroing and merging its table costs about as much as
// counting (a table is 16K or 32K words, 16 or 32 a thread).
constexpr std::int64_t kMinElementsPerBlock = std::int64_t{1} << 17;

template <class T>
constexpr int kLanes = 16 / static_cast<int>(sizeof(T));  // elements a 16-byte load

__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_threads() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ unsigned warp_sum(unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  return __reduce_add_sync(kFullWarp, value);
#else
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(kFullWarp, value, offset);
  return value;
#endif
}

// Raw bits of element l of a 16-byte load (l is a constant once the callers' loops unroll).
template <class T>
__device__ __forceinline__ std::uint32_t raw_bits(const uint4& v, int l) {
  const int word = sizeof(T) == 4 ? l : l / 2;
  const std::uint32_t w = word == 0 ? v.x : word == 1 ? v.y : word == 2 ? v.z : v.w;
  if constexpr (sizeof(T) == 4) return w;
  else return (l % 2 == 0 ? w : w >> 16) & 0xFFFFu;
}

// The bits of *p through the read-only data path.
template <class T>
__device__ __forceinline__ std::uint32_t load_raw(const T* p) {
  if constexpr (sizeof(T) == 4) return __ldg(reinterpret_cast<const unsigned int*>(p));
  else return __ldg(reinterpret_cast<const unsigned short*>(p));
}

// A block's shared table of the window's buckets, 16-bit counters two a word (bucket b: word b / 2, the low half
// when b is even), and the pass's global histogram from the window's first bucket on.
struct Counter {
  std::uint32_t* table;
  unsigned long long* global;

  // count <= 65535 (at most 32 lanes of 8 elements here). The global fix-ups make table + global exact: a counter's
  // wrap loses 65536 from the table; a low counter's wrap also carries 1 into its high neighbour, which may wrap it.
  __device__ __forceinline__ void add(std::uint32_t bucket, std::uint32_t count) const {
    const bool high = bucket & 1u;
    const std::uint32_t old = atomicAdd(&table[bucket >> 1], high ? count << 16 : count);
    if (high) {
      if ((old >> 16) + count > 0xFFFFu) atomicAdd(&global[bucket], 0x10000ull);
    } else if ((old & 0xFFFFu) + count > 0xFFFFu) {
      atomicAdd(&global[bucket], 0x10000ull);
      // The carry: -1 (mod 2^64), plus 65536 when it wrapped the high counter too.
      atomicAdd(&global[bucket + 1], (old >> 16) == 0xFFFFu ? 0xFFFFull : ~0ull);
    }
  }

  // After the block's last add: the table into the global histogram.
  __device__ void merge(std::uint32_t words) const {
    for (std::uint32_t w = threadIdx.x; w < words; w += blockDim.x) {
      const std::uint32_t v = table[w];
      if (v & 0xFFFFu) atomicAdd(&global[2 * w], static_cast<unsigned long long>(v & 0xFFFFu));
      if (v >> 16) atomicAdd(&global[2 * w + 1], static_cast<unsigned long long>(v >> 16));
    }
  }
};

// Rounds of warp-wide aggregation before each lane adds its own elements: two cover all-equal weights, two-valued
// ones (ternary quantization's 0 and a) and, most of the time, the zeros of sparse weights.
constexpr int kWarpRounds = 2;

// Counts the lane's L elements whose bit is set in `counted` into their buckets. Every lane of the warp calls it
// (warp-wide votes). Each round, the first counted element of the first lane with one names a bucket, and the
// warp's elements in it go in with one add; then each lane adds its remaining runs of equal buckets. Without the
// rounds, equal magnitudes would make 32 lanes add to one shared word at once, one after the other.
template <int L>
__device__ __forceinline__ void count_elements(const Counter& counter, const std::uint32_t (&bucket)[L],
                                               unsigned counted) {
  const int lane = static_cast<int>(threadIdx.x % 32);
#pragma unroll
  for (int round = 0; round < kWarpRounds; ++round) {
    const unsigned lanes = __ballot_sync(kFullWarp, counted != 0);
    if (lanes == 0) return;  // the same for every lane
    std::uint32_t first = 0;
#pragma unroll
    for (int l = L - 1; l >= 0; --l)
      if ((counted >> l) & 1u) first = bucket[l];
    const int leader = __ffs(lanes) - 1;
    const std::uint32_t lead = __shfl_sync(kFullWarp, first, leader);
    unsigned same = 0;
#pragma unroll
    for (int l = 0; l < L; ++l) same |= static_cast<unsigned>(((counted >> l) & 1u) && bucket[l] == lead) << l;
    const unsigned total = warp_sum(static_cast<unsigned>(__popc(same)));  // >= 1: the leader's first
    if (lane == leader) counter.add(lead, total);
    counted &= ~same;
  }
  std::uint32_t run_bucket = 0, run = 0;
#pragma unroll
  for (int l = 0; l < L; ++l)
    if ((counted >> l) & 1u) {
      if (run != 0 && bucket[l] != run_bucket) {
        counter.add(run_bucket, run);
        run = 0;
      }
      run_bucket = bucket[l];
      ++run;
    }
  if (run != 0) counter.add(run_bucket, run);
}

// What a pass counts: the candidates (of pass 1: those whose top digit is `prefix`) whose digit lies in the window
// [begin, begin + buckets).
struct Window {
  std::uint32_t prefix;
  std::uint32_t begin;
  std::uint32_t buckets;
};

// One pass over `units` units of L elements (L = kLanes<T>: 16-byte loads from the aligned `x`; L = 1: elements
// from x[first] on), the first unit of this warp's being `start` (a rotation of the warps, so that short tensors
// spread over the grid). Warps walk tiles of 32 * kUnroll units, all lanes together (the loop bound is the warp's):
// kUnroll loads in flight a lane, then counting. max_key: the largest key seen, counted or not (pass 0's checks).
template <class T, int Pass, int L>
__device__ void count_units(const T* __restrict__ x, std::int64_t first, std::int64_t units,
                            const std::uint64_t* __restrict__ current, std::int64_t start, const Window& window,
                            const Counter& counter, std::uint32_t& max_key) {
  constexpr std::int64_t kTile = 32 * kUnroll;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::int64_t warps = grid_threads() / 32;
  const std::int64_t warp = (global_thread() / 32 + warps - start) % warps;
  for (std::int64_t tile = warp * kTile; tile < units; tile += warps * kTile) {
    uint4 v[kUnroll];
    std::uint32_t keep[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t unit = tile + u * 32 + lane;
      v[u] = make_uint4(0u, 0u, 0u, 0u);
      keep[u] = 0;
      if (unit < units) {
        if constexpr (L > 1) v[u] = __ldg(reinterpret_cast<const uint4*>(x) + unit);
        else v[u].x = load_raw(x + first + unit);
        const std::int64_t e = first + unit * L;  // L divides 64: a unit's elements share one mask word
        const std::uint64_t word = current == nullptr ? ~std::uint64_t{0} : __ldg(current + (e >> 6)) >> (e & 63);
        keep[u] = static_cast<std::uint32_t>(word) & ((1u << L) - 1u);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      std::uint32_t bucket[L];
      unsigned counted = 0;
#pragma unroll
      for (int l = 0; l < L; ++l) {
        const std::uint32_t key = KeyOf<T>::key(L > 1 ? raw_bits<T>(v[u], l) : v[u].x);
        if (Pass == 0) max_key = max_key > key ? max_key : key;
        bucket[l] = digit<T, Pass>(key) - window.begin;
        const bool in =
            ((keep[u] >> l) & 1u) && (Pass == 0 || (key >> 16) == window.prefix) && bucket[l] < window.buckets;
        counted |= static_cast<unsigned>(in) << l;
      }
      count_elements<L>(counter, bucket, counted);
    }
  }
}

// Histogram of digit `Pass` over the candidates of every tensor in `list`, restricted to one window of buckets
// (the whole digit when the device's shared memory holds it). Dynamic shared memory: window.buckets * 2 bytes.
template <class T, int Pass>
__global__ void __launch_bounds__(kCountThreads)
    count_kernel(const __grid_constant__ TensorList<T> list, const SelectState* __restrict__ state,
                 std::uint32_t window_begin, std::uint32_t window_buckets, unsigned long long* __restrict__ histogram,
                 int* __restrict__ status) {
  extern __shared__ std::uint32_t table[];
  if (Pass == 1 && state->done) return;  // the same for every thread
  const Window window{Pass == 1 ? state->prefix : 0u, window_begin, window_buckets};
  const std::uint32_t words = window_buckets / 2;
  for (std::uint32_t w = threadIdx.x; w < words; w += blockDim.x) table[w] = 0;
  __syncthreads();  // the table is zero before any add
  const Counter counter{table, histogram + window_begin};
  std::uint32_t max_key = 0;
  const std::int64_t warps = grid_threads() / 32;
  std::int64_t start = 0;  // the warp that takes the next tensor's first tile
  for (int s = 0; s < list.count; ++s) {
    const TensorEntry<T> e = list.entry[s];
    constexpr int L = kLanes<T>;
    count_units<T, Pass, L>(e.data, 0, e.vectors, e.current, start, window, counter, max_key);
    start = (start + (e.vectors + 32 * kUnroll - 1) / (32 * kUnroll)) % warps;
    const std::int64_t rest = e.n - e.vectors * L;
    count_units<T, Pass, 1>(e.data, e.vectors * L, rest, e.current, start, window, counter, max_key);
    start = (start + (rest + 32 * kUnroll - 1) / (32 * kUnroll)) % warps;
  }
  // Barrier: every add to the table is done before the merge reads it.
  const int nonfinite = __syncthreads_or(Pass == 0 && max_key >= KeyOf<T>::nonfinite);
  if (nonfinite && threadIdx.x == 0) atomicOr(status, kNonFinite);
  counter.merge(words);
}

constexpr int kChooseThreads = 1024;

// One block of kChooseThreads: the bucket of digit `Pass` holding the remaining rank, as bucket_of_rank (the first
// bucket whose running count reaches it). Thread t owns kPerThread consecutive buckets; an inclusive scan of the
// owners' sums finds the one thread whose range reaches the rank (the rank lies in [1, the histogram's total]: k in
// [1, candidates] in pass 0, then at most the count of the top bucket chosen); warp 0 then scans that thread's
// buckets. Pass 0 writes the state for pass 1, or the result when the key has one digit; pass 1 the result. k = 0
// or k above the candidates ends the select in pass 0 (the latter flags kBadRank).
template <class T, int Pass>
__global__ void __launch_bounds__(kChooseThreads)
    choose_bucket_kernel(const unsigned long long* __restrict__ histogram, SelectState* state, long long k,
                         prune::MagnitudeThreshold* result, int* status) {
  constexpr int kPerThread = kBuckets<Pass> / kChooseThreads;
  constexpr int kPerLane = kPerThread / 32;
  static_assert(kPerThread * kChooseThreads == kBuckets<Pass> && kPerLane * 32 == kPerThread && kPerLane <= 2,
                "the threads, then the lanes of one warp, share the buckets evenly");
  constexpr bool kLast = Pass == KeyOf<T>::digits - 1;
  __shared__ long long running[kChooseThreads];
  __shared__ int owner;
  __shared__ long long owner_before;
  const int t = static_cast<int>(threadIdx.x);
  if (Pass == 1 && state->done) return;  // the same for every thread
  const long long rank = Pass == 0 ? k : state->rank;
  if (t == 0) owner = -1;
  long long mine = 0;
  const auto* pairs = reinterpret_cast<const ulonglong2*>(histogram + t * kPerThread);
#pragma unroll 4
  for (int j = 0; j < kPerThread / 2; ++j) {
    const ulonglong2 p = pairs[j];
    mine += static_cast<long long>(p.x) + static_cast<long long>(p.y);
  }
  running[t] = mine;
  __syncthreads();
  for (int offset = 1; offset < kChooseThreads; offset <<= 1) {  // inclusive scan of the owners' sums
    const long long below = t >= offset ? running[t - offset] : 0;
    __syncthreads();
    running[t] += below;
    __syncthreads();
  }
  const long long total = running[kChooseThreads - 1];
  if (Pass == 0 && (k == 0 || k > total)) {  // the same for every thread
    if (t == 0) {
      state->candidates = static_cast<unsigned long long>(total);
      state->done = 1;
      if (k > total) atomicOr(status, kBadRank);
      prune::MagnitudeThreshold r;
      r.candidates = total;
      *result = r;
    }
    return;
  }
  if (running[t] - mine < rank && rank <= running[t]) {  // exactly one thread
    owner = t;
    owner_before = running[t] - mine;
  }
  __syncthreads();
  if (t >= 32 || owner < 0) return;  // owner < 0 only if the weights changed between the passes
  const int lane = t;
  const int first_bucket = owner * kPerThread + lane * kPerLane;
  long long count[kPerLane];
  long long lane_sum = 0;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    count[i] = static_cast<long long>(histogram[first_bucket + i]);
    lane_sum += count[i];
  }
  long long inclusive = lane_sum;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const long long below = __shfl_up_sync(kFullWarp, inclusive, offset);
    if (lane >= offset) inclusive += below;
  }
  const unsigned reach = __ballot_sync(kFullWarp, owner_before + inclusive >= rank);
  if (reach == 0 || lane != __ffs(reach) - 1) return;
  long long before = owner_before + inclusive - lane_sum;  // candidates below this lane's first bucket
  int bucket = first_bucket;
  long long at = count[0];
  if (kPerLane == 2 && before + count[0] < rank) {
    before += count[0];
    bucket += 1;
    at = count[kPerLane - 1];
  }
  if (!kLast) {
    state->candidates = static_cast<unsigned long long>(total);
    state->below = before;
    state->rank = rank - before;
    state->prefix = static_cast<std::uint32_t>(bucket);
    state->done = 0;
    return;
  }
  prune::MagnitudeThreshold r;
  if (Pass == 0) {
    r.candidates = total;
    r.bits = KeyOf<T>::float_bits(static_cast<std::uint32_t>(bucket));
    r.below = before;
  } else {
    r.candidates = static_cast<std::int64_t>(state->candidates);
    r.bits = (state->prefix << 16) | static_cast<std::uint32_t>(bucket);
    r.below = state->below + before;
  }
  r.at = at;
  r.at_pruned = k - r.below;
  *result = r;
}

// How one pass launches on the current device: blocks, and the window of buckets one launch counts (the whole digit
// when its table fits the opt-in shared memory: 64 KiB or 128 KiB, under sm_80's 163 KiB and sm_90's 227 KiB; else
// halves, quarters... one launch each).
struct CountLaunch {
  unsigned blocks = 0;
  std::uint32_t window_buckets = 0;
  std::size_t shared_bytes = 0;
};

// Configures count_kernel<T, Pass> for `elements` elements (the most one launch of a list counts); throws
// shrink::Error when it cannot run here. No stream work: safe before anything is enqueued.
template <class T, int Pass>
CountLaunch count_launch(std::int64_t elements, const char* fn) {
  int device = 0, multiprocessors = 0, optin = 0;
  SHRINK_CUDA_CHECK(cudaGetDevice(&device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, device));
  SHRINK_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CountLaunch launch;
  launch.window_buckets = kBuckets<Pass>;
  while (launch.window_buckets > 64 && launch.window_buckets * 2 > static_cast<std::uint32_t>(optin))
    launch.window_buckets /= 2;  // 2 bytes a bucket
  launch.shared_bytes = launch.window_buckets * 2;
  SHRINK_CUDA_CHECK(cudaFuncSetAttribute(count_kernel<T, Pass>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(launch.shared_bytes)));
  int per_multiprocessor = 0;
  SHRINK_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_multiprocessor, count_kernel<T, Pass>,
                                                                  kCountThreads, launch.shared_bytes));
  if (per_multiprocessor < 1)
    fail(fn, "the current device has no room for one counting block of " + std::to_string(kCountThreads) +
                 " threads and " + std::to_string(launch.shared_bytes) + " bytes of shared memory");
  const std::int64_t cap = static_cast<std::int64_t>(multiprocessors) * per_multiprocessor;
  const std::int64_t wanted = (elements + kMinElementsPerBlock - 1) / kMinElementsPerBlock;
  launch.blocks = static_cast<unsigned>(wanted < 1 ? 1 : (wanted < cap ? wanted : cap));
  return launch;
}

// Enqueues pass `Pass` over `list`: one launch a window.
template <class T, int Pass>
void count(const TensorList<T>& list, const CountLaunch& launch, const SelectState* state,
           unsigned long long* histogram, int* status, cudaStream_t stream) {
  for (std::uint32_t begin = 0; begin < static_cast<std::uint32_t>(kBuckets<Pass>); begin += launch.window_buckets) {
    count_kernel<T, Pass><<<launch.blocks, kCountThreads, launch.shared_bytes, stream>>>(
        list, state, begin, launch.window_buckets, histogram, status);
    SHRINK_CUDA_CHECK_LAUNCH(count_kernel);
  }
}

template <class T, int Pass>
void choose_bucket(const unsigned long long* histogram, SelectState* state, long long k,
                   prune::MagnitudeThreshold* result, int* status, cudaStream_t stream) {
  choose_bucket_kernel<T, Pass><<<1, kChooseThreads, 0, stream>>>(histogram, state, k, result, status);
  SHRINK_CUDA_CHECK_LAUNCH(choose_bucket_kernel);
}

}  // namespace threshold
}  // namespace shrink::cuda::kernels
