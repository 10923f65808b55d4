// Helpers shared by the calibration golden tests (tests/golden/gen_calibration.py writes the files).
#pragma once

#include <cstddef>
#include <vector>

#include "shrink/quant/scheme.hpp"
#include "support/golden.hpp"

namespace shrink::test {

// The batches of a calibration golden case: batch b holds float32(k * data_unit[b]).
inline std::vector<std::vector<float>> golden_batches(const GoldenCase& c) {
  const auto& sizes = c.ints("batch_sizes");
  const auto& k = c.ints("data_k");
  const auto& units = c.doubles("data_unit");
  std::vector<std::vector<float>> batches;
  std::size_t at = 0;
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    std::vector<float> values(static_cast<std::size_t>(sizes[b]));
    for (float& v : values) v = static_cast<float>(static_cast<double>(k[at++]) * units[b]);
    batches.push_back(values);
  }
  return batches;
}

// SCHEMES_MAGNITUDE of gen_calibration.py, in order.
inline std::vector<quant::QuantScheme> magnitude_schemes() {
  using namespace shrink::quant;
  QuantScheme reduced = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::affine);
  reduced.reduce_range = true;
  return {QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric),
          QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine),
          QuantScheme::per_tensor(QuantDtype::int4, Symmetry::symmetric), reduced};
}

}  // namespace shrink::test
