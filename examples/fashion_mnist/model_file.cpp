// The safetensors round trip of an Mlp through shrink::io (see model_file.hpp).
#include "model_file.hpp"

#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/cpu/eigen.hpp"
#include "shrink/io/safetensors.hpp"

namespace fmnist {

namespace {

std::string weight_name(std::size_t k) { return "fc" + std::to_string(k + 1) + ".weight"; }
std::string bias_name(std::size_t k) { return "fc" + std::to_string(k + 1) + ".bias"; }

}  // namespace

void save_mlp(const std::string& path, const Mlp& model, const std::map<std::string, std::string>& metadata) {
  shrink::io::SafetensorsWriter writer(path);
  for (std::size_t k = 0; k < model.layers.size(); ++k) {
    const Linear& l = model.layers[k];
    writer.add_tensor(weight_name(k), shrink::ScalarType::f32, {l.weight.rows(), l.weight.cols()});
    writer.add_tensor(bias_name(k), shrink::ScalarType::f32, {l.bias.size()});
  }
  writer.add_metadata("format", "pt");
  for (const auto& [key, value] : metadata) writer.add_metadata(key, value);
  writer.write_header();
  for (std::size_t k = 0; k < model.layers.size(); ++k) {
    writer.write(weight_name(k), shrink::as_view(model.layers[k].weight));
    writer.write(bias_name(k), shrink::as_view(model.layers[k].bias));
  }
  writer.finish();
}

Mlp load_mlp(const std::string& path) {
  const char* fn = "fmnist::load_mlp";
  const shrink::io::SafetensorsFile file(path);
  Mlp model;
  for (std::size_t k = 0; file.contains(weight_name(k)); ++k) {
    const shrink::TensorView<const float> w = file.view<float>(weight_name(k));
    if (!file.contains(bias_name(k))) shrink::fail(fn, "tensor", bias_name(k), "present beside " + weight_name(k));
    const shrink::TensorView<const float> b = file.view<float>(bias_name(k));
    if (w.rank() != 2) shrink::fail(fn, weight_name(k).c_str(), shrink::to_string(w.shape()), "a 2-D [out, in] weight");
    if (b.rank() != 1 || b.size(0) != w.size(0))
      shrink::fail(fn, bias_name(k).c_str(), shrink::to_string(b.shape()), "[" + std::to_string(w.size(0)) + "]");
    if (!model.layers.empty() && w.size(1) != model.layers.back().weight.rows())
      shrink::fail(fn, weight_name(k).c_str(), shrink::to_string(w.shape()),
                   std::to_string(model.layers.back().weight.rows()) + " inputs, the outputs of the layer before");
    Linear layer;
    layer.weight = shrink::as_eigen(w);
    layer.bias = Eigen::Map<const Eigen::VectorXf>(b.data(), b.size(0));
    model.layers.push_back(std::move(layer));
  }
  if (model.layers.empty()) shrink::fail(fn, "path", path, "a file holding fc1.weight and fc1.bias");
  return model;
}

}  // namespace fmnist
