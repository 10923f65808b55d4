// Executors in tests: serial and pools of several sizes, a counting wrapper, and the check that an operation gives
// the same bytes on every one of them.
#pragma once

#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "shrink/core/executor.hpp"

namespace shrink::test {

struct NamedExecutor {
  std::string name;
  Executor* executor;
};

// A single-thread pool, pools of 2, 3 and 8 threads (more threads than this machine may have), and serial.
inline std::vector<NamedExecutor> test_executors() {
  static ThreadPoolExecutor one(1), two(2), three(3), eight(8);
  return {{"serial", &serial_executor()},
          {"pool of 1", &one},
          {"pool of 2", &two},
          {"pool of 3", &three},
          {"pool of 8", &eight}};
}

// Passes work to another executor and counts it: how many run() calls and tasks an operation made.
class CountingExecutor final : public Executor {
 public:
  explicit CountingExecutor(Executor& inner) : inner_(inner) {}
  int concurrency() const noexcept override { return inner_.concurrency(); }
  void run(std::int64_t count, TaskRef task) override {
    runs.fetch_add(1);
    tasks.fetch_add(count);
    inner_.run(count, task);
  }
  std::atomic<std::int64_t> runs{0};
  std::atomic<std::int64_t> tasks{0};

 private:
  Executor& inner_;
};

// The bytes of a vector of trivially copyable values.
template <class T, class Allocator>
std::vector<unsigned char> bytes_of(const std::vector<T, Allocator>& v) {
  static_assert(std::is_trivially_copyable<T>::value, "compares bytes");
  std::vector<unsigned char> out(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Runs produce() (returning a vector of trivially copyable values) on every test executor and requires the bytes of
// each result to equal those of the serial run; and, with `min_tasks` > 1, that a pool of 8 cut the work in at least
// that many tasks (so the comparison is not vacuous).
template <class Produce>
void require_same_bytes_on_every_executor(Produce&& produce, std::int64_t min_tasks = 2) {
  const auto serial = [&] {
    ScopedExecutor scope(serial_executor());
    return bytes_of(produce());
  }();
  for (const NamedExecutor& e : test_executors()) {
    INFO("executor: " << e.name);
    CountingExecutor counting(*e.executor);
    ScopedExecutor scope(counting);
    const auto result = bytes_of(produce());
    REQUIRE(result.size() == serial.size());
    CHECK(std::memcmp(result.data(), serial.data(), serial.size()) == 0);
    if (e.executor->concurrency() == 8 && min_tasks > 1) CHECK(counting.tasks.load() >= min_tasks);
  }
}

}  // namespace shrink::test
