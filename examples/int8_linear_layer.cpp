// An INT8 Linear layer on plain Eigen matrices, as docs/linear.md shows it: the weight quantized per output channel
// and packed once, activations quantized per token on the fly, out = relu(x · Wᵀ + bias) written into a column-major
// Eigen::MatrixXf (any strides are accepted), on the threads of shrink's default executor; then the same layer in
// FP32 for comparison.
#include <Eigen/Core>
#include <cmath>
#include <cstdio>

#include "shrink/shrink.hpp"

int main() {
  using namespace shrink;
  const Eigen::MatrixXf weight = Eigen::MatrixXf::Random(1024, 4096) * 0.02f;  // [out, in], as a Linear layer
  const Eigen::VectorXf bias = Eigen::VectorXf::Random(1024) * 0.1f;
  const Eigen::MatrixXf x = Eigen::MatrixXf::Random(16, 4096);  // [tokens, in]
  Eigen::MatrixXf y(16, 1024), y_fp32(16, 1024);                // [tokens, out]

  // Once per layer: quantize and pack the weight.
  const auto wq = quant::quantize(
      as_view(weight), quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::symmetric, 0));
  const cpu::PackedInt8Weight w8 = cpu::pack_int8_weight(wq);  // rows padded, Σ_k w[n,k] precomputed
  // Per batch: activations quantized per token on the fly, int8 × int8 → int32, dequantized with bias + ReLU.
  const Epilogue epilogue = Epilogue::with_bias(as_view(bias), Activation::relu);
  cpu::linear_int8_dynamic(as_view(x), w8, as_view(y), epilogue);

  // Ask first instead of catching shrink::Error:
  const Support s = cpu::can_implement_linear_int8(cpu::quantize_rows_absmax(as_view(x)), w8, as_view(y));
  if (!s) std::puts(s.reason().c_str());

  cpu::linear_f32(as_view(x), as_view(weight), as_view(y_fp32), epilogue);
  const float relative = (y - y_fp32).norm() / y_fp32.norm();
  std::printf("int8 W8A8 layer: %lld weight bytes (fp32 %lld), relative error %.2e against fp32, %d threads\n",
              static_cast<long long>(w8.storage_bytes()), static_cast<long long>(weight.size() * 4),
              static_cast<double>(relative), current_executor().concurrency());
  return relative < 0.05f ? 0 : 1;
}
