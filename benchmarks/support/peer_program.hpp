// The frame of a benchmark program that times shrink beside a peer run in another process (bench_llm,
// bench_llm_generate): paths configured at build time or taken from the environment, inputs checked before anything
// runs, a temporary work directory, thread pools by count, and main's sequence (prepare, run the repetitions, clean
// up, print the ratio table).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "shrink/core/error.hpp"
#include "shrink/core/executor.hpp"
#include "support/ratio_table.hpp"

namespace shrink::bench {

// The environment variable `name` when set and not empty, else the configured value.
inline std::string from_environment(const char* name, const char* configured) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : configured;
}

// A readable path, or false having said why (prefixed with `program`).
inline bool readable(const char* program, const std::string& path, const char* what) {
  if (access(path.c_str(), R_OK) == 0) return true;
  std::fprintf(stderr, "%s: %s %s: %s\n", program, what, path.c_str(), std::strerror(errno));
  return false;
}

// A new directory under $TMPDIR (else /tmp) named <stem>-XXXXXX, or "" having said why.
inline std::string make_work_dir(const char* program, const std::string& stem) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/" + stem + "-XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) return pattern;
  std::fprintf(stderr, "%s: cannot make a temporary directory %s: %s\n", program, pattern.c_str(),
               std::strerror(errno));
  return "";
}

// Writes count int32 values (token ids, say) to path as little-endian bytes; false having said why.
inline bool write_int32s(const char* program, const std::string& path, const std::int32_t* values, std::size_t count) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values), static_cast<std::streamsize>(count * sizeof(std::int32_t)));
  if (out.flush()) return true;
  std::fprintf(stderr, "%s: cannot write %s\n", program, path.c_str());
  return false;
}

// One thread pool per thread count, made on first use and kept for the program's life.
inline Executor& executor_of(int threads) {
  static std::map<int, std::unique_ptr<ThreadPoolExecutor>> pools;
  auto& pool = pools[threads];
  if (!pool) pool = std::make_unique<ThreadPoolExecutor>(threads);
  return *pool;
}

// main's body: prepare() (unless the benchmarks are only listed), the benchmarks with `repetitions` unless the
// arguments choose, cleanup(), then the ratio table. Exit status 1 when preparing or running failed.
template <class Prepare, class Cleanup>
int run_peer_program(int argc, char** argv, const char* program, int repetitions, Prepare&& prepare,
                     Cleanup&& cleanup) {
  bool listing = false;
  for (int i = 1; i < argc; ++i)
    listing = listing || std::string(argv[i]) == "--benchmark_list_tests=true" ||
              std::string(argv[i]) == "--benchmark_list_tests";
  if (!listing) {
    bool ready = false;
    try {
      ready = prepare();
    } catch (const Error& e) {
      std::fprintf(stderr, "%s: %s\n", program, e.what());
    }
    if (!ready) {
      cleanup();
      return 1;
    }
  }
  set_executor(&serial_executor());
  RecordingReporter reporter;
  const bool ran = run_benchmarks(arguments_with_repetitions(argc, argv, repetitions), reporter);
  cleanup();
  if (!ran) return 1;
  print_ratio_table(reporter);
  return 0;
}

}  // namespace shrink::bench
