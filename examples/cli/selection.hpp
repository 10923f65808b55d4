// Which tensors a command works on: --include / --exclude regular expressions over tensor names.
//
// Patterns are ECMAScript regular expressions (std::regex) matched with search semantics: a pattern selects a
// name when it matches anywhere in it, so `fc` selects `fc1.weight`; anchor with ^ and $ for whole names.
// Each option may be given several times; a name is selected when it matches some --include (or when no
// --include was given) and no --exclude.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "args.hpp"

namespace shrink::cli {

class TensorSelection {
 public:
  TensorSelection(const std::vector<std::string>& include, const std::vector<std::string>& exclude)
      : include_(compile(include, "--include")), exclude_(compile(exclude, "--exclude")) {}

  explicit TensorSelection(const ArgParser& args) : TensorSelection(args.values("include"), args.values("exclude")) {}

  bool has_include() const { return !include_.empty(); }
  bool included(const std::string& name) const {
    if (include_.empty()) return true;
    for (const std::regex& r : include_)
      if (std::regex_search(name, r)) return true;
    return false;
  }
  bool excluded(const std::string& name) const {
    for (const std::regex& r : exclude_)
      if (std::regex_search(name, r)) return true;
    return false;
  }
  bool selected(const std::string& name) const { return included(name) && !excluded(name); }

  // The options every selecting command declares.
  static void declare(ArgParser& args) {
    args.option("include", "REGEX", "work only on tensors whose name matches (ECMAScript, anywhere in the name)", {},
                true);
    args.option("exclude", "REGEX", "leave tensors whose name matches unchanged", {}, true);
  }

 private:
  static std::vector<std::regex> compile(const std::vector<std::string>& patterns, const char* option) {
    std::vector<std::regex> out;
    for (const std::string& p : patterns) {
      try {
        out.emplace_back(p, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        throw UsageError(std::string(option) + " = '" + p + "': not a valid regular expression (" + e.what() + ")");
      }
    }
    return out;
  }

  std::vector<std::regex> include_;
  std::vector<std::regex> exclude_;
};

}  // namespace shrink::cli
