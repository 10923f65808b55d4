// Reader for golden files written by tests/golden/golden_format.py (format described there).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace shrink::test {

struct GoldenCase {
  std::string name;
  std::map<std::string, std::vector<double>> reals;  // f32 fields hold exact float values
  std::map<std::string, std::vector<std::int64_t>> integers;
  std::map<std::string, std::string> texts;

  std::vector<float> floats(const std::string& key) const {
    const auto& v = at(reals, key);
    return std::vector<float>(v.begin(), v.end());
  }
  const std::vector<double>& doubles(const std::string& key) const { return at(reals, key); }
  const std::vector<std::int64_t>& ints(const std::string& key) const { return at(integers, key); }
  const std::string& text(const std::string& key) const { return at(texts, key); }
  bool has(const std::string& key) const { return reals.count(key) || integers.count(key) || texts.count(key); }

 private:
  template <class Map>
  const typename Map::mapped_type& at(const Map& m, const std::string& key) const {
    auto it = m.find(key);
    if (it == m.end()) throw std::runtime_error("golden case " + name + " has no field " + key);
    return it->second;
  }
};

// Path of a file under tests/ (the build passes SHRINK_TEST_DATA_DIR).
inline std::string test_data_path(const std::string& relative) {
  return std::string(SHRINK_TEST_DATA_DIR) + "/" + relative;
}

inline std::vector<GoldenCase> load_golden(const std::string& relative) {
  const std::string path = test_data_path(relative);
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  std::vector<GoldenCase> cases;
  std::string line;
  GoldenCase current;
  bool open = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string key, type;
    words >> key;
    if (key == "case") {
      current = GoldenCase{};
      words >> current.name;
      open = true;
      continue;
    }
    if (key == "end") {
      if (!open) throw std::runtime_error(path + ": 'end' without 'case'");
      cases.push_back(current);
      open = false;
      continue;
    }
    if (!open) throw std::runtime_error(path + ": field outside a case: " + key);
    words >> type;
    if (type == "str") {
      words >> current.texts[key];
      continue;
    }
    std::size_t count = 0;
    words >> count;
    if (type == "f32" || type == "f64") {
      auto& out = current.reals[key];
      out.reserve(count);
      std::string token;
      for (std::size_t i = 0; i < count && words >> token; ++i) out.push_back(std::strtod(token.c_str(), nullptr));
      if (out.size() != count) throw std::runtime_error(path + ": short field " + key + " in " + current.name);
    } else if (type == "i64") {
      auto& out = current.integers[key];
      out.reserve(count);
      long long v = 0;
      for (std::size_t i = 0; i < count && words >> v; ++i) out.push_back(v);
      if (out.size() != count) throw std::runtime_error(path + ": short field " + key + " in " + current.name);
    } else {
      throw std::runtime_error(path + ": unknown type " + type);
    }
  }
  if (open) throw std::runtime_error(path + ": last case has no 'end'");
  return cases;
}

}  // namespace shrink::test
