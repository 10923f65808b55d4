// quantize, dequantize, fake_quantize and every observer on the executor: the same bytes on every executor and
// thread count (serial, pools of 1, 2, 3 and 8), the work cut in several tasks.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "shrink/quant/fake_quantize.hpp"
#include "shrink/quant/observers/entropy.hpp"
#include "shrink/quant/observers/histogram.hpp"
#include "shrink/quant/observers/minmax.hpp"
#include "shrink/quant/observers/mse.hpp"
#include "shrink/quant/observers/percentile.hpp"
#include "shrink/quant/quantize.hpp"
#include "support/executors.hpp"
#include "support/random.hpp"

using namespace shrink;
using namespace shrink::quant;
using shrink::test::require_same_bytes_on_every_executor;

namespace {

constexpr std::int64_t kRows = 512, kCols = 2048;  // 1M elements: many pieces, many channels

const std::vector<float>& data() {
  static const std::vector<float> x = [] {
    auto v = shrink::test::random_values(static_cast<std::size_t>(kRows * kCols), 21);
    v[12345] = -0.0f;  // signed zeros, which a careless merge of ranges could order either way
    v[54321] = 0.0f;
    return v;
  }();
  return x;
}

TensorView<const float> view() { return TensorView<const float>(data().data(), Shape{kRows, kCols}); }

// The bytes of qparams: scales then zero points.
std::vector<std::uint8_t> qparams_bytes(const QParams& q) {
  std::vector<std::uint8_t> out(q.scale.size() * 4 + q.zero_point.size() * 4);
  std::memcpy(out.data(), q.scale.data(), q.scale.size() * 4);
  std::memcpy(out.data() + q.scale.size() * 4, q.zero_point.data(), q.zero_point.size() * 4);
  return out;
}

const QuantScheme kSchemes[] = {
    QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric),
    QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine),
    QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0),
    QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 1),
    QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 128),
    QuantScheme::per_group(QuantDtype::uint4, Symmetry::affine, 1, 64),
};

}  // namespace

TEST_CASE("quantize, dequantize and fake_quantize give the same bytes on every executor", "[quant][threads]") {
  for (const QuantScheme& scheme : kSchemes) {
    INFO(to_string(scheme.granularity) << " " << to_string(scheme.dtype));
    const QParams q = minmax_qparams(view(), scheme);
    require_same_bytes_on_every_executor([&] { return quantize(view(), scheme, q).data; });
    const QuantizedTensor t = quantize(view(), scheme, q);
    require_same_bytes_on_every_executor([&] { return dequantize(t); });
    require_same_bytes_on_every_executor([&] {
      std::vector<float> out(data().size());
      fake_quantize(view(), scheme, q, TensorView<float>(out.data(), view().shape()));
      return out;
    });
  }
}

TEST_CASE("the min/max observer gives the same qparams on every executor", "[quant][threads]") {
  for (const QuantScheme& scheme : kSchemes) {
    INFO(to_string(scheme.granularity) << " " << to_string(scheme.dtype));
    auto observed = [&](auto make) {
      return [&, make] {
        auto observer = make();
        observer.observe(view());
        observer.observe(view());  // a second batch: the running state merges too
        return qparams_bytes(observer.qparams());
      };
    };
    require_same_bytes_on_every_executor(observed([&] { return MinMaxObserver(scheme); }));
  }
}

TEST_CASE("the histogram observers give the same qparams on every executor", "[quant][threads]") {
  // 1M elements as [16, 65536]: per tensor (pieces of one channel) and per channel along axis 0 (channels in
  // parallel); each search over 2048 bins.
  const TensorView<const float> x(data().data(), Shape{16, kRows * kCols / 16});
  for (const QuantScheme& scheme : {QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric),
                                    QuantScheme::per_channel(QuantDtype::uint8, Symmetry::affine, 0)}) {
    INFO(to_string(scheme.granularity));
    auto observed = [&](auto make) {
      return [&, make] {
        auto observer = make();
        observer.observe(x);
        observer.observe(x);
        return qparams_bytes(observer.qparams());
      };
    };
    require_same_bytes_on_every_executor(observed([&] { return HistogramObserver(scheme); }));
    require_same_bytes_on_every_executor(observed([&] { return PercentileObserver(scheme); }));
    require_same_bytes_on_every_executor(observed([&] { return MseObserver(scheme); }));
    require_same_bytes_on_every_executor(observed([&] { return EntropyObserver(scheme); }));
  }
}
