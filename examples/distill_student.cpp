// Trains a small student on a teacher's logits with shrink::distill: softmax regression (a linear layer) learns
// from a fixed two-layer teacher, once from noisy hard labels alone (alpha = 0) and once from the teacher's soft
// targets as well (alpha = 0.7, T = 4). Synthetic data; the student's agreement with the teacher is printed.
#include <Eigen/Dense>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "shrink/distill/distillation_loss.hpp"

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

namespace {

constexpr int kFeatures = 32, kHidden = 64, kClasses = 10, kTrain = 4096, kTest = 2048;

struct Data {
  Matrix x;                            // [n, features]
  Matrix teacher_logits;               // [n, classes]
  std::vector<std::int64_t> labels;    // the teacher's class, 20 % replaced at random (noisy annotations)
};

// A fixed random teacher: logits = relu(x U) W.
Data make_data(int n, const Matrix& u, const Matrix& w, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> coin(0.0f, 1.0f);
  std::uniform_int_distribution<int> any_class(0, kClasses - 1);
  Data d;
  d.x = Matrix::NullaryExpr(n, kFeatures, [&] { return normal(rng); });
  d.teacher_logits = (d.x * u).cwiseMax(0.0f) * w;
  d.labels.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    Eigen::Index best = 0;
    d.teacher_logits.row(i).maxCoeff(&best);
    d.labels[static_cast<std::size_t>(i)] = coin(rng) < 0.2f ? any_class(rng) : static_cast<std::int64_t>(best);
  }
  return d;
}

// Fraction of rows where the student's top class is the teacher's.
double agreement(const Matrix& student_logits, const Matrix& teacher_logits) {
  int same = 0;
  for (Eigen::Index i = 0; i < student_logits.rows(); ++i) {
    Eigen::Index s = 0, t = 0;
    student_logits.row(i).maxCoeff(&s);
    teacher_logits.row(i).maxCoeff(&t);
    same += s == t;
  }
  return static_cast<double>(same) / static_cast<double>(student_logits.rows());
}

// Softmax regression trained by minibatch SGD on alpha * KD + (1 - alpha) * CE; returns test agreement.
double train_student(const Data& train, const Data& test, float alpha) {
  constexpr int kBatch = 256, kEpochs = 30;
  constexpr float kLearningRate = 0.5f;
  Matrix weights = Matrix::Zero(kFeatures, kClasses);
  Eigen::RowVectorXf bias = Eigen::RowVectorXf::Zero(kClasses);
  shrink::distill::DistillationOptions options;
  options.alpha = alpha;
  options.temperature = 4.0f;  // soft targets: the teacher's ranking of the wrong classes carries information
  Matrix logits(kBatch, kClasses), grad(kBatch, kClasses);
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    double epoch_loss = 0.0;
    for (int start = 0; start + kBatch <= kTrain; start += kBatch) {
      const auto x = train.x.middleRows(start, kBatch);
      logits = (x * weights).rowwise() + bias;
      const Matrix teacher = train.teacher_logits.middleRows(start, kBatch);
      const shrink::distill::Loss loss = shrink::distill::distillation_loss_with_grad(
          shrink::TensorView<const float>(logits.data(), {kBatch, kClasses}),
          shrink::TensorView<const float>(teacher.data(), {kBatch, kClasses}),
          shrink::TensorView<const std::int64_t>(train.labels.data() + start, kBatch),
          shrink::TensorView<float>(grad.data(), {kBatch, kClasses}), options);
      epoch_loss += loss.value;
      // Back through the linear layer: dW = x^T dlogits, db = column sums.
      weights -= kLearningRate * (x.transpose() * grad);
      bias -= kLearningRate * grad.colwise().sum();
    }
    if (epoch % 10 == 9) std::printf("  alpha %.1f  epoch %2d  loss %.4f\n", alpha, epoch + 1, epoch_loss / (kTrain / kBatch));
  }
  const Matrix test_logits = (test.x * weights).rowwise() + bias;
  return agreement(test_logits, test.teacher_logits);
}

}  // namespace

int main() {
  std::mt19937 rng(2024);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Matrix u = Matrix::NullaryExpr(kFeatures, kHidden, [&] { return normal(rng) / 4.0f; });
  const Matrix w = Matrix::NullaryExpr(kHidden, kClasses, [&] { return normal(rng); });
  const Data train = make_data(kTrain, u, w, rng);
  const Data test = make_data(kTest, u, w, rng);

  std::printf("student: softmax regression, %d features -> %d classes; teacher: %d-unit ReLU layer\n", kFeatures,
              kClasses, kHidden);
  const double hard = train_student(train, test, 0.0f);
  const double distilled = train_student(train, test, 0.7f);
  std::printf("test agreement with the teacher: hard labels %.3f, distilled (alpha 0.7, T 4) %.3f\n", hard, distilled);
  return distilled > hard ? 0 : 1;
}
