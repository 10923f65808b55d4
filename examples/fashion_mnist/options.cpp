// Parsing --data, --out, --seed, --epochs, --quick and --help.
#include "options.hpp"

#include <cstdint>
#include <cstdio>
#include <string>

#include "shrink/core/error.hpp"

namespace fmnist {

namespace {

constexpr const char* kUsage =
    "usage: fashion_mnist [--data DIR] [--out DIR] [--seed K] [--epochs E] [--quick]\n"
    "  --data DIR   Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist, Debian's "
    "dataset-fashion-mnist)\n"
    "  --out DIR    where teacher.safetensors and results.json go (default fashion-mnist-out)\n"
    "  --seed K     seeds the data split, every initialisation and batch order (default 1)\n"
    "  --epochs E   teacher training epochs (default 12)\n"
    "  --quick      a smoke run with short training (about 30 s; targets not expected to hold)\n";

std::uint64_t parse_count(const std::string& option, const std::string& text, std::uint64_t minimum,
                          std::uint64_t maximum) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || text[0] == '-' || value < minimum || value > maximum)
    shrink::fail("fmnist::parse_options", option.c_str(), text,
                 "an integer in [" + std::to_string(minimum) + ", " + std::to_string(maximum) + "]");
  return value;
}

}  // namespace

std::optional<Settings> parse_options(int argc, char** argv) {
  Settings settings;
  int epochs = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string option = argv[i];
    if (option == "--help" || option == "-h") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    }
    if (option == "--quick") {
      settings.quick = true;
      continue;
    }
    if (option != "--data" && option != "--out" && option != "--seed" && option != "--epochs")
      shrink::fail("fmnist::parse_options", "option", option, std::string("one of the options below\n") + kUsage);
    if (i + 1 >= argc) shrink::fail("fmnist::parse_options", option.c_str(), "nothing", "a value after it");
    const std::string value = argv[++i];
    if (option == "--data") settings.data_dir = value;
    if (option == "--out") settings.out_dir = value;
    if (option == "--seed") settings.seed = parse_count(option, value, 0, UINT64_MAX);
    if (option == "--epochs") epochs = static_cast<int>(parse_count(option, value, 1, 1000));
  }
  if (settings.quick) settings.make_quick();
  if (epochs > 0) settings.teacher_epochs = epochs;
  return settings;
}

}  // namespace fmnist
