// The one check of an Epilogue for a product, and the operation it then becomes (core/epilogue.hpp's EpilogueOp), for
// both backends. A CPU product checks host views and reads them (a finite bias, finite scales > 0); a CUDA product
// checks views of its device and leaves their values to its kernels (the status word's kBadScale and kNonFinite).
// Each answer is a Support naming the argument at fault, its value and what was expected.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/epilogue.hpp"
#include "shrink/core/error.hpp"
#include "shrink/core/overlap.hpp"
#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"

namespace shrink {

// Whether a product takes its scales from the epilogue.
enum class EpilogueScales : std::uint8_t {
  none,      // its operands carry their scales, or have none: x_scales and w_scales empty
  required,  // int8 operands without scales of their own: x_scales [M] or [1], w_scales [N] or [1]
};

// What a product asks of its Epilogue.
struct EpilogueRules {
  std::int64_t m = 0;              // output rows (rows of x)
  std::int64_t n = 0;              // output columns (output features)
  Device device = Device::host();  // where the vectors live: the product's memory
  EpilogueScales scales = EpilogueScales::none;
  bool int8_output = false;  // needs out_scale
  // Why the scales must be empty, in messages (EpilogueScales::none).
  const char* no_scales = "this product's operands carry their own scales, or have none";
};

// Where an epilogue vector lives: the product's memory (the host, or its CUDA device).
inline Support check_vector_device(const TensorView<const float>& v, const std::string& name, Device device) {
  if (device.is_cpu() && !v.device().is_cpu()) return Support::no(name, "a CUDA view", "a view of host memory");
  if (device.is_cuda()) {
    if (!v.device().is_cuda()) return Support::no(name, "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
    if (v.device().index != device.index)
      return Support::no(name, "a view on CUDA device " + std::to_string(v.device().index),
                         "the device of x, CUDA device " + std::to_string(device.index));
  }
  return Support::yes();
}

// A vector of `count` floats (or of 1, when `or_one`), contiguous and aligned where it lives.
inline Support check_epilogue_vector(const TensorView<const float>& v, const std::string& name, std::int64_t count,
                                     bool or_one, Device device, const std::string& meaning) {
  Support s = check_vector_device(v, name, device);
  if (!s) return s;
  if (v.rank() != 1 || (v.size(0) != count && !(or_one && v.size(0) == 1)))
    return Support::no(name + ".shape", to_string(v.shape()),
                       "[" + std::to_string(count) + "]" + (or_one ? " or [1]" : "") + " (" + meaning + ")");
  if (v.data() == nullptr) return Support::no(name, "a null pointer", "a pointer to the floats");
  if (reinterpret_cast<std::uintptr_t>(v.data()) % alignof(float) != 0)
    return Support::no(name, "a misaligned pointer", "alignment to 4 bytes");
  if (v.size(0) > 1 && v.stride(0) != 1)
    return Support::no(name + ".strides", to_string(v.strides()), "a contiguous vector");
  return Support::yes();
}

// Host values: every element finite (and > 0 for scales).
inline Support check_host_floats(const TensorView<const float>& v, const std::string& name, bool positive) {
  for (std::int64_t i = 0; i < v.size(0); ++i) {
    const float value = v.data()[i];
    if (!std::isfinite(value) || (positive && !(value > 0.0f)))
      return Support::no(name + "[" + std::to_string(i) + "]", shrink::to_text(value),
                         positive ? "a finite scale > 0" : "finite values");
  }
  return Support::yes();
}

inline bool has_bias(const Epilogue& e) { return !is_empty_view(e.bias); }

// The epilogue for a product with an [M, N] output: its scales as the product takes them, an empty bias or [N]
// floats, a known activation, an output scale for an int8 output; the vectors where the product runs.
inline Support check_epilogue(const Epilogue& e, const EpilogueRules& rules) {
  const bool on_host = rules.device.is_cpu();
  if (rules.scales == EpilogueScales::none) {
    Support s = check_no_scales(e, rules.no_scales);
    if (!s) return s;
  } else {
    Support s =
        check_epilogue_vector(e.x_scales, "epilogue.x_scales", rules.m, true, rules.device, "per token, or per tensor");
    if (s && on_host) s = check_host_floats(e.x_scales, "epilogue.x_scales", true);
    if (!s) return s;
    s = check_epilogue_vector(e.w_scales, "epilogue.w_scales", rules.n, true, rules.device,
                              "per output channel, or per tensor");
    if (s && on_host) s = check_host_floats(e.w_scales, "epilogue.w_scales", true);
    if (!s) return s;
  }
  if (has_bias(e)) {
    Support s = check_epilogue_vector(e.bias, "epilogue.bias", rules.n, false, rules.device,
                                      "one bias per output feature N, or an empty view");
    if (s && on_host) s = check_host_floats(e.bias, "epilogue.bias", false);
    if (!s) return s;
  }
  if (!is_known(e.activation))
    return Support::no("epilogue.activation", std::to_string(static_cast<int>(e.activation)),
                       "none, relu, gelu or silu");
  if (rules.int8_output && (!(e.out_scale > 0.0f) || !std::isfinite(e.out_scale) || !std::isfinite(1.0f / e.out_scale)))
    return Support::no("epilogue.out_scale", shrink::to_text(e.out_scale),
                       "a finite scale > 0 with a finite inverse, for an int8 output");
  return Support::yes();
}

// That an output of bytes `out` shares none with the epilogue's vectors.
inline Support check_epilogue_apart(const Epilogue& e, ByteSpan out) {
  const std::pair<const char*, const TensorView<const float>*> vectors[] = {
      {"epilogue.x_scales", &e.x_scales}, {"epilogue.w_scales", &e.w_scales}, {"epilogue.bias", &e.bias}};
  for (const auto& [name, view] : vectors)
    if (!is_empty_view(*view) && view->data() != nullptr && spans_overlap(out, byte_span(*view)))
      return Support::no("out", std::string("memory overlapping ") + name, "a separate output");
  return Support::yes();
}

// The rules of a product with an [M, N] output of type Out, on `device`.
template <class Out>
EpilogueRules epilogue_rules(std::int64_t m, std::int64_t n, Device device,
                             EpilogueScales scales = EpilogueScales::none) {
  EpilogueRules rules;
  rules.m = m;
  rules.n = n;
  rules.device = device;
  rules.scales = scales;
  rules.int8_output = std::is_same<std::remove_const_t<Out>, std::int8_t>::value;
  return rules;
}

// check_epilogue, then the output apart from the epilogue's vectors.
template <class Out>
Support check_epilogue(const Epilogue& e, const EpilogueRules& rules, const TensorView<Out>& out) {
  Support s = check_epilogue(e, rules);
  if (!s) return s;
  return check_epilogue_apart(e, byte_span(out));
}

// The operation of an epilogue that check_epilogue accepted for an [M, N] output.
inline EpilogueOp make_epilogue_op(const Epilogue& e, std::int64_t m, std::int64_t n) {
  EpilogueOp op;
  if (!is_empty_view(e.x_scales)) {
    op.x_scales = e.x_scales.data();
    op.x_step = e.x_scales.size(0) == m && m > 1 ? 1 : 0;
  }
  if (!is_empty_view(e.w_scales)) {
    op.w_scales = e.w_scales.data();
    op.w_step = e.w_scales.size(0) == n && n > 1 ? 1 : 0;
  }
  op.bias = has_bias(e) ? e.bias.data() : nullptr;
  op.activation = e.activation;
  if (e.out_scale > 0.0f) {  // read for int8 outputs only, whose out_scale check_epilogue has checked
    op.out_scale = e.out_scale;
    op.inv_out_scale = 1.0f / e.out_scale;
  }
  return op;
}

}  // namespace shrink
