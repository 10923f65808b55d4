// Quantizes a Linear layer's weight (Eigen, [out, in]) to int8 per output channel and int4 per group,
// calibrates its input activations, and prints size and error of each choice.
#include <Eigen/Core>
#include <cstdio>

#include "shrink/shrink.hpp"

int main() {
  using namespace shrink;
  using namespace shrink::quant;
  const Eigen::MatrixXf weight = Eigen::MatrixXf::Random(256, 512) * 0.05f;  // your layer's [out, in] weight
  const TensorView<const float> w = as_view(weight);

  // Weights: symmetric int8 per output channel (axis 0), and int4 with one scale per 64 inputs.
  for (const QuantScheme& scheme : {QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0),
                                    QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 64)}) {
    const QuantizedTensor q = quantize(w, scheme);  // min/max parameters of the weight itself
    const std::vector<float> restored = dequantize(q);
    const metrics::ErrorStats err = metrics::error_stats(w, TensorView<const float>(restored.data(), w.shape()));
    std::printf("%-5s %-11s %7lld bytes (fp32 %lld)  SQNR %.1f dB\n", to_string(scheme.dtype),
                to_string(scheme.granularity), static_cast<long long>(metrics::quantized_size(q).total_bytes()),
                static_cast<long long>(metrics::dense_bytes(w.shape())), err.sqnr_db);
  }

  // Activations: a stateful observer sees many calibration batches, then gives uint8 parameters.
  MinMaxObserver observer(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
  for (int batch = 0; batch < 8; ++batch) {
    const Eigen::MatrixXf activations = (Eigen::MatrixXf::Random(32, 512).array() + 1.0f).matrix();
    observer.observe(as_view(activations));
  }
  const QParams act = observer.qparams();
  std::printf("activation scale %.6f zero point %d\n", act.scale[0], act.zero_point[0]);
  return 0;
}
