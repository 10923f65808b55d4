// How a distillation loss reduces its rows to one number, PyTorch's reductions, and the Loss it returns.
//
// A loss sees its inputs as rows: [B, L, V] logits (or [B, L, D] features) flatten to B*L rows of V (D).
// Rows masked out by a row mask, and cross-entropy rows whose label is ignore_index, are *absent*: they add
// nothing, their gradient is zero, and they are not counted below ("kept rows").
//
//   reduction   value                         PyTorch reference
//   none        one loss per kept row          the row sums of kl_div/mse_loss's elementwise 'none';
//                                              cross_entropy/cosine_embedding_loss's own per-row 'none'
//   sum         sum over kept rows             'sum'
//   mean        sum / (kept rows * V) for the elementwise losses (kl_div and its relatives, mse_loss),
//               sum / kept rows for the per-row ones (cross_entropy, cosine_embedding_loss)      'mean'
//   batchmean   sum / kept rows                kl_div's 'batchmean' (the mathematically right KL mean)
//
// With none, the gradient written is that of the sum of the per-row losses (autograd's backward of
// loss.sum()); every gradient is then multiplied by the caller's grad_scale (the upstream gradient).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace shrink::distill {

enum class Reduction { none, sum, mean, batchmean };

inline const char* to_string(Reduction r) {
  switch (r) {
    case Reduction::none: return "none";
    case Reduction::sum: return "sum";
    case Reduction::mean: return "mean";
    case Reduction::batchmean: return "batchmean";
  }
  return "?";
}

// The result of a loss.
struct Loss {
  double value = 0.0;           // the reduced loss; with Reduction::none, the sum of per_row
  std::vector<double> per_row;  // Reduction::none only: one loss per row, 0 for absent rows; empty otherwise
};

// What the summed loss is divided by. elements_per_row: V for elementwise losses, 1 for per-row ones.
// A reduction over no kept rows divides by zero as PyTorch does (mean of nothing is NaN); sum gives 0.
inline double reduction_divisor(Reduction r, std::int64_t kept_rows, std::int64_t elements_per_row) {
  switch (r) {
    case Reduction::mean: return static_cast<double>(kept_rows) * static_cast<double>(elements_per_row);
    case Reduction::batchmean: return static_cast<double>(kept_rows);
    case Reduction::none:
    case Reduction::sum: return 1.0;
  }
  return 1.0;
}

// Finishes a Loss from per-row sums (absent rows hold 0).
inline Loss reduce_rows(std::vector<double> per_row, Reduction r, std::int64_t kept_rows, std::int64_t elements_per_row) {
  Loss loss;
  double total = 0.0;
  for (double v : per_row) total += v;
  if (r == Reduction::none) {
    loss.value = total;
    loss.per_row = std::move(per_row);
    return loss;
  }
  loss.value = total / reduction_divisor(r, kept_rows, elements_per_row);
  return loss;
}

}  // namespace shrink::distill
