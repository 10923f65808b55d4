// The README's quick start: quantize an Eigen weight to int8 per output channel and measure the error.
#include <Eigen/Core>
#include <cstdio>

#include "shrink/shrink.hpp"

int main() {
  using namespace shrink::quant;
  const Eigen::MatrixXf weight = Eigen::MatrixXf::Random(1024, 4096);  // a Linear layer's [out, in]
  const shrink::TensorView<const float> w = shrink::as_view(weight);

  const QuantScheme scheme = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, /*axis=*/0);
  const QuantizedTensor q = quantize(w, scheme);  // scales from each row's min/max, values round half to even
  const std::vector<float> restored = dequantize(q);

  const auto error = shrink::metrics::error_stats(w, shrink::TensorView<const float>(restored.data(), w.shape()));
  std::printf("int8: %lld bytes (fp32: %lld), SQNR %.1f dB, max error %.2e\n",
              static_cast<long long>(shrink::metrics::quantized_size(q).total_bytes()),
              static_cast<long long>(shrink::metrics::dense_bytes(w.shape())), error.sqnr_db, error.max_abs);
}
