// Conformance of quantize / dequantize / fake_quantize / min-max observers with PyTorch goldens.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/float_compare.hpp"
#include "support/golden.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::GoldenCase;
using shrink::test::ulp_distance;

namespace {

Shape shape_of(const GoldenCase& c, const std::string& key = "shape") {
  return Shape(std::vector<std::int64_t>(c.ints(key).begin(), c.ints(key).end()));
}

QuantDtype dtype_of(const GoldenCase& c) { return c.text("dtype") == "int8" ? QuantDtype::int8 : QuantDtype::uint8; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void check_scales(const std::vector<float>& ours, const std::vector<float>& torch, const std::string& name) {
  REQUIRE(ours.size() == torch.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    INFO(name << " scale[" << i << "] ours " << ours[i] << " torch " << torch[i]);
    CHECK(ulp_distance(ours[i], torch[i]) <= 1);
  }
}

void check_zero_points(const std::vector<std::int32_t>& ours, const std::vector<std::int64_t>& torch, const std::string& name) {
  REQUIRE(ours.size() == torch.size());
  for (std::size_t i = 0; i < ours.size(); ++i) {
    INFO(name << " zero_point[" << i << "]");
    CHECK(ours[i] == torch[i]);
  }
}

}  // namespace

TEST_CASE("quantize and dequantize match torch.quantize_per_tensor / quantize_per_channel", "[quant][golden]") {
  const auto cases = shrink::test::load_golden("golden/quantize.golden");
  REQUIRE(cases.size() > 40);
  for (const GoldenCase& c : cases) {
    INFO("case " << c.name);
    const std::vector<float> x = c.floats("input");
    const Shape shape = shape_of(c);
    const bool per_channel = contains(c.name, "per_channel/");
    const Symmetry symmetry = contains(c.name, "/symmetric/") ? Symmetry::symmetric : Symmetry::affine;
    QuantScheme scheme = per_channel ? QuantScheme::per_channel(dtype_of(c), symmetry, static_cast<int>(c.ints("axis")[0]))
                                     : QuantScheme::per_tensor(dtype_of(c), symmetry);
    QParams qparams;
    qparams.scale = c.floats("scale");
    qparams.zero_point.assign(c.ints("zero_point").begin(), c.ints("zero_point").end());
    qparams.shape = per_channel ? Shape{static_cast<std::int64_t>(qparams.scale.size())} : Shape{};

    const TensorView<const float> view(x.data(), shape);
    if (contains(c.name, "/symmetric/") || contains(c.name, "/affine/")) {  // parameters came from PyTorch's observer
      const QParams ours = minmax_qparams(view, scheme);
      check_scales(ours.scale, qparams.scale, c.name);
      check_zero_points(ours.zero_point, c.ints("zero_point"), c.name);
    }
    const QuantizedTensor q = quantize(view, scheme, qparams);
    const auto& expected = c.ints("q");
    REQUIRE(static_cast<std::size_t>(q.numel()) == expected.size());
    std::int64_t mismatches = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) mismatches += q.value(static_cast<std::int64_t>(i)) != expected[i];
    CHECK(mismatches == 0);

    const std::vector<float> back = dequantize(q);
    const std::vector<float> torch_back = c.floats("dequantized");
    std::int64_t worst = 0;
    for (std::size_t i = 0; i < back.size(); ++i) worst = std::max(worst, ulp_distance(back[i], torch_back[i]));
    CHECK(worst == 0);
  }
}

TEST_CASE("fake_quantize matches torch.fake_quantize_per_tensor/per_channel_affine and its gradient", "[quant][golden]") {
  const auto cases = shrink::test::load_golden("golden/fake_quantize.golden");
  REQUIRE(cases.size() >= 15);
  for (const GoldenCase& c : cases) {
    INFO("case " << c.name);
    const bool is_signed_range = c.ints("qmin")[0] < 0;
    const bool per_channel = contains(c.name, "per_channel/");
    QuantScheme scheme = per_channel ? QuantScheme::per_channel(is_signed_range ? QuantDtype::int8 : QuantDtype::uint8,
                                                                Symmetry::affine, static_cast<int>(c.ints("axis")[0]))
                                     : QuantScheme::per_tensor(is_signed_range ? QuantDtype::int8 : QuantDtype::uint8,
                                                               Symmetry::affine);
    scheme.reduce_range = contains(c.name, "_reduced");
    scheme.restricted_range = contains(c.name, "_restricted");
    REQUIRE(quant_range(scheme).qmin == c.ints("qmin")[0]);
    REQUIRE(quant_range(scheme).qmax == c.ints("qmax")[0]);

    QParams qparams;
    qparams.scale = c.floats("scale");
    qparams.zero_point.assign(c.ints("zero_point").begin(), c.ints("zero_point").end());
    qparams.shape = per_channel ? Shape{static_cast<std::int64_t>(qparams.scale.size())} : Shape{};

    const std::vector<float> x = c.floats("input");
    const Shape shape = shape_of(c);
    std::vector<float> y(x.size(), -12345.0f);
    std::vector<std::uint8_t> mask(x.size(), 7);
    fake_quantize(TensorView<const float>(x.data(), shape), scheme, qparams, TensorView<float>(y.data(), shape),
                  TensorView<std::uint8_t>(mask.data(), shape));
    const std::vector<float> expected = c.floats("output");
    const auto& expected_mask = c.ints("mask");
    std::int64_t value_mismatches = 0, mask_mismatches = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      value_mismatches += y[i] != expected[i];
      mask_mismatches += mask[i] != expected_mask[i];
    }
    CHECK(value_mismatches == 0);
    CHECK(mask_mismatches == 0);

    std::vector<float> grad_out(x.size(), 1.0f), grad_in(x.size(), -1.0f);
    fake_quantize_backward(TensorView<const float>(grad_out.data(), shape), TensorView<const std::uint8_t>(mask.data(), shape),
                           TensorView<float>(grad_in.data(), shape));
    for (std::size_t i = 0; i < x.size(); ++i) REQUIRE(grad_in[i] == static_cast<float>(expected_mask[i]));
  }
}

TEST_CASE("min/max observers match PyTorch's over several batches", "[quant][golden][observer]") {
  const auto cases = shrink::test::load_golden("golden/observers_minmax.golden");
  REQUIRE(cases.size() >= 50);
  for (const GoldenCase& c : cases) {
    const Shape shape = shape_of(c);
    const std::vector<float> batches = c.floats("batches");
    const std::int64_t per_batch = shape.product();
    QuantScheme base = QuantScheme::per_tensor(dtype_of(c), c.ints("symmetric")[0] ? Symmetry::symmetric : Symmetry::affine);
    base.reduce_range = c.ints("reduce_range")[0] != 0;
    base.restricted_range = c.ints("restricted")[0] != 0;
    QuantScheme channel = base;
    channel.granularity = Granularity::per_channel;
    channel.axis = static_cast<int>(c.ints("axis")[0]);
    const float constant = c.floats("averaging_constant")[0];

    MinMaxObserver minmax(base);
    MovingAverageMinMaxObserver moving(base, constant);
    MinMaxObserver per_channel(channel);
    MovingAverageMinMaxObserver per_channel_moving(channel, constant);
    for (std::size_t b = 0; b * per_batch < batches.size(); ++b) {
      const TensorView<const float> batch(batches.data() + b * per_batch, shape);
      minmax.observe(batch);
      moving.observe(batch);
      per_channel.observe(batch);
      per_channel_moving.observe(batch);
    }
    const std::pair<const char*, const Observer*> observers[] = {
        {"minmax", &minmax}, {"moving_average", &moving}, {"per_channel_minmax", &per_channel},
        {"per_channel_moving_average", &per_channel_moving}};
    for (const auto& [name, observer] : observers) {
      INFO("case " << c.name << " observer " << name);
      const QParams q = observer->qparams();
      check_scales(q.scale, c.floats(std::string(name) + ".scale"), c.name);
      check_zero_points(q.zero_point, c.ints(std::string(name) + ".zero_point"), c.name);
    }
  }
}
