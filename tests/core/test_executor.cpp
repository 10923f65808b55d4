// The executor hook: every task runs once on every executor, exceptions come back to the caller, nested runs and
// concurrent callers finish, the scoped and process-wide settings, an application's own pool behind the interface,
// and parallel_for's chunks depending on the problem alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "shrink/core/executor.hpp"
#include "support/executors.hpp"

using namespace shrink;

TEST_CASE("every executor runs each task exactly once", "[core][executor]") {
  for (const auto& e : test::test_executors()) {
    INFO(e.name);
    for (std::int64_t count : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> calls(static_cast<std::size_t>(count));
      auto task = [&](std::int64_t i) { calls[static_cast<std::size_t>(i)].fetch_add(1); };
      e.executor->run(count, TaskRef(task));
      for (auto& c : calls) REQUIRE(c.load() == 1);
    }
  }
}

TEST_CASE("a pool runs tasks on several threads", "[core][executor]") {
  ThreadPoolExecutor pool(4);
  std::mutex m;
  std::condition_variable cv;
  int arrived = 0;
  // Four tasks that each wait for all four: they finish only if four threads run them at once.
  auto task = [&](std::int64_t) {
    std::unique_lock<std::mutex> lock(m);
    ++arrived;
    cv.notify_all();
    cv.wait(lock, [&] { return arrived == 4; });
  };
  pool.run(4, TaskRef(task));
  REQUIRE(arrived == 4);
}

TEST_CASE("an exception thrown by a task reaches the caller after the other tasks ran", "[core][executor]") {
  for (const auto& e : test::test_executors()) {
    INFO(e.name);
    std::atomic<int> ran{0};
    auto task = [&](std::int64_t i) {
      ran.fetch_add(1);
      if (i == 3) throw std::runtime_error("task 3 failed");
    };
    REQUIRE_THROWS_WITH(e.executor->run(10, TaskRef(task)), "task 3 failed");
    REQUIRE(ran.load() == 10);
    // The executor is still usable.
    std::atomic<int> after{0};
    auto count = [&](std::int64_t) { after.fetch_add(1); };
    e.executor->run(5, TaskRef(count));
    REQUIRE(after.load() == 5);
  }
}

TEST_CASE("nested runs and several calling threads finish", "[core][executor]") {
  ThreadPoolExecutor pool(3);
  std::atomic<std::int64_t> total{0};
  auto outer = [&](std::int64_t) {
    auto inner = [&](std::int64_t i) { total.fetch_add(i); };
    pool.run(100, TaskRef(inner));  // from a worker or the caller: must not deadlock
  };
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) callers.emplace_back([&] { pool.run(8, TaskRef(outer)); });
  for (auto& t : callers) t.join();
  REQUIRE(total.load() == 4 * 8 * (99 * 100 / 2));
}

TEST_CASE("a pool runs short jobs back to back, and wakes after sleeping past its spin", "[core][executor]") {
  // 2 threads: its waits spin first (when the machine has 2 processors); 64: more than any test machine, never spins.
  for (int threads : {2, 64}) {
    ThreadPoolExecutor pool(threads);
    std::atomic<std::int64_t> total{0};
    auto add = [&](std::int64_t i) { total.fetch_add(i + 1); };
    for (int round = 0; round < 2000; ++round) pool.run(4, TaskRef(add));  // workers caught while spinning
    REQUIRE(total.load() == 2000 * 10);
    std::this_thread::sleep_for(std::chrono::microseconds(4 * ThreadPoolExecutor::spin_wait_microseconds));
    pool.run(4, TaskRef(add));  // workers asleep: woken
    REQUIRE(total.load() == 2001 * 10);
  }
}

TEST_CASE("ScopedExecutor overrides set_executor on its thread, and both restore", "[core][executor]") {
  SerialExecutor serial;
  ThreadPoolExecutor pool(2);
  REQUIRE(&current_executor() == &default_executor());
  set_executor(&pool);
  REQUIRE(&current_executor() == &pool);
  {
    ScopedExecutor scope(serial);
    REQUIRE(&current_executor() == &serial);
    {
      ScopedExecutor inner(pool);
      REQUIRE(&current_executor() == &pool);
    }
    REQUIRE(&current_executor() == &serial);
    Executor* seen_elsewhere = nullptr;
    std::thread([&] { seen_elsewhere = &current_executor(); }).join();
    REQUIRE(seen_elsewhere == &pool);  // the scope is this thread's only
  }
  REQUIRE(&current_executor() == &pool);
  set_executor(nullptr);
  REQUIRE(&current_executor() == &default_executor());
  REQUIRE(default_executor().concurrency() == default_thread_count());
}

namespace {

// An application's own pool, as an inference codebase has one: a queue of std::function jobs and its threads.
class AppPool {
 public:
  explicit AppPool(int threads) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] {
        for (;;) {
          std::function<void()> job;
          {
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
            if (jobs_.empty()) return;
            job = std::move(jobs_.front());
            jobs_.pop_front();
          }
          job();
        }
      });
  }
  ~AppPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
};

// shrink's Executor over it, as docs/threads.md shows: one job per pool thread claiming task indices; the caller
// claims too, then waits for the jobs.
class AppPoolExecutor final : public Executor {
 public:
  explicit AppPoolExecutor(AppPool& pool) : pool_(pool) {}
  int concurrency() const noexcept override { return pool_.size() + 1; }
  void run(std::int64_t count, TaskRef task) override {
    std::atomic<std::int64_t> next{0};
    std::mutex m;
    std::condition_variable done;
    int finished = 0;
    std::exception_ptr error;
    auto claim = [&] {
      try {
        for (std::int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
    };
    const int helpers = pool_.size();
    for (int h = 0; h < helpers; ++h)
      pool_.submit([&] {
        claim();
        std::lock_guard<std::mutex> lock(m);
        if (++finished == helpers) done.notify_all();
      });
    claim();
    std::unique_lock<std::mutex> lock(m);
    done.wait(lock, [&] { return finished == helpers; });
    if (error) std::rethrow_exception(error);
  }

 private:
  AppPool& pool_;
};

}  // namespace

TEST_CASE("an application's own pool behind the Executor interface", "[core][executor]") {
  AppPool app(3);
  AppPoolExecutor executor(app);
  ScopedExecutor scope(executor);
  std::vector<std::int64_t> squares(5000);
  parallel_for(5000, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) squares[static_cast<std::size_t>(i)] = i * i;
  });
  for (std::int64_t i = 0; i < 5000; ++i) REQUIRE(squares[static_cast<std::size_t>(i)] == i * i);
}

TEST_CASE("parallel_for's chunks depend on the count and chunk size alone", "[core][executor]") {
  for (const auto& e : test::test_executors()) {
    INFO(e.name);
    ScopedExecutor scope(*e.executor);
    std::mutex m;
    std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
    parallel_for(10, 4, [&](std::int64_t begin, std::int64_t end) {
      std::lock_guard<std::mutex> lock(m);
      chunks.emplace_back(begin, end);
    });
    std::sort(chunks.begin(), chunks.end());
    REQUIRE(chunks == std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 4}, {4, 8}, {8, 10}});
  }
  REQUIRE(chunk_size(1000, 1.0) == 1000);    // cheap items: one chunk
  REQUIRE(chunk_size(1000, 262144.0) == 1);  // each item worth a task
  REQUIRE(chunk_size(1000, 1024.0) == 256);  // 2^18 operations a chunk
  REQUIRE(chunk_size(0, 5.0) == 1);
}
