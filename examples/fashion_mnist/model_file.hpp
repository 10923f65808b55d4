// Saving an Mlp as safetensors (fc1.weight [out, in], fc1.bias [out], ..., PyTorch's names) and loading it back.
#pragma once

#include <map>
#include <string>

#include "mlp.hpp"

namespace fmnist {

// Writes fc{k}.weight and fc{k}.bias (F32) for every layer, then `metadata` (plus "format": "pt").
void save_mlp(const std::string& path, const Mlp& model, const std::map<std::string, std::string>& metadata = {});

// Reads fc1.*, fc2.*, ... until a layer is missing; shapes must chain ([out, in] after [in, ...]), else shrink::Error.
Mlp load_mlp(const std::string& path);

}  // namespace fmnist
