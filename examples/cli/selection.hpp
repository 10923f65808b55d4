// Which tensors a command works on: --include / --exclude regular expressions over tensor names, and --force for
// the tensors the defaults keep as they are (tensor_roles.hpp).
//
// Patterns are ECMAScript regular expressions (std::regex) matched with search semantics: a pattern selects a
// name when it matches anywhere in it, so `fc` selects `fc1.weight`; anchor with ^ and $ for whole names.
// Each option may be given several times; a name is selected when it matches some --include (or when no
// --include was given) and no --exclude. A tensor the defaults keep (an embedding, the output head, a norm, a bias,
// rank < 2) is worked on only when a --force pattern matches it too. A --include or --force pattern that matches no
// tensor at all is a usage error: it is almost always a typo.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "args.hpp"
#include "shrink/core/error.hpp"

namespace shrink::cli {

class TensorSelection {
 public:
  TensorSelection(const std::vector<std::string>& include, const std::vector<std::string>& exclude)
      : TensorSelection(include, exclude, {}) {}
  TensorSelection(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  const std::vector<std::string>& force)
      : include_patterns_(include),
        force_patterns_(force),
        include_(compile(include, "--include")),
        exclude_(compile(exclude, "--exclude")),
        force_(compile(force, "--force")) {}

  explicit TensorSelection(const ArgParser& args)
      : TensorSelection(args.values("include"), args.values("exclude"), args.values("force")) {}

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
  bool forced(const std::string& name) const {
    for (const std::regex& r : force_)
      if (std::regex_search(name, r)) return true;
    return false;
  }

  // Throws UsageError naming the first --include or --force pattern that matches none of `names`.
  void require_each_pattern_matches(const std::vector<std::string>& names) const {
    auto check = [&](const std::vector<std::string>& patterns, const std::vector<std::regex>& compiled,
                     const char* option) {
      for (std::size_t i = 0; i < compiled.size(); ++i) {
        const bool matched = std::any_of(names.begin(), names.end(),
                                         [&](const std::string& n) { return std::regex_search(n, compiled[i]); });
        if (!matched)
          throw UsageError(std::string(option) + " '" + patterns[i] + "' matches no tensor of the input (see " +
                           "shrink inspect for the names)");
      }
    };
    check(include_patterns_, include_, "--include");
    check(force_patterns_, force_, "--force");
  }

  // The options every selecting command declares.
  static void declare(ArgParser& args) {
    args.option("include", "REGEX", "work only on tensors whose name matches (ECMAScript, anywhere in the name)", {},
                true);
    args.option("exclude", "REGEX", "leave tensors whose name matches unchanged", {}, true);
    args.option("force", "REGEX",
                "also work on tensors the defaults keep (embeddings, output head, norms, biases, rank < 2) "
                "when their name matches",
                {}, true);
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

  std::vector<std::string> include_patterns_;
  std::vector<std::string> force_patterns_;
  std::vector<std::regex> include_;
  std::vector<std::regex> exclude_;
  std::vector<std::regex> force_;
};

// Ends a command that found nothing to work on, saying why: shrink::Error (exit 1) when the input has no float tensor
// left, else UsageError (exit 2) listing the tensors and why each was left alone (notes: name -> why), the ones
// that could not take what was asked first. `verb` is "quantize" or "prune".
[[noreturn]] inline void throw_nothing_to_do(const std::string& verb, std::int64_t float_tensors,
                                             const std::map<std::string, std::string>& notes) {
  std::int64_t already = 0;
  for (const auto& n : notes) already += n.second == "already quantized";
  if (float_tensors == 0) {
    throw shrink::Error("nothing to " + verb + ": the input has no float tensor" +
                        (already > 0 ? " left (" + std::to_string(already) + " tensors are already quantized)" : ""));
  }
  // Those that could not take what was asked first, then those kept by default, then those not selected.
  auto rank = [](const std::string& note) {
    return note.rfind("skipped: ", 0) == 0 ? 0 : note == "not selected" ? 2 : note == "already quantized" ? 3 : 1;
  };
  std::vector<std::string> listed;
  for (int r = 0; r < 3; ++r)
    for (const auto& n : notes)
      if (rank(n.second) == r) listed.push_back(n.first + " (" + n.second + ")");
  std::string text = "nothing to " + verb + ":";
  const std::size_t shown = std::min<std::size_t>(listed.size(), 6);
  for (std::size_t i = 0; i < shown; ++i) text += (i == 0 ? " " : "; ") + listed[i];
  if (listed.size() > shown) text += "; and " + std::to_string(listed.size() - shown) + " more";
  if (already > 0) text += " (" + std::to_string(already) + " tensors are already quantized)";
  throw UsageError(text);
}

}  // namespace shrink::cli
