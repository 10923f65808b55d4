// The Eigen types every part of the example shares: row-major matrices (one sample a row, PyTorch's [out, in]).
#pragma once

#include <Eigen/Core>

#include <cstdint>
#include <vector>

namespace fmnist {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Labels = std::vector<std::int64_t>;

}  // namespace fmnist
