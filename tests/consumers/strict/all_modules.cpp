// A program as a user might write it, calling every module of shrink on small tensors: built by
// consumers/strict_warnings with -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion -Werror, so each
// template it instantiates must compile without a warning. It checks a few results and returns 0 when they hold.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "shrink/shrink.hpp"

#if __has_include(<nlohmann/json.hpp>)
#include "shrink/io/quantized_safetensors.hpp"
#include "shrink/io/safetensors.hpp"
#define STRICT_HAS_IO 1
#else
#define STRICT_HAS_IO 0
#endif

#if defined(STRICT_CUDA_HOST_API)
#include "shrink/cuda.hpp"  // compiled only: nothing of it is called, so shrink::cuda is not linked
#endif

namespace {

using shrink::Shape;
using shrink::TensorView;

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("all_modules: FAILED: %s\n", what);
    ++failures;
  }
}

// Values in [-1, 1) from a fixed linear congruential sequence: the same on every platform.
std::vector<float> pseudo_random(std::int64_t count, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(count));
  std::uint32_t state = seed;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = static_cast<float>(state >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

template <class T>
std::vector<T> converted(const std::vector<float>& v) {
  std::vector<T> out;
  out.reserve(v.size());
  for (float x : v) out.push_back(T(x));
  return out;
}

constexpr std::int64_t kM = 4;   // activation rows
constexpr std::int64_t kN = 16;  // output features
constexpr std::int64_t kK = 64;  // input features

void quantization(const std::vector<float>& w_data) {
  using namespace shrink::quant;
  const TensorView<const float> w(w_data.data(), Shape{kN, kK});
  const QuantScheme schemes[] = {
      QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric),
      QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine),
      QuantScheme::per_channel(QuantDtype::int8, Symmetry::affine, 0),
      QuantScheme::per_channel(QuantDtype::uint8, Symmetry::symmetric, 0),
      QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 32),
      QuantScheme::per_group(QuantDtype::int4, Symmetry::affine, 1, 16),
  };
  for (const QuantScheme& scheme : schemes) {
    const QuantizedTensor q = quantize(w, scheme);
    const std::vector<float> restored = dequantize(q);
    const double sqnr = shrink::metrics::sqnr_db(w, TensorView<const float>(restored.data(), w.shape()));
    check(sqnr > (scheme.dtype == QuantDtype::int4 ? 10.0 : 30.0), "quantize / dequantize round trip");
  }

  // Parameters from a calibrator, into caller buffers; fake quantization with its straight-through mask.
  const QuantScheme int8 = QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0);
  const QParams qparams = minmax_qparams(w, int8);
  std::vector<std::int8_t> q8(w_data.size());
  quantize_into(w, int8, qparams, TensorView<std::int8_t>(q8.data(), w.shape()));
  std::vector<float> back(w_data.size()), fake(w_data.size()), grad(w_data.size(), 1.0f);
  dequantize_into(TensorView<const std::int8_t>(q8.data(), w.shape()), int8, qparams,
                  TensorView<float>(back.data(), w.shape()));
  std::vector<std::uint8_t> mask(w_data.size());
  fake_quantize(w, int8, qparams, TensorView<float>(fake.data(), w.shape()),
                TensorView<std::uint8_t>(mask.data(), w.shape()));
  fake_quantize_backward(TensorView<const float>(grad.data(), w.shape()),
                         TensorView<const std::uint8_t>(mask.data(), w.shape()),
                         TensorView<float>(grad.data(), w.shape()));
  check(back == fake, "fake_quantize equals quantize + dequantize");

  // Casts: half, bfloat16 and FP8 (E4M3 per tensor, E5M2 per channel) and back.
  std::vector<shrink::half> h(w_data.size());
  std::vector<shrink::bfloat16> b(w_data.size());
  std::vector<float> from_half(w_data.size()), from_bf16(w_data.size()), from_fp8(w_data.size());
  cast_to_half(w, TensorView<shrink::half>(h.data(), w.shape()));
  cast_to_bfloat16(w, TensorView<shrink::bfloat16>(b.data(), w.shape()));
  cast_to_float(TensorView<const shrink::half>(h.data(), w.shape()), TensorView<float>(from_half.data(), w.shape()));
  cast_to_float(TensorView<const shrink::bfloat16>(b.data(), w.shape()),
                TensorView<float>(from_bf16.data(), w.shape()));
  check(shrink::metrics::max_abs_error(w, TensorView<const float>(from_half.data(), w.shape())) < 1e-3,
        "half round trip");
  check(shrink::metrics::max_abs_error(w, TensorView<const float>(from_bf16.data(), w.shape())) < 1e-2,
        "bfloat16 round trip");
  const Fp8Tensor e4m3 = quantize_fp8(w, shrink::Fp8Format::e4m3);
  const Fp8Tensor e5m2 = quantize_fp8(w, shrink::Fp8Format::e5m2, Fp8ScaleGranularity::per_channel, 0);
  dequantize_fp8(e4m3, TensorView<float>(from_fp8.data(), w.shape()));
  check(shrink::metrics::cosine_similarity(w, TensorView<const float>(from_fp8.data(), w.shape())) > 0.99,
        "FP8 E4M3 round trip");
  dequantize_fp8(e5m2, TensorView<float>(from_fp8.data(), w.shape()));
  check(shrink::metrics::cosine_similarity(w, TensorView<const float>(from_fp8.data(), w.shape())) > 0.98,
        "FP8 E5M2 round trip");

  // Every observer, per tensor and per channel, over two batches.
  const std::vector<float> batch2 = pseudo_random(kN * kK, 99);
  const TensorView<const float> w2(batch2.data(), w.shape());
  const QuantScheme per_tensor = QuantScheme::per_tensor(QuantDtype::int8, Symmetry::symmetric);
  MinMaxObserver minmax(int8);
  MovingAverageMinMaxObserver moving(int8, 0.1f);
  HistogramObserver histogram(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine));
  EntropyObserver entropy(per_tensor);
  PercentileObserver percentile(int8, PercentileOptions{99.9, 2048, 16384});
  MseObserver mse(per_tensor);
  Observer* observers[] = {&minmax, &moving, &histogram, &entropy, &percentile, &mse};
  for (Observer* o : observers) {
    o->observe(w);
    o->observe(w2);
    const QParams p = o->qparams();
    check(!p.scale.empty() && p.scale[0] > 0.0f && std::isfinite(p.scale[0]), o->name());
  }

  // SmoothQuant: X·Wᵀ is unchanged when X's columns are divided by s and W's multiplied by it.
  const std::vector<float> x_data = pseudo_random(kM * kK, 7);
  ActivationChannelAbsMax activations;
  activations.observe(TensorView<const float>(x_data.data(), Shape{kM, kK}));
  const std::vector<float> s = smoothing_scales(activations, w, 0.5f);
  std::vector<float> w_smooth = w_data, x_smooth = x_data, norm_weight(static_cast<std::size_t>(kK), 1.0f);
  apply_smoothing(s, TensorView<float>(w_smooth.data(), w.shape()));
  apply_inverse_smoothing(s, TensorView<float>(x_smooth.data(), Shape{kM, kK}));
  fold_smoothing_into_norm(s, TensorView<float>(norm_weight.data(), Shape{kK}));
  double before = 0.0, after = 0.0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(kK); ++k) {
    before += static_cast<double>(x_data[k]) * static_cast<double>(w_data[k]);
    after += static_cast<double>(x_smooth[k]) * static_cast<double>(w_smooth[k]);
  }
  check(std::fabs(before - after) < 1e-4, "SmoothQuant keeps X·Wᵀ");

  // Requantization of int32 accumulators to int8 (per tensor) and uint8 (per channel, with a bias).
  std::vector<std::int32_t> acc(static_cast<std::size_t>(kM * kN)), bias(static_cast<std::size_t>(kN), 10);
  for (std::size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<std::int32_t>(i * 37 % 2000) - 1000;
  const TensorView<const std::int32_t> accumulators(acc.data(), Shape{kM, kN});
  std::vector<std::int8_t> out8(acc.size());
  std::vector<std::uint8_t> outu8(acc.size());
  requantize_per_tensor(accumulators, quantize_multiplier(0.05), 0, quant_range(per_tensor),
                        TensorView<std::int8_t>(out8.data(), Shape{kM, kN}));
  requantize_per_channel(
      accumulators, TensorView<const std::int32_t>(bias.data(), Shape{kN}),
      requantization_multipliers(0.02f, std::vector<float>(static_cast<std::size_t>(kN), 0.01f), 0.1f), 128,
      quant_range(QuantScheme::per_tensor(QuantDtype::uint8, Symmetry::affine)),
      TensorView<std::uint8_t>(outu8.data(), Shape{kM, kN}));
  check(out8[0] == static_cast<std::int8_t>(-50), "requantize_per_tensor: -1000 * 0.05");
}

void pruning_and_sparse(const std::vector<float>& w_data) {
  using namespace shrink::prune;
  const TensorView<const float> w(w_data.data(), Shape{kN, kK});
  const std::vector<float> other_data = pseudo_random(8 * 32, 3);
  const TensorView<const float> other(other_data.data(), Shape{8, 32});

  const Mask magnitude = l1_unstructured_mask(w, Amount::fraction(0.5));
  const Mask more = l1_unstructured_mask(w, Amount::fraction(0.5), magnitude);
  check(magnitude.count_pruned() == kN * kK / 2 && more.count_pruned() == kN * kK * 3 / 4, "l1_unstructured_mask");
  const std::vector<Mask> global = global_unstructured_masks({w, other}, Amount::fraction(0.3));
  const std::vector<Mask> global_more = global_prune_to_sparsity({w, other}, 0.6, global);
  check(global_more[0].count_pruned() + global_more[1].count_pruned() == (kN * kK + 256) * 6 / 10,
        "global_prune_to_sparsity");
  const Mask random = random_unstructured_mask(w.shape(), Amount::fraction(0.25), 42);
  const Mask rows = ln_structured_mask(w, Amount::count(4), NormOrder::l2, 0);
  const Mask blocks = block_mask(w, Amount::fraction(0.5), 4, 8, NormOrder::l1);
  const Mask two_four = nm_mask(w, NmPattern{2, 4});
  const std::vector<shrink::half> w_half = converted<shrink::half>(w_data);
  const Mask two_four_half = nm_mask(TensorView<const shrink::half>(w_half.data(), w.shape()), NmPattern{2, 4});
  check(is_nm_sparse(two_four, NmPattern{2, 4}) && two_four.count_kept() == two_four_half.count_kept(), "nm_mask");
  const MagnitudeThreshold threshold = select_magnitude_threshold(w, kN * kK / 2);
  check(threshold.candidates == kN * kK, "select_magnitude_threshold");

  // Wanda from calibration activations; a gradual schedule.
  const std::vector<float> x_data = pseudo_random(kM * kK, 11);
  ActivationNormObserver norms;
  norms.observe(TensorView<const float>(x_data.data(), Shape{kM, kK}));
  const Mask wanda = wanda_mask(w, norms.norms(), Amount::fraction(0.5));
  const Mask wanda_nm = wanda_nm_mask(w, norms.norms(), NmPattern{2, 4});
  // SparseGPT (2:4 with 4-bit joint quantization) and GPTQ from one factor of the calibration rows' Hessian.
  const std::vector<float> calibration = pseudo_random(128 * kK, 13);
  shrink::quant::HessianObserver hessian;
  hessian.observe(TensorView<const float>(calibration.data(), Shape{128, kK}));
  SparseGptOptions sparsegpt_options;
  sparsegpt_options.pattern = NmPattern{2, 4};
  sparsegpt_options.quantize = true;
  sparsegpt_options.group_size = 32;
  const shrink::quant::InverseHessianFactor factor =
      shrink::quant::inverse_hessian_factor(hessian.hessian(), inverse_hessian_options(sparsegpt_options));
  const SparseGptResult sparsegpt = sparsegpt_prune(w, factor, sparsegpt_options);
  shrink::quant::GptqOptions gptq_options;
  gptq_options.group_size = 32;
  const shrink::quant::QuantizedTensor gptq = shrink::quant::gptq_quantize(w, factor, gptq_options);
  check(is_nm_sparse(sparsegpt.mask, NmPattern{2, 4}) && sparsegpt.mask.count_kept() == kN * kK / 2 &&
            sparsegpt.quantized.has_value() && gptq.numel() == kN * kK,
        "sparsegpt_prune and gptq_quantize");
  const GradualSchedule schedule{0.0, 0.8, 0, 100, 25};
  Mask gradual(w.shape());
  for (std::int64_t step = 0; step <= 100; ++step)
    if (schedule.is_pruning_step(step)) gradual = prune_to_sparsity(w, schedule.sparsity_at(step), gradual);
  check(gradual.count_pruned() == 819, "GradualSchedule: round(0.8 * 1024) pruned at the end");

  const Mask combined = mask_or(mask_and(random, rows), mask_not(blocks));
  const SparsityReport report =
      sparsity_report({{"w", &combined}, {"wanda", &wanda}, {"wanda_nm", &wanda_nm}, {"gradual", &gradual}});
  check(report.tensors.size() == 4, "sparsity_report");

  // Masks applied; the pruned weight stored as CSR and as 2:4.
  std::vector<float> pruned = w_data, gradient(w_data.size(), 1.0f);
  apply_mask(TensorView<float>(pruned.data(), w.shape()), two_four);
  mask_gradient(TensorView<float>(gradient.data(), w.shape()), two_four);
  const TensorView<const float> pruned_view(pruned.data(), w.shape());
  const shrink::sparse::Csr<float> csr = shrink::sparse::to_csr(pruned_view);
  const shrink::sparse::Csr<float> csr_masked = shrink::sparse::to_csr(w, two_four);
  check(shrink::sparse::to_dense(csr) == pruned && csr_masked.nnz() == two_four.count_kept(), "CSR round trip");
  const auto nm = shrink::sparse::compress_nm(w, two_four, NmPattern{2, 4});
  check(shrink::sparse::decompress_nm(nm) == pruned, "N:M round trip");
  const auto nm_half =
      shrink::sparse::compress_nm(TensorView<const shrink::half>(w_half.data(), w.shape()), NmPattern{2, 4});
  check(!nm_half.metadata.empty(), "2:4 half metadata");
  const shrink::sparse::StorageComparison storage =
      shrink::sparse::storage_comparison(two_four, shrink::ScalarType::f16);
  check(storage.nm_applicable && storage.nm_compressed < storage.dense, "storage_comparison");
}

void linear_products(const std::vector<float>& w_data) {
  using namespace shrink;
  using quant::QuantDtype;
  using quant::QuantScheme;
  using quant::Symmetry;
  const std::vector<float> x_data = pseudo_random(kM * kK, 5), bias = pseudo_random(kN, 6);
  const TensorView<const float> x(x_data.data(), Shape{kM, kK}), w(w_data.data(), Shape{kN, kK});
  const Epilogue epilogue = Epilogue::with_bias(TensorView<const float>(bias.data(), Shape{kN}), Activation::relu);
  std::vector<float> reference(static_cast<std::size_t>(kM * kN)), y(reference.size());
  const TensorView<float> y_view(y.data(), Shape{kM, kN});
  auto close_to_reference = [&](double tolerance) {
    return metrics::max_abs_error(TensorView<const float>(reference.data(), Shape{kM, kN}),
                                  TensorView<const float>(y.data(), Shape{kM, kN})) <= tolerance;
  };

  cpu::linear_f32_eigen(x, w, TensorView<float>(reference.data(), Shape{kM, kN}), epilogue);
  cpu::linear_f32(x, cpu::pack_weight(w), y_view, epilogue);
  check(close_to_reference(1e-4), "linear_f32 against linear_f32_eigen");
  cpu::linear_f32(x, w, y_view, epilogue);

  // Weight-only: int8 per channel, int4 per group, half and bfloat16 weights; float and 16-bit activations.
  const auto w8 = quant::quantize(w, QuantScheme::per_channel(QuantDtype::int8, Symmetry::symmetric, 0));
  const auto w4 = quant::quantize(w, QuantScheme::per_group(QuantDtype::int4, Symmetry::symmetric, 1, 32));
  const std::vector<half> w_half = converted<half>(w_data);
  const std::vector<bfloat16> w_bf16 = converted<bfloat16>(w_data);
  const cpu::PackedWeight<std::int8_t> packed8 = cpu::pack_weight(w8);
  const cpu::PackedInt4Weight packed4 = cpu::pack_weight_int4(w4);
  const cpu::PackedWeight<half> packed_half = cpu::pack_weight(TensorView<const half>(w_half.data(), w.shape()));
  const cpu::PackedWeight<bfloat16> packed_bf16 = cpu::pack_weight_as<bfloat16>(w);
  cpu::linear_weight_only(x, packed8, y_view, epilogue);
  check(close_to_reference(0.05), "linear_weight_only int8");
  cpu::linear_weight_only(x, packed4, y_view, epilogue);
  check(close_to_reference(0.5), "linear_weight_only int4");
  cpu::linear_weight_only(x, packed_half, y_view, epilogue);
  check(close_to_reference(0.01), "linear_weight_only half");
  cpu::linear_weight_only(x, packed_bf16, y_view, epilogue);
  check(close_to_reference(0.05), "linear_weight_only bfloat16");
  cpu::linear_weight_only(x, w8, bias.data(), y_view, Activation::relu);
  cpu::linear_weight_only(x, TensorView<const half>(w_half.data(), w.shape()), y_view, epilogue);
  cpu::linear_weight_only(x, TensorView<const bfloat16>(w_bf16.data(), w.shape()), y_view, epilogue);

  const std::vector<half> x_half = converted<half>(x_data);
  const std::vector<bfloat16> x_bf16 = converted<bfloat16>(x_data);
  const TensorView<const half> xh(x_half.data(), x.shape());
  const TensorView<const bfloat16> xb(x_bf16.data(), x.shape());
  std::vector<half> y_half(y.size());
  std::vector<bfloat16> y_bf16(y.size());
  const TensorView<half> yh(y_half.data(), Shape{kM, kN});
  const TensorView<bfloat16> yb(y_bf16.data(), Shape{kM, kN});
  cpu::linear_weight_only(xh, packed8, yh, epilogue);
  cpu::linear_weight_only(xb, packed4, yb, epilogue);
  cpu::linear_weight_only(xh, packed_half, yh, epilogue);
  cpu::linear_weight_only(xb, packed_bf16, yb, epilogue);
  cpu::linear_weight_only(xh, w8, yh, epilogue);
  cpu::linear_weight_only(xb, w4, yb, epilogue);
  check(std::fabs(static_cast<float>(y_bf16[0]) - reference[0]) < 0.5f, "linear_weight_only bfloat16 activations");

  // INT8 W8A8: static and dynamic activations, float / half / bfloat16 / int8 outputs; the raw int32 product.
  const cpu::PackedInt8Weight w8_packed = cpu::pack_int8_weight(w8);
  const quant::QuantizedTensor xq = cpu::quantize_rows_absmax(x);
  cpu::linear_int8(xq, w8_packed, y_view, epilogue);
  check(close_to_reference(0.1), "linear_int8");
  cpu::linear_int8(xq, w8, yh, epilogue);
  cpu::linear_int8(xq, w8_packed, yb, epilogue);
  cpu::linear_int8(xq, w8, bias.data(), y_view, Activation::gelu);
  std::vector<std::int8_t> y_int8(y.size());
  Epilogue to_int8 = epilogue;
  to_int8.out_scale = 0.05f;
  cpu::linear_int8(xq, w8_packed, TensorView<std::int8_t>(y_int8.data(), Shape{kM, kN}), to_int8);
  cpu::linear_int8_dynamic(x, w8_packed, y_view, epilogue);
  check(close_to_reference(0.1), "linear_int8_dynamic");
  cpu::linear_int8_dynamic(x, w8_packed, yh, epilogue);
  std::vector<std::int8_t> x_int8(x_data.size()), w_int8(w_data.size());
  for (std::size_t i = 0; i < x_int8.size(); ++i) x_int8[i] = static_cast<std::int8_t>(x_data[i] * 100.0f);
  for (std::size_t i = 0; i < w_int8.size(); ++i) w_int8[i] = static_cast<std::int8_t>(w_data[i] * 100.0f);
  std::vector<std::int32_t> acc(y.size());
  cpu::gemm_s8s8s32(TensorView<const std::int8_t>(x_int8.data(), x.shape()),
                    TensorView<const std::int8_t>(w_int8.data(), w.shape()),
                    TensorView<std::int32_t>(acc.data(), Shape{kM, kN}));
  std::int32_t exact = 0;
  for (std::size_t k = 0; k < static_cast<std::size_t>(kK); ++k) exact += x_int8[k] * w_int8[k];
  check(acc[0] == exact, "gemm_s8s8s32");

  // Sparse products: 2:4 (float, half, int8) and CSR (float, half, bfloat16) against the dense product of the
  // pruned weight.
  const prune::Mask two_four = prune::nm_mask(w, prune::NmPattern{2, 4});
  std::vector<float> pruned = w_data;
  prune::apply_mask(TensorView<float>(pruned.data(), w.shape()), two_four);
  const TensorView<const float> pruned_view(pruned.data(), w.shape());
  cpu::linear_f32_eigen(x, pruned_view, TensorView<float>(reference.data(), Shape{kM, kN}), epilogue);
  cpu::linear_nm(x, sparse::compress_nm(w, two_four, prune::NmPattern{2, 4}), y_view, epilogue);
  check(close_to_reference(1e-4), "linear_nm");
  const std::vector<half> pruned_half = converted<half>(pruned);
  const TensorView<const half> pruned_half_view(pruned_half.data(), w.shape());
  cpu::linear_nm(xh, sparse::compress_nm(pruned_half_view, prune::NmPattern{2, 4}), yh, epilogue);
  cpu::linear_nm(xh, sparse::compress_nm(pruned_half_view, prune::NmPattern{2, 4}), y_view, epilogue);
  check(close_to_reference(0.01), "linear_nm half");
  std::vector<std::int8_t> w_int8_pruned(w_int8.size());
  for (std::size_t i = 0; i < w_int8.size(); ++i) w_int8_pruned[i] = pruned[i] == 0.0f ? std::int8_t{0} : w_int8[i];
  const auto nm_int8 = sparse::compress_nm(TensorView<const std::int8_t>(w_int8_pruned.data(), w.shape()), two_four,
                                           prune::NmPattern{2, 4});
  const std::vector<float> x_scales(static_cast<std::size_t>(kM), 0.01f), w_scales(static_cast<std::size_t>(kN), 0.01f);
  Epilogue scaled = epilogue;
  scaled.x_scales = TensorView<const float>(x_scales.data(), Shape{kM});
  scaled.w_scales = TensorView<const float>(w_scales.data(), Shape{kN});
  cpu::linear_nm_int8(TensorView<const std::int8_t>(x_int8.data(), x.shape()), nm_int8, y_view, scaled);
  check(close_to_reference(0.25), "linear_nm_int8");
  scaled.out_scale = 0.05f;
  cpu::linear_nm_int8(TensorView<const std::int8_t>(x_int8.data(), x.shape()), nm_int8,
                      TensorView<std::int8_t>(y_int8.data(), Shape{kM, kN}), scaled);

  cpu::linear_csr(x, sparse::to_csr(pruned_view), y_view, epilogue);
  check(close_to_reference(1e-4), "linear_csr");
  cpu::linear_csr(x, sparse::to_csr(pruned_view), bias.data(), y_view, Activation::silu);
  const std::vector<bfloat16> pruned_bf16 = converted<bfloat16>(pruned);
  cpu::linear_csr(xh, sparse::to_csr(pruned_half_view), yh, epilogue);
  cpu::linear_csr(xb, sparse::to_csr(TensorView<const bfloat16>(pruned_bf16.data(), w.shape())), yb, epilogue);
  check(std::fabs(static_cast<float>(y_half[0]) - reference[0]) < 0.01f, "linear_csr half");
}

void distillation() {
  using namespace shrink::distill;
  constexpr std::int64_t kRows = 4, kClasses = 10, kTopK = 3;
  const std::vector<float> student = pseudo_random(kRows * kClasses, 21), teacher = pseudo_random(kRows * kClasses, 22);
  const TensorView<const float> s(student.data(), Shape{kRows, kClasses}), t(teacher.data(), Shape{kRows, kClasses});
  std::vector<float> grad(student.size()), grad_teacher(student.size());
  const TensorView<float> g(grad.data(), s.shape()), gt(grad_teacher.data(), s.shape());
  SoftTargetOptions soft;
  soft.temperature = 2.0f;

  const Loss kl = kl_div_with_grad(s, t, g, soft);
  check(kl.value > 0.0 && std::fabs(kl.value - kl_div(s, t, soft).value) < 1e-9, "kl_div");
  check(reverse_kl_div_with_grad(s, t, g, soft).value > 0.0, "reverse_kl_div");
  check(jensen_shannon_with_grad(s, t, 0.5, g, soft).value > 0.0, "jensen_shannon");
  check(reverse_kl_div(s, t).value > 0.0 && jensen_shannon(s, t, 0.3).value > 0.0, "soft targets without gradient");

  // The same losses on half logits, and against a top-k teacher.
  const std::vector<shrink::half> student_half = converted<shrink::half>(student),
                                  teacher_half = converted<shrink::half>(teacher);
  std::vector<shrink::half> grad_half(student.size());
  const TensorView<const shrink::half> sh(student_half.data(), s.shape()), th(teacher_half.data(), s.shape());
  const TensorView<shrink::half> gh(grad_half.data(), s.shape());
  check(std::fabs(kl_div_with_grad(sh, th, gh, soft).value - kl.value) < 1e-2, "kl_div half");
  reverse_kl_div_with_grad(sh, th, gh, soft);
  jensen_shannon_with_grad(sh, th, 0.5, gh, soft);

  std::vector<float> top_logits;
  std::vector<std::int64_t> top_indices;
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t j = 0; j < kTopK; ++j) {
      top_logits.push_back(teacher[static_cast<std::size_t>(r * kClasses + j)]);
      top_indices.push_back(j);
    }
  const TopKTeacher<float, std::int64_t> top{TensorView<const float>(top_logits.data(), Shape{kRows, kTopK}),
                                             TensorView<const std::int64_t>(top_indices.data(), Shape{kRows, kTopK})};
  check(kl_div_with_grad(s, top, g, soft).value >= 0.0, "kl_div top-k teacher");
  reverse_kl_div_with_grad(s, top, g, soft);
  jensen_shannon_with_grad(s, top, 0.5, g, soft);
  check(kl_div(s, top).value >= 0.0 && reverse_kl_div(s, top).value >= 0.0 && jensen_shannon(s, top, 0.5).value >= 0.0,
        "top-k teacher without gradient");

  // Hard labels: cross entropy, and the distillation loss with a full and a top-k teacher.
  const std::vector<std::int64_t> labels = {0, 3, 9, -100};
  const TensorView<const std::int64_t> y(labels.data(), Shape{kRows});
  CrossEntropyOptions ce;
  ce.label_smoothing = 0.1f;
  const Loss cross = cross_entropy_with_grad(s, y, g, ce);
  check(cross.value > 0.0 && std::fabs(cross.value - cross_entropy(s, y, ce).value) < 1e-9, "cross_entropy");
  cross_entropy_with_grad(sh, y, gh);
  DistillationOptions kd;
  kd.alpha = 0.7f;
  kd.temperature = 4.0f;
  check(distillation_loss_with_grad(s, t, y, g, kd).value > 0.0, "distillation_loss");
  check(distillation_loss_with_grad(s, top, y, g, kd).value > 0.0, "distillation_loss top-k teacher");
  check(distillation_loss(sh, th, y, kd).value > 0.0, "distillation_loss half");

  // Feature losses with both gradients: MSE, cosine embedding, attention transfer over [B, C, H, W].
  FeatureLossOptions features;
  features.reduction = Reduction::mean;
  check(mse_loss_with_grad(s, t, g, gt, features).value > 0.0 && mse_loss(s, t).value > 0.0, "mse_loss");
  mse_loss_with_grad(sh, th, gh, TensorView<shrink::half>{});
  const std::vector<std::int8_t> target = {1, -1, 1, 1};
  CosineEmbeddingOptions cosine;
  cosine.margin = 0.1;
  check(cosine_embedding_loss_with_grad(s, t, TensorView<const std::int8_t>(target.data(), Shape{kRows}), g, gt, cosine)
                .value >= 0.0,
        "cosine_embedding_loss");
  check(cosine_embedding_loss(s, t).value >= 0.0, "cosine_embedding_loss without gradient");
  const std::vector<float> fs = pseudo_random(2 * 3 * 4 * 4, 31), ft = pseudo_random(2 * 5 * 4 * 4, 32);
  const TensorView<const float> fsv(fs.data(), Shape{2, 3, 4, 4}), ftv(ft.data(), Shape{2, 5, 4, 4});
  std::vector<float> gfs(fs.size()), gft(ft.size()), map(2 * 16);
  check(attention_transfer_loss_with_grad(fsv, ftv, TensorView<float>(gfs.data(), fsv.shape()),
                                          TensorView<float>(gft.data(), ftv.shape()))
                .value > 0.0,
        "attention_transfer_loss");
  check(attention_transfer_loss(fsv, ftv).value > 0.0, "attention_transfer_loss without gradient");
  attention_map(fsv, TensorView<float>(map.data(), Shape{2, 16}));
  double norm = 0.0;
  for (std::size_t p = 0; p < 16; ++p) norm += static_cast<double>(map[p]) * static_cast<double>(map[p]);
  check(std::fabs(norm - 1.0) < 1e-5, "attention_map is normalised");
}

void error_and_size(const std::vector<float>& w_data) {
  using namespace shrink;
  const TensorView<const float> w(w_data.data(), Shape{kN, kK});
  const quant::QuantizedTensor q =
      quant::quantize(w, quant::QuantScheme::per_channel(quant::QuantDtype::int8, quant::Symmetry::affine, 0));
  const std::vector<float> restored = quant::dequantize(q);
  const TensorView<const float> r(restored.data(), w.shape());
  const metrics::ErrorStats stats = metrics::error_stats(w, r);
  metrics::ErrorSums total;
  metrics::accumulate(total, metrics::error_sums(w, r));
  metrics::accumulate(total, metrics::error_sums(w, w));
  const metrics::ErrorStats both = metrics::stats_from_sums(total);
  check(stats.sqnr_db > 30.0 && both.max_abs == stats.max_abs && std::fabs(metrics::mse(w, r) - stats.mse) <= 1e-12,
        "error_stats");
  const metrics::QuantizedSize size = metrics::quantized_size(q);
  check(size.total_bytes() < metrics::dense_bytes(w.shape()) &&
            metrics::compression_ratio(metrics::dense_bytes(w.shape()), size.total_bytes()) > 3.0,
        "quantized_size");
}

#if STRICT_HAS_IO
void model_files(const std::vector<float>& w_data) {
  using namespace shrink;
  const TensorView<const float> w(w_data.data(), Shape{kN, kK});
  const std::string plain = "strict_all_modules.safetensors", packed = "strict_all_modules_quantized.safetensors",
                    widened = "strict_all_modules_dequantized.safetensors";
  {
    io::SafetensorsWriter out(plain);
    out.add_tensor("w", ScalarType::f32, w.shape().to_vector());
    out.add_metadata("format", "pt");
    out.write_header();
    out.write("w", w);
    out.finish();
  }
  const io::SafetensorsFile file(plain);
  const TensorView<const float> stored = file.view<float>("w");
  check(file.tensors().size() == 1 && metrics::max_abs_error(w, stored) == 0.0, "safetensors round trip");

  // The quantized convention: int4 per group, FP8, bfloat16; read back checked and as float.
  const io::EncodedQuantization encoded[] = {
      io::encode_quantized(
          "int4",
          quant::quantize(w, quant::QuantScheme::per_group(quant::QuantDtype::int4, quant::Symmetry::affine, 1, 32)),
          "minmax"),
      io::encode_fp8("fp8", quant::quantize_fp8(w, Fp8Format::e4m3), "amax"),
      io::encode_cast("bf16", w, ScalarType::bf16),
  };
  {
    io::SafetensorsWriter out(packed);
    for (const io::EncodedQuantization& e : encoded) e.declare(out);
    out.write_header();
    for (const io::EncodedQuantization& e : encoded) e.write(out);
    out.finish();
  }
  const io::SafetensorsFile quantized(packed);
  const quant::QuantizedTensor q = io::read_quantized(quantized, "int4");
  check(q.scheme.dtype == quant::QuantDtype::int4 && io::quantization_records(quantized).size() == 3,
        "quantized safetensors records");
  const std::vector<float> fp8 = io::read_float(quantized, "fp8");
  check(metrics::cosine_similarity(w, TensorView<const float>(fp8.data(), w.shape())) > 0.99, "read_float fp8");
  io::dequantize_file(packed, widened);
  const io::SafetensorsFile dequantized(widened);
  const std::vector<float> int4 = quant::dequantize(q);
  check(metrics::max_abs_error(TensorView<const float>(int4.data(), w.shape()), dequantized.view<float>("int4")) == 0.0,
        "dequantize_file");
  for (const std::string& path : {plain, packed, widened}) std::remove(path.c_str());
}
#endif

}  // namespace

int main() {
  const std::vector<float> w = pseudo_random(kN * kK, 1);  // a Linear layer's weight [out, in]
  try {
    quantization(w);
    pruning_and_sparse(w);
    linear_products(w);
    distillation();
    error_and_size(w);
#if STRICT_HAS_IO
    model_files(w);
#else
    std::printf("all_modules: nlohmann_json not found: shrink/io not compiled\n");
#endif
  } catch (const shrink::Error& e) {
    std::printf("all_modules: shrink::Error: %s\n", e.what());
    return 1;
  }
  if (failures != 0) return 1;
  std::printf("all_modules: every module ran and its checks hold\n");
  return 0;
}
