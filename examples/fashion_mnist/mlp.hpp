// The MLP under compression: Linear layers ([out, in] weights, PyTorch's layout) with ReLU between them; forward,
// backward and He initialisation.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "mlp_types.hpp"
#include "random.hpp"

namespace fmnist {

struct Linear {
  RowMatrix weight;      // [out, in]
  Eigen::VectorXf bias;  // [out]
};

struct Mlp {
  std::vector<Linear> layers;

  // Widths from input to output, e.g. {784, 512, 256, 10}.
  std::vector<std::int64_t> widths() const {
    std::vector<std::int64_t> w;
    if (layers.empty()) return w;
    w.push_back(layers.front().weight.cols());
    for (const Linear& l : layers) w.push_back(l.weight.rows());
    return w;
  }
  std::int64_t weight_count() const {
    std::int64_t n = 0;
    for (const Linear& l : layers) n += l.weight.size();
    return n;
  }
  std::int64_t bias_count() const {
    std::int64_t n = 0;
    for (const Linear& l : layers) n += l.bias.size();
    return n;
  }
};

// Weights N(0, 2 / fan_in) (He et al. 2015, for ReLU), biases 0.
inline Mlp he_initialized_mlp(const std::vector<std::int64_t>& widths, std::uint64_t seed) {
  Mlp model;
  Random random(seed);
  for (std::size_t k = 0; k + 1 < widths.size(); ++k) {
    const double std_dev = std::sqrt(2.0 / static_cast<double>(widths[k]));
    Linear layer;
    layer.weight =
        RowMatrix::NullaryExpr(widths[k + 1], widths[k], [&] { return static_cast<float>(std_dev * random.normal()); });
    layer.bias = Eigen::VectorXf::Zero(widths[k + 1]);
    model.layers.push_back(std::move(layer));
  }
  return model;
}

// z = x W^T + b for one layer, x: [batch, in].
inline RowMatrix linear_forward(const Linear& layer, const RowMatrix& x) {
  RowMatrix z = x * layer.weight.transpose();
  z.rowwise() += layer.bias.transpose();
  return z;
}

// Logits [batch, classes]; ReLU after every layer but the last.
inline RowMatrix forward(const Mlp& model, const RowMatrix& x) {
  RowMatrix h = x;
  for (std::size_t k = 0; k < model.layers.size(); ++k) {
    h = linear_forward(model.layers[k], h);
    if (k + 1 < model.layers.size()) h = h.cwiseMax(0.0f);
  }
  return h;
}

// What backward needs from a forward pass: the input of every layer (post-ReLU for the hidden ones), and the logits.
struct ForwardTrace {
  std::vector<RowMatrix> layer_inputs;
  RowMatrix logits;
};

inline ForwardTrace forward_trace(const Mlp& model, const RowMatrix& x) {
  ForwardTrace trace;
  RowMatrix h = x;
  for (std::size_t k = 0; k < model.layers.size(); ++k) {
    RowMatrix z = linear_forward(model.layers[k], h);
    trace.layer_inputs.push_back(std::move(h));
    h = k + 1 < model.layers.size() ? RowMatrix(z.cwiseMax(0.0f)) : std::move(z);
  }
  trace.logits = std::move(h);
  return trace;
}

struct Gradients {
  std::vector<RowMatrix> weight;
  std::vector<Eigen::VectorXf> bias;
};

// Gradients of the loss with respect to every weight and bias, from dloss/dlogits:
//   dW_k = delta_k^T x_k, db_k = sum over rows of delta_k, delta_{k-1} = (delta_k W_k) * [x_k > 0] (ReLU').
inline void backward(const Mlp& model, const ForwardTrace& trace, const RowMatrix& grad_logits, Gradients& grads) {
  const std::size_t layers = model.layers.size();
  grads.weight.resize(layers);
  grads.bias.resize(layers);
  RowMatrix delta = grad_logits;
  for (std::size_t k = layers; k-- > 0;) {
    const RowMatrix& input = trace.layer_inputs[k];
    grads.weight[k].noalias() = delta.transpose() * input;
    grads.bias[k] = delta.colwise().sum().transpose();
    if (k == 0) break;
    RowMatrix upstream = delta * model.layers[k].weight;
    delta = (input.array() > 0.0f).select(upstream, 0.0f);
  }
}

// Index of the largest logit of every row.
inline std::vector<std::int64_t> predicted_classes(const RowMatrix& logits) {
  std::vector<std::int64_t> classes(static_cast<std::size_t>(logits.rows()));
  for (Eigen::Index i = 0; i < logits.rows(); ++i) {
    Eigen::Index best = 0;
    logits.row(i).maxCoeff(&best);
    classes[static_cast<std::size_t>(i)] = best;
  }
  return classes;
}

// Percentage of rows whose largest logit is the label.
inline double accuracy_percent(const RowMatrix& logits, const Labels& labels) {
  const std::vector<std::int64_t> classes = predicted_classes(logits);
  std::int64_t correct = 0;
  for (std::size_t i = 0; i < classes.size(); ++i) correct += classes[i] == labels[i];
  return 100.0 * static_cast<double>(correct) / static_cast<double>(classes.size());
}

}  // namespace fmnist
