// Host API of the CUDA soft-target distillation losses (compiled in cuda/soft_target.cu; plain C++, no CUDA headers):
// kl_div, reverse_kl_div and jensen_shannon at a temperature, each with or without its gradient to the student.
//
// The same function as distill/soft_target.hpp, term for term: per row q = softmax(z_s / T), p = softmax(z_t / T),
//   kl_div T^2 KL(p || q),  reverse_kl_div T^2 KL(q || p),  jensen_shannon T^2 (beta KL(p || m) + (1 - beta) KL(q || m)),
// the reductions, row masks, grad_scale and accumulate of distill/reduction.hpp, -inf logits as probability 0 (a loss
// of +inf where the first distribution has mass the second lacks), beta = 0 or 1 giving 0. Values match the CPU's
// within 1e-5 relative (float arithmetic, row sums in double); gradients within 1e-5 of the row's largest plus one
// rounding to the element type (the exps differ from the CPU's in the last bits).
//
// Fused (device code: shrink/cuda/kernels/soft_target.cuh): one online-softmax pass per row gathers the maxes, the
// sums of both softmaxes and the cross term together, and the gradient is written by the same kernel; extra memory
// is O(rows). How a row is held: SoftTargetPath below (generic, shared_row, cluster on sm_90).
//
// Two phases, as CUB: soft_target_workspace_bytes(rows), then the call, which enqueues on `stream`, allocates nothing
// and returns at once. Host checks throw shrink::Error before any CUDA call (and nothing is written). Device checks go
// to the status word: NaN or +inf in a kept row, or a kept row with no finite logit, sets kNonFinite; that row's loss
// is NaN and the gradient contents are unspecified. Synchronize::yes (or check_status later) waits and throws naming
// the failure. Results are deterministic: the same inputs give the same bits, run after run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cuda/launch.hpp"
#include "shrink/cuda/loss.hpp"
#include "shrink/distill/reduction.hpp"

namespace shrink::cuda {

// Losses go to a DeviceLoss (shrink/cuda/loss.hpp): the reduced value and, optionally, one double per row.

// How a row is held while its gradient is written. For testing and tuning: automatic picks one (see soft_target_plan);
// forcing a path this device or row length cannot run throws shrink::Error saying why.
enum class SoftTargetPath {
  automatic,
  generic,     // any length, any device: the row is read twice (statistics, then gradient)
  shared_row,  // student + teacher rows fit one CTA's shared memory: read once
  cluster,     // sm_90: a cluster of 2..8 CTAs holds the row pair in their shared memory: read once
};

const char* to_string(SoftTargetPath path);

// As distill::SoftTargetOptions, with a device row mask and no validate_first (the device checks every kept row).
struct SoftTargetOptions {
  float temperature = 1.0f;                              // T > 0, finite
  distill::Reduction reduction = distill::Reduction::batchmean;
  double grad_scale = 1.0;                               // the upstream gradient: grad = grad_scale * dloss/dz
  bool accumulate = false;                               // add to grad_student instead of overwriting it
  TensorView<const std::uint8_t> row_mask{};             // optional, device memory: one byte per row, 0 = absent
  SoftTargetPath path = SoftTargetPath::automatic;       // for testing and tuning
  int cluster_size = 0;                                  // cluster path: CTAs per row in [2, 8]; 0 = chosen
};

// The losses soft_target_plan is asked about.
enum class SoftTargetLoss { kl_div, reverse_kl_div, jensen_shannon };

// The longest row (V) accepted: column indices are 32-bit in the kernels.
inline constexpr std::int64_t kMaxSoftTargetColumns = std::int64_t{1} << 30;

// Workspace of every call below on `rows` rows: the status word, the kept-row count, one double per row.
std::size_t soft_target_workspace_bytes(std::int64_t rows);

// What a call would run on the current device for rows of `columns` elements of T (CUTLASS's can_implement):
// the resolved path (never automatic), CTAs per row, threads per CTA, dynamic shared memory per CTA, and
// `unsupported`: empty when it can run, else why not (the message a forced path throws with).
struct SoftTargetPlan {
  SoftTargetPath path = SoftTargetPath::generic;
  int cluster_size = 1;
  int threads = 0;
  std::size_t shared_bytes = 0;
  std::string unsupported;
};

// T: float, half, bfloat16. Throws shrink::Error for columns outside [1, kMaxSoftTargetColumns] or a CUDA failure.
template <class T>
SoftTargetPlan soft_target_plan(SoftTargetLoss loss, std::int64_t columns, bool with_grad,
                                const SoftTargetOptions& options = {});

// Logits are [..., V] device views on the current device, flattened to rows of V: the last dimension contiguous, the
// leading ones one row stride apart (as distill's as_rows), student, teacher and grad_student each with its own.
// T: float, half, bfloat16; arithmetic in float.

// T^2 * KL(softmax(teacher / T) || softmax(student / T)), reduced.
template <class T>
void kl_div(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss loss, const SoftTargetOptions& options,
            Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

// kl_div and its gradient to the student logits, written to (or added to) grad_student.
template <class T>
void kl_div_with_grad(TensorView<const T> student, TensorView<const T> teacher, TensorView<T> grad_student,
                      DeviceLoss loss, const SoftTargetOptions& options, Workspace workspace, Stream stream,
                      Synchronize synchronize = Synchronize::no);

// T^2 * KL(softmax(student / T) || softmax(teacher / T)), reduced.
template <class T>
void reverse_kl_div(TensorView<const T> student, TensorView<const T> teacher, DeviceLoss loss,
                    const SoftTargetOptions& options, Workspace workspace, Stream stream,
                    Synchronize synchronize = Synchronize::no);

template <class T>
void reverse_kl_div_with_grad(TensorView<const T> student, TensorView<const T> teacher, TensorView<T> grad_student,
                              DeviceLoss loss, const SoftTargetOptions& options, Workspace workspace, Stream stream,
                              Synchronize synchronize = Synchronize::no);

// T^2 * (beta KL(p || m) + (1 - beta) KL(q || m)), m = beta p + (1 - beta) q; beta in [0, 1].
template <class T>
void jensen_shannon(TensorView<const T> student, TensorView<const T> teacher, double beta, DeviceLoss loss,
                    const SoftTargetOptions& options, Workspace workspace, Stream stream,
                    Synchronize synchronize = Synchronize::no);

template <class T>
void jensen_shannon_with_grad(TensorView<const T> student, TensorView<const T> teacher, double beta,
                              TensorView<T> grad_student, DeviceLoss loss, const SoftTargetOptions& options,
                              Workspace workspace, Stream stream, Synchronize synchronize = Synchronize::no);

}  // namespace shrink::cuda
