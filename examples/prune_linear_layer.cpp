// Prunes a Linear layer's weight three ways and stores it sparse: the pruning example of docs/pruning.md.
#include <Eigen/Core>
#include <cstdio>

#include "shrink/shrink.hpp"

int main() {
  using namespace shrink;
  using namespace shrink::prune;
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  RowMajor weight = RowMajor::Random(1024, 4096);            // a Linear layer's [out, in]
  const RowMajor activations = RowMajor::Random(256, 4096);  // calibration inputs, [tokens, in]
  const TensorView<const float> view = as_view(weight);

  // Magnitude pruning to 80 % in gradual steps (Zhu & Gupta), each step pruning among the weights still kept.
  const GradualSchedule schedule{0.0, 0.8, /*begin_step=*/0, /*end_step=*/1000, /*frequency=*/250};
  Mask gradual(view.shape());
  for (std::int64_t step = 0; step <= 1000; ++step)
    if (schedule.is_pruning_step(step)) gradual = prune_to_sparsity(view, schedule.sparsity_at(step), gradual);

  // 2:4 for sparse tensor cores, ranked by Wanda's |W_ij| * ||X_j||: activation norms from calibration data.
  ActivationNormObserver norms;
  norms.observe(as_view(activations));
  const Mask two_four = wanda_nm_mask(view, norms.norms(), NmPattern{2, 4});

  // Whole output rows by their L2 norm.
  const Mask rows = ln_structured_mask(view, Amount::fraction(0.25), NormOrder::l2, /*dim=*/0);

  const SparsityReport report = sparsity_report({{"gradual", &gradual}, {"wanda 2:4", &two_four}, {"rows", &rows}});
  for (const TensorSparsity& t : report.tensors) std::printf("%-10s sparsity %.3f\n", t.name.c_str(), t.sparsity);

  apply_mask(as_view(weight), two_four);                                     // zero the pruned weights
  const auto packed = sparse::compress_nm(view, two_four, NmPattern{2, 4});  // values + mma.sp metadata
  const auto bytes = sparse::storage_comparison(two_four, ScalarType::f32);
  std::printf("2:4 compressed: %zu values, %lld bytes (dense %lld, CSR %lld)\n", packed.values.size(),
              static_cast<long long>(bytes.nm_compressed), static_cast<long long>(bytes.dense),
              static_cast<long long>(bytes.csr));
}
