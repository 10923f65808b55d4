// Fashion-MNIST in memory (images as floats in [0, 1]) and the seeded split of its training set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlp_types.hpp"

namespace fmnist {

inline constexpr int kImageSide = 28;
inline constexpr int kPixels = kImageSide * kImageSide;
inline constexpr int kClasses = 10;

struct ImageSet {
  RowMatrix images;  // [n, 784], pixel / 255
  Labels labels;     // [n], in [0, 10)
};

struct FashionMnist {
  ImageSet train;  // 60,000 images
  ImageSet test;   // 10,000 images
};

// Reads train-images-idx3-ubyte(.gz) and the three other files from `directory`; a missing directory or file
// raises shrink::Error saying how to install the data (Debian's dataset-fashion-mnist).
FashionMnist load_fashion_mnist(const std::string& directory);

// The rows `indices` of `set`, in that order.
ImageSet select_rows(const ImageSet& set, const std::vector<std::int64_t>& indices);

// How the 60,000 training images are used, from one seeded permutation p of their indices:
//   validation       the last `validation_count` of p: never trained on; the hyperparameters were chosen on it
//   teacher_train    the rest of p, in order
//   student_subset   the first `student_count` of p (a part of teacher_train: the teacher has seen these too)
//   calibration      the next `calibration_count` of p after the student subset (activation ranges for INT8)
struct TrainingSplit {
  std::vector<std::int64_t> teacher_train;
  std::vector<std::int64_t> validation;
  std::vector<std::int64_t> student_subset;
  std::vector<std::int64_t> calibration;
};

TrainingSplit split_training_set(std::int64_t images, std::uint64_t seed, std::int64_t validation_count,
                                 std::int64_t student_count, std::int64_t calibration_count);

}  // namespace fmnist
