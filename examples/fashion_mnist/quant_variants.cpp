// The precision rows: FP32, FP16 and BF16 weights, INT8 per-channel weights under each calibrator, and INT8
// weights with INT8 activations run through the integer matmul.
#include <chrono>
#include <memory>

#include "shrink/core/half.hpp"
#include "shrink/cpu/eigen.hpp"
#include "shrink/linear/int8.hpp"
#include "shrink/metrics/size.hpp"
#include "shrink/quant/cast.hpp"
#include "shrink/quant/observers/entropy.hpp"
#include "shrink/quant/observers/histogram.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/observers/mse.hpp"
#include "shrink/quant/observers/percentile.hpp"
#include "shrink/quant/quantize.hpp"
#include "stopwatch.hpp"
#include "variants.hpp"

namespace fmnist {

namespace {

using shrink::quant::Observer;
using shrink::quant::QuantizedTensor;
using shrink::quant::QuantScheme;

void cast_down(shrink::TensorView<const float> x, shrink::TensorView<shrink::half> out) {
  shrink::quant::cast_to_half(x, out);
}
void cast_down(shrink::TensorView<const float> x, shrink::TensorView<shrink::bfloat16> out) {
  shrink::quant::cast_to_bfloat16(x, out);
}

// Every weight cast to T (half or bfloat16) and back: the values a 16-bit model holds (biases stay float).
template <class T>
Mlp with_16_bit_weights(const Mlp& teacher) {
  Mlp model = teacher;
  for (Linear& l : model.layers) {
    std::vector<T> narrow(static_cast<std::size_t>(l.weight.size()));
    const shrink::TensorView<T> narrow_view(narrow.data(), shrink::Shape{l.weight.rows(), l.weight.cols()});
    cast_down(shrink::as_view(static_cast<const RowMatrix&>(l.weight)), narrow_view);
    shrink::quant::cast_to_float(shrink::TensorView<const T>(narrow_view), shrink::as_view(l.weight));
  }
  return model;
}

struct Calibrator {
  const char* name;
  std::unique_ptr<Observer> (*make)(const QuantScheme&);
};

template <class ObserverType>
std::unique_ptr<Observer> make_observer(const QuantScheme& scheme) {
  return std::make_unique<ObserverType>(scheme);
}

// The calibrators, each with its defaults (2048 bins; percentile 99.99).
const Calibrator kMinMax{"minmax", make_observer<shrink::quant::MinMaxObserver>};
const Calibrator kPercentile{"percentile 99.99", make_observer<shrink::quant::PercentileObserver>};
const Calibrator kHistogram{"histogram (L2)", make_observer<shrink::quant::HistogramObserver>};
const Calibrator kEntropy{"entropy (KL)", make_observer<shrink::quant::EntropyObserver>};
const Calibrator kMse{"mse", make_observer<shrink::quant::MseObserver>};

// Symmetric int8 with one scale per output row (axis 0 of [out, in]).
QuantScheme weight_scheme() {
  return QuantScheme::per_channel(shrink::quant::QuantDtype::int8, shrink::quant::Symmetry::symmetric, 0);
}

// uint8 affine with one scale and zero point per tensor: layer inputs are pixels in [0, 1] or ReLU outputs.
QuantScheme activation_scheme() {
  return QuantScheme::per_tensor(shrink::quant::QuantDtype::uint8, shrink::quant::Symmetry::affine);
}

QuantizedTensor quantize_weight(const RowMatrix& weight, const Calibrator& calibrator) {
  const std::unique_ptr<Observer> observer = calibrator.make(weight_scheme());
  observer->observe(shrink::as_view(weight));
  return shrink::quant::quantize(shrink::as_view(weight), weight_scheme(), observer->qparams());
}

// The teacher with every weight quantized and dequantized back (weight-only INT8: the matmuls stay float).
Variant int8_weight_only(const Mlp& teacher, const Calibrator& calibrator) {
  const auto start = std::chrono::steady_clock::now();
  Mlp model = teacher;
  Variant v;
  v.weight_bytes = float32_bias_bytes(teacher);
  for (Linear& l : model.layers) {
    const QuantizedTensor q = quantize_weight(l.weight, calibrator);
    shrink::quant::dequantize_into(q, shrink::as_view(l.weight));
    v.weight_bytes += shrink::metrics::quantized_size(q).total_bytes();
  }
  v.name = std::string("INT8 weights, per channel, ") + calibrator.name;
  v.group = "int8 weights";
  v.storage = "int8 + fp32 scale per output row";
  v.logits = float_logits(std::move(model));
  v.build_seconds = seconds_since(start);
  return v;
}

// A model whose every Linear runs on integers: static per-tensor activation parameters, per-channel weights packed
// once for shrink::cpu::linear_int8.
struct IntegerLayer {
  shrink::cpu::PackedInt8Weight weight;
  Eigen::VectorXf bias;
  shrink::quant::QParams input_qparams;
};

// Each layer: quantize its float input with the calibrated parameters, then
// out = sx * sw[o] * sum_k (x - zx) * w[o, k] + bias[o] with int32 sums (ReLU fused into the epilogue but last).
RowMatrix integer_logits(const std::vector<IntegerLayer>& layers, const RowMatrix& images) {
  RowMatrix h = images;
  for (std::size_t k = 0; k < layers.size(); ++k) {
    const QuantizedTensor x = shrink::quant::quantize(shrink::as_view(static_cast<const RowMatrix&>(h)),
                                                      activation_scheme(), layers[k].input_qparams);
    RowMatrix out(h.rows(), layers[k].weight.rows);
    const auto activation = k + 1 < layers.size() ? shrink::Activation::relu : shrink::Activation::none;
    shrink::cpu::linear_int8(x, layers[k].weight, layers[k].bias.data(), shrink::as_view(out), activation);
    h = std::move(out);
  }
  return h;
}

// INT8 weights (minmax, per channel) and INT8 activations whose ranges `activation` calibrates on the inputs each
// layer sees for the calibration images, fed to the observers 500 rows at a time.
Variant int8_weights_and_activations(const VariantInputs& in, const Calibrator& activation) {
  const auto start = std::chrono::steady_clock::now();
  const Mlp& teacher = in.teacher;
  const RowMatrix calibration = in.data.train.images(in.split.calibration, Eigen::all);
  const ForwardTrace trace = forward_trace(teacher, calibration);
  auto layers = std::make_shared<std::vector<IntegerLayer>>();
  Variant v;
  v.weight_bytes = float32_bias_bytes(teacher);
  const shrink::metrics::QuantizedSize activation_size =
      shrink::metrics::quantized_size(shrink::Shape{1}, activation_scheme());
  for (std::size_t k = 0; k < teacher.layers.size(); ++k) {
    const QuantizedTensor weight = quantize_weight(teacher.layers[k].weight, kMinMax);
    const std::unique_ptr<Observer> observer = activation.make(activation_scheme());
    const RowMatrix& inputs = trace.layer_inputs[k];
    for (Eigen::Index row = 0; row < inputs.rows(); row += 500) {
      const RowMatrix batch = inputs.middleRows(row, std::min<Eigen::Index>(500, inputs.rows() - row));
      observer->observe(shrink::as_view(batch));
    }
    layers->push_back({shrink::cpu::pack_int8_weight(weight), teacher.layers[k].bias, observer->qparams()});
    v.weight_bytes += shrink::metrics::quantized_size(weight).total_bytes() + activation_size.scale_bytes +
                      activation_size.zero_point_bytes;
  }
  v.name = std::string("INT8 weights + activations, ") + activation.name;
  v.group = "int8 weights + activations";
  v.storage = "int8 + fp32 scale per output row; 3 activation scales + zero points";
  v.logits = [layers](const RowMatrix& images) { return integer_logits(*layers, images); };
  v.build_seconds = seconds_since(start);
  return v;
}

}  // namespace

std::vector<Variant> precision_variants(const VariantInputs& in) {
  const Mlp& teacher = in.teacher;
  const std::int64_t weights = teacher.weight_count();
  std::vector<Variant> rows(3);
  rows[0].name = "FP32";
  rows[0].storage = "fp32";
  rows[0].weight_bytes = weights * 4 + float32_bias_bytes(teacher);
  rows[0].logits = float_logits(teacher);
  rows[1].name = "FP16 weights";
  rows[1].storage = "fp16";
  rows[1].weight_bytes = weights * 2 + float32_bias_bytes(teacher);
  rows[1].logits = float_logits(with_16_bit_weights<shrink::half>(teacher));
  rows[2].name = "BF16 weights";
  rows[2].storage = "bf16";
  rows[2].weight_bytes = weights * 2 + float32_bias_bytes(teacher);
  rows[2].logits = float_logits(with_16_bit_weights<shrink::bfloat16>(teacher));
  for (Variant& v : rows) v.group = "precision";
  return rows;
}

std::vector<Variant> int8_weight_variants(const VariantInputs& in) {
  std::vector<Variant> rows;
  for (const Calibrator* c : {&kMinMax, &kPercentile, &kHistogram, &kEntropy, &kMse})
    rows.push_back(int8_weight_only(in.teacher, *c));
  return rows;
}

std::vector<Variant> int8_activation_variants(const VariantInputs& in) {
  return {int8_weights_and_activations(in, kMinMax), int8_weights_and_activations(in, kHistogram)};
}

}  // namespace fmnist
