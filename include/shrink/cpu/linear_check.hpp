// can_implement for the CPU linear layers: LinearSupport says whether operands can run and, when not, which
// argument is wrong, its value and what was expected; plus the checks every linear path shares (activations,
// output, epilogue, overlap).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/core/half.hpp"
#include "shrink/core/view.hpp"
#include "shrink/cpu/linear_epilogue.hpp"

namespace shrink::cpu {

// The answer of a can_implement_* query: ok, or the argument at fault with its value and the expectation.
struct LinearSupport {
  bool ok = true;
  std::string argument;
  std::string value;
  std::string expected;

  explicit operator bool() const { return ok; }
  // "argument = value: expected ...", empty when ok.
  std::string reason() const { return ok ? std::string() : argument + " = " + value + ": expected " + expected; }

  static LinearSupport yes() { return LinearSupport{}; }
  static LinearSupport no(std::string argument, std::string value, std::string expected) {
    return LinearSupport{false, std::move(argument), std::move(value), std::move(expected)};
  }
};

// Throws shrink::Error naming `function` when the operands cannot run.
inline void require_supported(const LinearSupport& support, const char* function) {
  if (!support) fail(function, support.argument.c_str(), support.value, support.expected);
}

namespace detail {

// The element type's name in messages: float, half, bfloat16, int8 (the CPU linear layers and the CUDA GEMMs).
template <class T>
const char* linear_type_name() {
  if constexpr (std::is_same_v<T, float>)
    return "float";
  else if constexpr (std::is_same_v<T, half>)
    return "half";
  else if constexpr (std::is_same_v<T, bfloat16>)
    return "bfloat16";
  else if constexpr (std::is_same_v<T, std::int8_t>)
    return "int8";
  else
    return "another type";
}

// Bytes spanned by a host view: from its first element to one past its last.
template <class T>
std::pair<std::uintptr_t, std::uintptr_t> byte_span(const TensorView<T>& v) {
  const auto begin = reinterpret_cast<std::uintptr_t>(v.data());
  if (v.numel() == 0) return {begin, begin};
  std::int64_t last = 0;
  for (int d = 0; d < v.rank(); ++d) last += (v.size(d) - 1) * v.stride(d);
  return {begin, begin + static_cast<std::uintptr_t>(last + 1) * sizeof(T)};
}

inline bool spans_overlap(std::pair<std::uintptr_t, std::uintptr_t> a, std::pair<std::uintptr_t, std::uintptr_t> b) {
  return a.first < b.second && b.first < a.second;
}

template <class T, class U>
bool views_overlap(const TensorView<T>& a, const TensorView<U>& b) {
  return spans_overlap(byte_span(a), byte_span(b));
}

// The common checks of a 2-D host operand; `name` is the argument's name in messages.
template <class T>
LinearSupport check_matrix(const TensorView<T>& v, const char* name) {
  if (!v.device().is_cpu()) return LinearSupport::no(name, "a CUDA view", "a view of host memory");
  if (v.rank() != 2) return LinearSupport::no(std::string(name) + ".shape", to_string(v.shape()), "a 2-D tensor");
  if (v.empty()) return LinearSupport::no(std::string(name) + ".shape", to_string(v.shape()), "at least one element");
  if (v.data() == nullptr) return LinearSupport::no(name, "a null pointer", "a pointer to the elements");
  if (reinterpret_cast<std::uintptr_t>(v.data()) % alignof(std::remove_const_t<T>) != 0)
    return LinearSupport::no(name, "a misaligned pointer",
                             "alignment to " + std::to_string(alignof(std::remove_const_t<T>)) + " bytes");
  return LinearSupport::yes();
}

// Activations x (float, or half / bfloat16 for the weight-only layers): a host [M, K] view of any strides.
template <class X>
LinearSupport check_activations(const TensorView<const X>& x, std::int64_t k) {
  LinearSupport s = check_matrix(x, "x");
  if (!s) return s;
  if (x.size(1) != k)
    return LinearSupport::no("x.shape", to_string(x.shape()),
                             "[M, " + std::to_string(k) + "]: K equal to the weight's input size");
  return s;
}

// The output: a host [M, N] view (float, or a CPU twin's half, bfloat16 or int8) whose rows are contiguous (any row
// stride).
template <class T>
LinearSupport check_output(const TensorView<T>& out, std::int64_t m, std::int64_t n) {
  LinearSupport s = check_matrix(out, "out");
  if (!s) return s;
  if (out.size(0) != m || out.size(1) != n)
    return LinearSupport::no("out.shape", to_string(out.shape()), to_string(Shape{m, n}) + " ([M, N])");
  if (n > 1 && out.stride(1) != 1)
    return LinearSupport::no("out.strides", to_string(out.strides()), "contiguous rows (stride 1 along N)");
  return s;
}

// No bias: a default (rank-0, null) view or a [0] view.
inline bool has_bias(const LinearEpilogue& e) {
  return !((e.bias.rank() == 0 && e.bias.data() == nullptr) || (e.bias.rank() == 1 && e.bias.size(0) == 0));
}

// An int8 output requantizes with epilogue.output_scale: finite and > 0, with a finite inverse.
template <class T>
LinearSupport check_output_scale(const LinearEpilogue& e) {
  if (!std::is_same<std::remove_const_t<T>, std::int8_t>::value) return LinearSupport::yes();
  if (!(e.output_scale > 0.0f) || !std::isfinite(e.output_scale) || !std::isfinite(1.0f / e.output_scale))
    return LinearSupport::no("epilogue.output_scale", shrink::detail::to_text(e.output_scale),
                             "a finite scale > 0 with a finite inverse, for an int8 output");
  return LinearSupport::yes();
}

// The epilogue: an empty bias or a [N] host vector of finite floats, a known activation, an output scale for int8
// outputs, no overlap with out.
template <class T>
LinearSupport check_epilogue(const LinearEpilogue& e, std::int64_t n, const TensorView<T>& out) {
  const LinearSupport scale = check_output_scale<T>(e);
  if (!scale) return scale;
  if (e.activation != Activation::none && e.activation != Activation::relu && e.activation != Activation::gelu &&
      e.activation != Activation::silu)
    return LinearSupport::no("epilogue.activation", std::to_string(static_cast<int>(e.activation)),
                             "none, relu, gelu or silu");
  if (!has_bias(e)) return LinearSupport::yes();
  if (!e.bias.device().is_cpu()) return LinearSupport::no("epilogue.bias", "a CUDA view", "a view of host memory");
  if (e.bias.rank() != 1 || e.bias.size(0) != n)
    return LinearSupport::no("epilogue.bias.shape", to_string(e.bias.shape()),
                             "[" + std::to_string(n) + "] (one bias per output feature N) or an empty view");
  if (e.bias.data() == nullptr) return LinearSupport::no("epilogue.bias", "a null pointer", "a pointer to N floats");
  if (n > 1 && e.bias.stride(0) != 1)
    return LinearSupport::no("epilogue.bias.strides", to_string(e.bias.strides()), "a contiguous vector");
  for (std::int64_t j = 0; j < n; ++j)
    if (!std::isfinite(e.bias(j)))
      return LinearSupport::no("epilogue.bias[" + std::to_string(j) + "]", shrink::detail::to_text(e.bias(j)),
                               "finite values");
  if (views_overlap(e.bias, out))
    return LinearSupport::no("out", "memory overlapping epilogue.bias", "a separate output");
  return LinearSupport::yes();
}

// The checks every float-activation linear layer shares: x [M, K], out [M, N], the epilogue, x apart from out.
template <class X, class Y>
LinearSupport check_linear_operands(const TensorView<const X>& x, std::int64_t k, std::int64_t n,
                                    const TensorView<Y>& out, const LinearEpilogue& epilogue) {
  LinearSupport s = check_activations(x, k);
  if (!s) return s;
  s = check_output(out, x.size(0), n);
  if (!s) return s;
  s = check_epilogue(epilogue, n, out);
  if (!s) return s;
  if (views_overlap(x, out)) return LinearSupport::no("out", "memory overlapping x", "a separate output");
  return s;
}

// out must not share memory with an input of `bytes` bytes at `data`.
template <class T>
LinearSupport check_no_overlap(const TensorView<T>& out, const void* data, std::size_t bytes,
                               const char* input_name) {
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  if (bytes > 0 && spans_overlap(byte_span(out), {begin, begin + bytes}))
    return LinearSupport::no("out", std::string("memory overlapping ") + input_name, "a separate output");
  return LinearSupport::yes();
}

// Row-contiguous activations: x itself, or a row-major copy kept in `storage`; ldx is the row stride.
inline const float* contiguous_rows(const TensorView<const float>& x, std::vector<float>& storage, std::int64_t& ldx) {
  if (x.stride(1) == 1 || x.size(1) == 1) {
    ldx = x.stride(0);
    return x.data();
  }
  storage = contiguous_copy(x);
  ldx = x.size(1);
  return storage.data();
}

// The bias pointer of the epilogue (null when there is none).
inline const float* bias_data(const LinearEpilogue& e) { return has_bias(e) ? e.bias.data() : nullptr; }

}  // namespace detail
}  // namespace shrink::cpu
