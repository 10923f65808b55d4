// Loading Fashion-MNIST from its four IDX files and splitting the training set by a seeded permutation.
#include "dataset.hpp"

#include <filesystem>
#include <numeric>

#include "idx_reader.hpp"
#include "random.hpp"
#include "shrink/core/error.hpp"

namespace fmnist {

namespace {

constexpr const char* kInstallHint =
    "install Debian's dataset-fashion-mnist (sudo apt install dataset-fashion-mnist) or pass --data DIR "
    "holding train-images-idx3-ubyte.gz and the three other IDX files";

// `stem`.gz when present, else `stem` (an uncompressed copy).
std::string find_idx_file(const std::string& directory, const std::string& stem) {
  namespace fs = std::filesystem;
  const fs::path gz = fs::path(directory) / (stem + ".gz");
  if (fs::exists(gz)) return gz.string();
  const fs::path plain = fs::path(directory) / stem;
  if (fs::exists(plain)) return plain.string();
  shrink::fail("fmnist::load_fashion_mnist", "file", gz.string(), std::string("an existing file: ") + kInstallHint);
}

ImageSet load_image_set(const std::string& directory, const std::string& prefix) {
  const char* fn = "fmnist::load_fashion_mnist";
  const std::string image_path = find_idx_file(directory, prefix + "-images-idx3-ubyte");
  const std::string label_path = find_idx_file(directory, prefix + "-labels-idx1-ubyte");
  const IdxArray images = read_idx_file(image_path, 3);
  const IdxArray labels = read_idx_file(label_path, 1);
  if (images.dims[1] != kImageSide || images.dims[2] != kImageSide)
    shrink::fail(fn, image_path.c_str(), std::to_string(images.dims[1]) + "x" + std::to_string(images.dims[2]),
                 "28x28 images");
  if (labels.dims[0] != images.dims[0])
    shrink::fail(fn, label_path.c_str(), std::to_string(labels.dims[0]) + " labels",
                 "one label per image (" + std::to_string(images.dims[0]) + ")");
  ImageSet set;
  const std::int64_t n = images.dims[0];
  set.images = (Eigen::Map<const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                    images.values.data(), n, kPixels)
                    .cast<float>() /
                255.0f);
  set.labels.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint8_t label = labels.values[static_cast<std::size_t>(i)];
    if (label >= kClasses)
      shrink::fail(fn, (label_path + " label " + std::to_string(i)).c_str(), static_cast<int>(label),
                   "a class in [0, 10)");
    set.labels[static_cast<std::size_t>(i)] = label;
  }
  return set;
}

}  // namespace

FashionMnist load_fashion_mnist(const std::string& directory) {
  if (!std::filesystem::is_directory(directory))
    shrink::fail("fmnist::load_fashion_mnist", "directory", directory,
                 std::string("an existing directory: ") + kInstallHint);
  FashionMnist data;
  data.train = load_image_set(directory, "train");
  data.test = load_image_set(directory, "t10k");
  return data;
}

ImageSet select_rows(const ImageSet& set, const std::vector<std::int64_t>& indices) {
  ImageSet out;
  out.images = set.images(indices, Eigen::all);
  out.labels.reserve(indices.size());
  for (std::int64_t i : indices) out.labels.push_back(set.labels[static_cast<std::size_t>(i)]);
  return out;
}

TrainingSplit split_training_set(std::int64_t images, std::uint64_t seed, std::int64_t validation_count,
                                 std::int64_t student_count, std::int64_t calibration_count) {
  const char* fn = "fmnist::split_training_set";
  if (validation_count < 0 || validation_count >= images)
    shrink::fail(fn, "validation_count", validation_count, "fewer than the " + std::to_string(images) + " images");
  const std::int64_t trainable = images - validation_count;
  if (student_count < 1 || calibration_count < 1 || student_count + calibration_count > trainable)
    shrink::fail(fn, "student_count + calibration_count", student_count + calibration_count,
                 "at most the " + std::to_string(trainable) + " images outside the validation set");
  std::vector<std::int64_t> order(static_cast<std::size_t>(images));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  Random random(derive_seed(seed, SeedStream::split));
  random.shuffle(order);
  const auto at = [&](std::int64_t k) { return order.begin() + static_cast<std::ptrdiff_t>(k); };
  TrainingSplit split;
  split.teacher_train.assign(at(0), at(trainable));
  split.validation.assign(at(trainable), order.end());
  split.student_subset.assign(at(0), at(student_count));
  split.calibration.assign(at(student_count), at(student_count + calibration_count));
  return split;
}

}  // namespace fmnist
