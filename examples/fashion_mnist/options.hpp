// The command line of the fashion_mnist program.
#pragma once

#include <optional>

#include "settings.hpp"

namespace fmnist {

// Settings from argv; std::nullopt after printing the usage for --help. A bad option raises shrink::Error.
std::optional<Settings> parse_options(int argc, char** argv);

}  // namespace fmnist
