// The operand checks every CUDA host API shares (plain C++, no CUDA call): a view of CUDA memory of the right rank,
// on the device of the other operands, not empty, contiguous where the kernel needs it, aligned; the answer is a
// Support naming the argument at fault, as can_implement_* returns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "shrink/core/support.hpp"
#include "shrink/core/view.hpp"

namespace shrink::cuda {

// What a view must be; the defaults: contiguous, not empty, aligned for its element type, on any device.
struct DeviceViewRules {
  int rank = 1;
  int device = -1;            // the ordinal it must live on (that of x), or -1 for any
  std::size_t alignment = 0;  // bytes its pointer is a multiple of; 0: alignof its element type
  bool contiguous = true;     // false: any strides (the caller checks what the kernel needs)
  bool may_be_empty = false;  // true: an empty view passes (and nothing else is asked of it)
};

template <class T>
Support check_device_view(const TensorView<T>& v, const std::string& name, const DeviceViewRules& rules) {
  const std::size_t alignment = rules.alignment > 0 ? rules.alignment : alignof(std::remove_const_t<T>);
  if (!v.device().is_cuda()) return Support::no(name, "a view of host memory", "a CUDA view (Device::cuda(ordinal))");
  if (rules.device >= 0 && v.device().index != rules.device)
    return Support::no(name, "a view on CUDA device " + std::to_string(v.device().index),
                       "the device of x, CUDA device " + std::to_string(rules.device));
  if (v.rank() != rules.rank)
    return Support::no(name + ".shape", to_string(v.shape()), "a " + std::to_string(rules.rank) + "-D tensor");
  if (v.empty()) {
    if (rules.may_be_empty) return Support::yes();
    return Support::no(name + ".shape", to_string(v.shape()), "at least one element");
  }
  if (rules.contiguous && !v.is_contiguous())
    return Support::no(name + ".strides", to_string(v.strides()), "a contiguous row-major view");
  if (v.data() == nullptr) return Support::no(name, "a null pointer", "a device pointer");
  if (reinterpret_cast<std::uintptr_t>(v.data()) % alignment != 0)
    return Support::no(name, "a misaligned pointer", "alignment to " + std::to_string(alignment) + " bytes");
  return Support::yes();
}

}  // namespace shrink::cuda
