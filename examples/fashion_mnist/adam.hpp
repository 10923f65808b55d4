// Adam (Kingma & Ba 2015) over an Mlp's weights and biases.
#pragma once

#include <cmath>
#include <cstdint>

#include "mlp.hpp"

namespace fmnist {

struct AdamOptions {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

class Adam {
 public:
  explicit Adam(const Mlp& model, AdamOptions options = {}) : options_(options) {
    for (const Linear& l : model.layers) {
      first_.weight.push_back(RowMatrix::Zero(l.weight.rows(), l.weight.cols()));
      first_.bias.push_back(Eigen::VectorXf::Zero(l.bias.size()));
    }
    second_ = first_;
  }

  // m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps).
  void step(Mlp& model, const Gradients& grads, float learning_rate) {
    ++steps_;
    const float first_correction = 1.0f - std::pow(options_.beta1, static_cast<float>(steps_));
    const float second_correction = 1.0f - std::pow(options_.beta2, static_cast<float>(steps_));
    for (std::size_t k = 0; k < model.layers.size(); ++k) {
      update(model.layers[k].weight.array(), first_.weight[k].array(), second_.weight[k].array(),
             grads.weight[k].array(), learning_rate, first_correction, second_correction);
      update(model.layers[k].bias.array(), first_.bias[k].array(), second_.bias[k].array(), grads.bias[k].array(),
             learning_rate, first_correction, second_correction);
    }
  }

 private:
  template <class P, class M, class G>
  void update(P&& param, M&& first, M&& second, const G& grad, float lr, float first_correction,
              float second_correction) const {
    first = options_.beta1 * first + (1.0f - options_.beta1) * grad;
    second = options_.beta2 * second + (1.0f - options_.beta2) * grad.square();
    param -= lr * (first / first_correction) / ((second / second_correction).sqrt() + options_.epsilon);
  }

  AdamOptions options_;
  Gradients first_;   // m
  Gradients second_;  // v
  std::int64_t steps_ = 0;
};

}  // namespace fmnist
