// The `shrink` command's argument parser: one ArgParser per subcommand, with positionals, `--name value` /
// `--name=value` options, flags, typed getters that check ranges, and the `--help` text built from the same
// declarations; plus run_command(), which turns errors into a one-line message and an exit code.
//
//   ArgParser args("shrink quantize", "Quantize the weights of a safetensors file.");
//   args.positional("IN", "input .safetensors file").positional("OUT", "output file");
//   args.option("dtype", "TYPE", "int8|uint8|int4|fp16|bf16|fp8-e4m3", "int8").flag("json", "print a JSON summary");
//   if (!args.parse(argc, argv)) return kExitOk;       // --help was printed
//   const std::string dtype = args.choice("dtype", {"int8", "uint8", "int4", "fp16", "bf16", "fp8-e4m3"});
//   const std::int64_t axis = args.integer("axis", -8, 7);
//
// Every problem with the command line throws UsageError (exit code 2); run_command() maps shrink::Error and
// other failures while reading or writing files to exit code 1.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <initializer_list>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "interrupt.hpp"

namespace shrink::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitDataError = 1;   // an unreadable, hostile or unsuitable file; a failed write
inline constexpr int kExitUsageError = 2;  // a bad command line

// A bad command line: unknown option, missing value, value out of range, wrong number of positionals.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

class ArgParser {
 public:
  // `command` is what the user typed to get here ("shrink inspect"); `summary` opens the help text.
  ArgParser(std::string command, std::string summary) : command_(std::move(command)), summary_(std::move(summary)) {}

  // A required positional argument; they are matched in declaration order.
  ArgParser& positional(std::string name, std::string help) {
    positionals_.push_back(Positional{std::move(name), std::move(help)});
    return *this;
  }

  // An option taking a value (`--name VALUE` or `--name=VALUE`). `default_text` is only shown in the help;
  // the getters take their own fallback. A repeatable option collects every value (see values()).
  ArgParser& option(std::string name, std::string value_name, std::string help, std::string default_text = {},
                    bool repeatable = false) {
    declare(Option{std::move(name), std::move(value_name), std::move(help), std::move(default_text), repeatable});
    return *this;
  }

  // An option without a value (`--name`); `--name=...` is an error.
  ArgParser& flag(std::string name, std::string help) {
    declare(Option{std::move(name), {}, std::move(help), {}, false});
    return *this;
  }

  // Free text appended to the help (examples, notes).
  ArgParser& epilog(std::string text) {
    epilog_ = std::move(text);
    return *this;
  }

  // Parses the arguments after the subcommand name. Returns false when `--help` or `-h` was given (the help
  // is then printed on stdout and nothing else is checked); throws UsageError for anything else that is wrong.
  // A value that starts with '-' is still a value when it follows an option (`--axis -1`); `--` ends the
  // options, so later arguments are positionals even when they start with '-'.
  bool parse(int argc, char** argv) {
    for (int i = 0; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--") break;
      if (a == "--help" || a == "-h") {
        std::fputs(help().c_str(), stdout);
        return false;
      }
    }
    bool options_done = false;
    std::vector<std::string> loose;
    for (int i = 0; i < argc; ++i) {
      const std::string arg = argv[i];
      if (options_done || arg == "-" || arg.empty() || arg[0] != '-') {
        loose.push_back(arg);
        continue;
      }
      if (arg == "--") {
        options_done = true;
        continue;
      }
      if (arg.compare(0, 2, "--") != 0) throw UsageError("unknown option " + arg + hint());
      const std::size_t equals = arg.find('=');
      const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
      const auto found = options_.find(name);
      if (found == options_.end()) throw UsageError("unknown option --" + name + hint());
      const Option& spec = found->second;
      std::string value;
      if (spec.value_name.empty()) {
        if (equals != std::string::npos) throw UsageError("option --" + name + " takes no value");
      } else if (equals != std::string::npos) {
        value = arg.substr(equals + 1);
      } else {
        if (i + 1 >= argc) throw UsageError("option --" + name + " needs a value " + spec.value_name);
        value = argv[++i];
      }
      auto& seen = given_[name];
      if (!seen.empty() && !spec.repeatable) throw UsageError("option --" + name + " given more than once");
      seen.push_back(std::move(value));
    }
    if (loose.size() < positionals_.size())
      throw UsageError("missing " + positionals_[loose.size()].name + hint());
    if (loose.size() > positionals_.size())
      throw UsageError("unexpected argument '" + loose[positionals_.size()] + "'" + hint());
    for (std::size_t k = 0; k < loose.size(); ++k) positional_values_[positionals_[k].name] = loose[k];
    return true;
  }

  // The value of a positional, by its declared name.
  const std::string& arg(const std::string& name) const {
    const auto found = positional_values_.find(name);
    if (found == positional_values_.end()) throw std::logic_error("ArgParser: no positional " + name);
    return found->second;
  }

  bool has(const std::string& name) const {
    require_declared(name);
    return given_.count(name) != 0;
  }
  // Whether a flag was given.
  bool flag_set(const std::string& name) const { return has(name); }

  // The option's (last) value, or nothing when it was not given.
  std::optional<std::string> value(const std::string& name) const {
    if (!has(name)) return std::nullopt;
    return given_.at(name).back();
  }
  std::string text(const std::string& name, const std::string& fallback) const {
    return value(name).value_or(fallback);
  }
  // Every value of a repeatable option, in command-line order.
  std::vector<std::string> values(const std::string& name) const {
    if (!has(name)) return {};
    return given_.at(name);
  }

  // An integer in [min, max]; `fallback` when the option was not given.
  std::int64_t integer(const std::string& name, std::int64_t min, std::int64_t max, std::int64_t fallback = 0) const {
    const auto v = value(name);
    if (!v) return fallback;
    errno = 0;
    char* end = nullptr;
    const long long parsed = std::strtoll(v->c_str(), &end, 10);
    if (v->empty() || *end != '\0' || errno == ERANGE || parsed < min || parsed > max)
      throw UsageError("--" + name + " = '" + *v + "': expected an integer in [" + std::to_string(min) + ", " +
                       std::to_string(max) + "]");
    return parsed;
  }

  // A finite number in [min, max] (or [min, max) when `max_exclusive`); `fallback` when not given.
  double number(const std::string& name, double min, double max, double fallback, bool max_exclusive = false) const {
    const auto v = value(name);
    if (!v) return fallback;
    return parse_number("--" + name, *v, min, max, max_exclusive);
  }

  // One of `choices`; `fallback` when not given.
  std::string choice(const std::string& name, std::initializer_list<const char*> choices,
                     const std::string& fallback) const {
    const auto v = value(name);
    if (!v) return fallback;
    std::string list;
    for (const char* c : choices) {
      if (*v == c) return *v;
      list += list.empty() ? c : std::string("|") + c;
    }
    throw UsageError("--" + name + " = '" + *v + "': expected one of " + list);
  }

  // Parses `text` as a finite number in [min, max] (or [min, max)); `what` names it in the error.
  static double parse_number(const std::string& what, const std::string& text, double min, double max,
                             bool max_exclusive = false) {
    errno = 0;
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    const bool inside = parsed >= min && (max_exclusive ? parsed < max : parsed <= max);
    if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(parsed) || !inside)
      throw UsageError(what + " = '" + text + "': expected a number in [" + format(min) + ", " + format(max) +
                       (max_exclusive ? ")" : "]"));
    return parsed;
  }

  const std::string& command() const { return command_; }

  std::string help() const {
    std::string out = "usage: " + command_;
    for (const Positional& p : positionals_) out += " " + p.name;
    if (!order_.empty()) out += " [options]";
    out += "\n\n" + summary_ + "\n";
    // Two columns: the option at 2, its description at 26, words wrapped before column 100.
    auto row = [&out](const std::string& left, const std::string& right) {
      constexpr std::size_t kIndent = 26, kWidth = 100;
      std::string line = "  " + left;
      if (line.size() < kIndent) line.append(kIndent - line.size(), ' ');
      else out += line + "\n", line = std::string(kIndent, ' ');
      std::size_t start = 0;
      bool first_word = true;
      while (start < right.size()) {
        std::size_t end = right.find(' ', start);
        if (end == std::string::npos) end = right.size();
        const std::string word = right.substr(start, end - start);
        if (!first_word && line.size() + 1 + word.size() > kWidth) {
          out += line + "\n";
          line = std::string(kIndent, ' ');
          first_word = true;
        }
        line += (first_word ? "" : " ") + word;
        first_word = false;
        start = end + 1;
      }
      out += line + "\n";
    };
    if (!positionals_.empty()) {
      out += "\narguments:\n";
      for (const Positional& p : positionals_) row(p.name, p.help);
    }
    out += "\noptions:\n";
    for (const std::string& name : order_) {
      const Option& o = options_.at(name);
      std::string right = o.help;
      if (!o.default_text.empty()) right += " (default " + o.default_text + ")";
      if (o.repeatable) right += " (repeatable)";
      row("--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name), right);
    }
    row("-h, --help", "show this help and exit");
    if (!epilog_.empty()) out += "\n" + epilog_ + (epilog_.back() == '\n' ? "" : "\n");
    return out;
  }

 private:
  struct Positional {
    std::string name;
    std::string help;
  };
  struct Option {
    std::string name;
    std::string value_name;  // empty for a flag
    std::string help;
    std::string default_text;
    bool repeatable;
  };

  void declare(Option o) {
    if (o.name.empty() || o.name == "help" || options_.count(o.name))
      throw std::logic_error("ArgParser: option --" + o.name + " declared twice or reserved");
    order_.push_back(o.name);
    options_.emplace(o.name, std::move(o));
  }
  void require_declared(const std::string& name) const {
    if (!options_.count(name)) throw std::logic_error("ArgParser: option --" + name + " was never declared");
  }
  std::string hint() const { return " (see " + command_ + " --help)"; }
  static std::string format(double v) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", v);
    return buffer;
  }

  std::string command_;
  std::string summary_;
  std::string epilog_;
  std::vector<Positional> positionals_;
  std::vector<std::string> order_;  // options in declaration order, for the help
  std::map<std::string, Option> options_;
  std::map<std::string, std::vector<std::string>> given_;
  std::map<std::string, std::string> positional_values_;
};

// The message without the C++ names the library puts before its messages ("shrink::quant::Observer::observe: "):
// they mean nothing to a user of the command.
inline std::string without_cpp_names(const std::string& message) {
  std::string text = message;
  for (std::size_t at = text.find("shrink::"); at != std::string::npos; at = text.find("shrink::", at)) {
    std::size_t end = at;
    while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_' ||
                                 text[end] == ':' || text[end] == '<' || text[end] == '>'))
      ++end;
    const bool starts_part = at == 0 || (at >= 2 && text.compare(at - 2, 2, ": ") == 0);
    // The name ends with the ':' of ": ", which the loop took in: cut "name: ".
    if (starts_part && end > at + 1 && text[end - 1] == ':' && end < text.size() && text[end] == ' ')
      text.erase(at, end + 1 - at);
    else
      at = end;
  }
  return text;
}

// The one-line error every subcommand prints: "<command>: error: <message>" on stderr, newlines flattened.
inline void print_error(const std::string& command, const std::string& message) {
  std::string line = without_cpp_names(message);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "%s: error: %s\n", command.c_str(), line.c_str());
}

// Runs a subcommand's body and maps what escapes it to an exit code with a one-line error on stderr:
// UsageError -> 2; shrink::Error, std::exception (I/O, bad_alloc, ...) -> 1.
template <class Body>
int run_command(const std::string& command, Body&& body) {
  try {
    return body();
  } catch (const Interrupted& e) {
    print_error(command, e.what());
    return 128 + e.signal();
  } catch (const UsageError& e) {
    print_error(command, e.what());
    return kExitUsageError;
  } catch (const std::exception& e) {
    print_error(command, e.what());
    return kExitDataError;
  }
}

}  // namespace shrink::cli
