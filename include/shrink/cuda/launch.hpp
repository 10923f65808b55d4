// Launch conventions shared by every host-callable CUDA operation of shrink::cuda (plain C++, no CUDA headers):
// the stream, the caller-owned workspace, the status word its first bytes hold, and when the host looks at it.
//
// Two phases, as CUB: each operation has a workspace_bytes(...) query; the caller gives that much device memory
// (16-byte aligned) to the call, which enqueues on `stream`, allocates nothing and returns at once. Arguments are
// checked on the host before any CUDA call (shrink::Error). Values that live on the device (finite inputs, valid
// parameters) are checked by the kernels into the status word; the host reads it only when asked (Synchronize::yes,
// or check_status later), because reading it waits for the stream.
#pragma once

#include <cstddef>

struct CUstream_st;  // cudaStream_t is CUstream_st*; 0 is the legacy default stream

namespace shrink::cuda {

using Stream = ::CUstream_st*;

// Caller-owned device scratch memory of at least the operation's workspace_bytes(...), 16-byte aligned.
struct Workspace {
  void* data = nullptr;
  std::size_t bytes = 0;
};

enum class Synchronize : bool { no, yes };

// The status word: one int at the start of every workspace, padded to 16 bytes so what follows stays aligned.
inline constexpr std::size_t kStatusBytes = 16;

// Bits kernels or into the status word; check_status names each one set.
enum StatusFlag : int {
  kNonFinite = 1,     // an input held NaN or inf (losses: NaN, +inf, or a logit row with no finite entry)
  kBadScale = 2,      // a scale was not finite and > 0
  kBadZeroPoint = 4,  // a zero point lay outside [qmin, qmax]
  kOverfullNmGroup = 8,  // a group of an N:M mask kept more than n
  kBadRank = 16,         // a rank k exceeded the candidates counted on the device
  kBadIndex = 32,        // an index out of range or out of order: CSR offsets or columns, a label, a class target, a
                         // top-k index (also: repeated within a row)
  kCapacity = 64,        // more elements to write than the output holds (a capacity, or int32 CSR offsets)
  kBadTailMass = 128,    // a top-k teacher's tail mass outside [0, 1)
};

// Waits for `stream`, then throws shrink::Error naming the failed device-side checks of the last call that used
// `workspace`, if any.
void check_status(Workspace workspace, Stream stream, const char* function = "shrink::cuda::check_status");

}  // namespace shrink::cuda
