// The forward-pass goldens of gen_forward_golden.py (testdata/forward_golden.txt, smollm_golden.txt): a line
// "ids <id> ...", then a line "<row> <nll_sum> <predictions>" per reference row; '#' starts a comment line.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "shrink/core/error.hpp"

namespace llm {

struct ForwardGolden {
  std::vector<std::int32_t> ids;
  std::map<std::string, double> nll;  // reference row name -> NLL sum
  std::int64_t predictions = 0;
};

inline ForwardGolden read_forward_golden(const std::string& path) {
  std::ifstream in(path);
  if (!in) shrink::fail("llm::read_forward_golden", "path", path, "a readable golden file");
  ForwardGolden g;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name;
    fields >> name;
    if (name == "ids") {
      for (std::int32_t id; fields >> id;) g.ids.push_back(id);
    } else {
      fields >> g.nll[name] >> g.predictions;
    }
  }
  return g;
}

}  // namespace llm
