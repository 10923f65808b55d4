// A program as a user of shrink writes it: quantize a small tensor to int8 and check it against the formula;
// where nlohmann_json is available, save the result as safetensors and read it back.
#include <cmath>
#include <cstdio>

#include "shrink/quant/quantize.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include <cstring>

#include "shrink/io/safetensors.hpp"

// Writes the int8 values and their scale to a safetensors file and checks they read back unchanged.
static bool save_and_load(const shrink::quant::QuantizedTensor& quantized) {
  const std::vector<std::int8_t> values = [&] {
    std::vector<std::int8_t> v;
    for (std::int64_t i = 0; i < quantized.numel(); ++i) v.push_back(static_cast<std::int8_t>(quantized.value(i)));
    return v;
  }();
  const float scale = quantized.qparams.scale[0];
  const char* path = "shrink_consumer.safetensors";
  shrink::io::SafetensorsWriter writer(path, {{"weight", shrink::ScalarType::i8, {2, 4}},
                                              {"scale", shrink::ScalarType::f32, {}}}, {{"scheme", "int8"}});
  writer.write("weight", values.data(), values.size());
  writer.write("scale", &scale, sizeof scale);
  writer.finish();
  const shrink::io::SafetensorsFile file(path);
  const auto weight = file.view<std::int8_t>("weight");
  const bool same = weight.shape() == shrink::Shape{2, 4} &&
                    std::memcmp(weight.data(), values.data(), values.size()) == 0 &&
                    std::memcmp(file.bytes("scale").data, &scale, sizeof scale) == 0 &&
                    file.metadata().at("scheme") == "int8";
  std::printf("shrink consumer: safetensors round trip: %s\n", same ? "ok" : "MISMATCH");
  return same;
}
#else
static bool save_and_load(const shrink::quant::QuantizedTensor&) { return true; }
#endif

int main() {
  const float values[8] = {-1.0f, -0.5f, 0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f};
  const shrink::quant::QuantizedTensor quantized = shrink::quant::quantize(
      shrink::TensorView<const float>(values, shrink::Shape{2, 4}),
      shrink::quant::QuantScheme::per_tensor(shrink::quant::QuantDtype::int8, shrink::quant::Symmetry::symmetric));

  // Symmetric int8 over [min, max]: scale = max(|min|, |max|) / 127.5, zero point 0,
  // q = clamp(round_half_even(x / scale), -128, 127).
  const float expected_scale = 1.25f / 127.5f;
  if (quantized.qparams.scale.size() != 1 || quantized.qparams.scale[0] != expected_scale ||
      quantized.qparams.zero_point.at(0) != 0) {
    std::printf("shrink consumer: unexpected qparams (scale %.9g, expected %.9g)\n",
                quantized.qparams.scale.empty() ? 0.0 : quantized.qparams.scale[0], expected_scale);
    return 1;
  }
  for (int i = 0; i < 8; ++i) {
    const float q = std::fmin(std::fmax(std::nearbyint(values[i] / expected_scale), -128.0f), 127.0f);
    if (quantized.value(i) != static_cast<int>(q)) {
      std::printf("shrink consumer: element %d quantized to %d, expected %d\n", i, quantized.value(i),
                  static_cast<int>(q));
      return 1;
    }
  }
  if (!save_and_load(quantized)) return 1;
  std::printf("shrink consumer: quantized %lld values to int8 with scale %.9g: ok\n",
              static_cast<long long>(quantized.numel()), quantized.qparams.scale[0]);
  return 0;
}
