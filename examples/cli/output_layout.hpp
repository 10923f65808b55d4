// The order tensors are laid out in an output file: widest element first (F64/I64, then F32/I32, then 16-bit,
// then bytes), input order within a width, so that every tensor starts aligned for its element type.
#pragma once

#include <algorithm>
#include <vector>

#include "shrink/core/dtype.hpp"
#include "shrink/io/safetensors.hpp"

namespace shrink::cli {

inline void sort_for_alignment(std::vector<io::TensorDeclaration>& tensors) {
  std::stable_sort(tensors.begin(), tensors.end(), [](const io::TensorDeclaration& a, const io::TensorDeclaration& b) {
    return element_bits(a.dtype) > element_bits(b.dtype);
  });
}

}  // namespace shrink::cli
