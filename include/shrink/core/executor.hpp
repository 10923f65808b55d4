// The executor hook: how shrink's long-running CPU operations (matrix products, quantize / dequantize, calibration
// statistics, threshold selection, the distillation losses) run their independent tasks in parallel.
//
//   Executor             the interface: run(count, task) calls task(i) once for every i in [0, count), on any
//                        threads, and returns when all have returned. Subclass it to use an application's own pool.
//   ThreadPoolExecutor   the standard-library one: threads − 1 std::thread workers, the calling thread working too.
//   SerialExecutor       everything on the calling thread, in order.
//   default_executor()   a ThreadPoolExecutor of std::thread::hardware_concurrency() threads (SHRINK_NUM_THREADS,
//                        when set to a number ≥ 1, overrides the count), made on first use.
//   set_executor(e)      the process-wide executor (nullptr: back to the default); ScopedExecutor overrides it for
//                        the current thread until the end of a scope.
//
// Results never depend on the executor: an operation cuts its work in chunks fixed by the problem's size alone
// (parallel_for below), writes each output from exactly one chunk, and combines partial results, where it has
// any, in chunk order. Every executor and thread count gives the same bits (tested in tests/core and beside each
// operation).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace shrink {

// A non-owning reference to a callable void(std::int64_t): what Executor::run is given (no allocation per call).
class TaskRef {
 public:
  template <class F, class = std::enable_if_t<!std::is_same<std::decay_t<F>, TaskRef>::value>>
  TaskRef(F& f) noexcept  // NOLINT(google-explicit-constructor): passed where a lambda is written
      : object_(static_cast<void*>(std::addressof(f))),
        call_([](void* o, std::int64_t i) { (*static_cast<F*>(o))(i); }) {}

  void operator()(std::int64_t i) const { call_(object_, i); }

 private:
  void* object_;
  void (*call_)(void*, std::int64_t);
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Threads that may run tasks at the same time (1: serial). Operations skip the executor when it is 1.
  virtual int concurrency() const noexcept = 0;
  // Calls task(i) for every i in [0, count), each once, on any threads (the calling one included), and returns
  // after every call has returned. A task that throws: the others still run, then one of the exceptions is
  // rethrown here. May be called from inside a task (nested); must not deadlock then.
  virtual void run(std::int64_t count, TaskRef task) = 0;
};

// Runs task(0) .. task(count − 1) in order on this thread; then rethrows the first exception one threw, if any.
inline void run_in_order(std::int64_t count, TaskRef task) {
  std::exception_ptr error;
  for (std::int64_t i = 0; i < count; ++i) {
    try {
      task(i);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

class SerialExecutor final : public Executor {
 public:
  int concurrency() const noexcept override { return 1; }
  void run(std::int64_t count, TaskRef task) override { run_in_order(count, task); }
};

// threads − 1 workers wait for jobs; run() publishes a job, claims task indices from it as the workers do, and
// waits for the tasks the workers claimed. Any number of threads may call run() at once, tasks included.
// Waiting spins for up to spin_wait_microseconds before it sleeps: an inference step runs hundreds of products of
// tens of microseconds each, back to back, and waking a sleeping thread costs about as much as one of them. A pool
// with more threads than the machine has processors never spins (a spinning thread would hold a working one off).
class ThreadPoolExecutor final : public Executor {
 public:
  static constexpr int spin_wait_microseconds = 200;

  explicit ThreadPoolExecutor(int threads)
      : threads_(std::max(1, threads)),
        spin_(static_cast<unsigned>(threads_) <= std::thread::hardware_concurrency() ? spin_wait_microseconds : 0) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { work(); });
  }
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;
  ~ThreadPoolExecutor() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      published_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  int concurrency() const noexcept override { return threads_; }

  void run(std::int64_t count, TaskRef task) override {
    if (count <= 0) return;
    if (threads_ == 1 || count == 1) {
      run_in_order(count, task);
      return;
    }
    auto job = std::make_shared<Job>(task, count);
    bool sleepers = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(job);
      published_.fetch_add(1, std::memory_order_release);
      sleepers = sleeping_ > 0;
    }
    if (sleepers) wake_.notify_all();
    job->work();
    job->wait(spin_);
    if (job->error) std::rethrow_exception(job->error);
  }

 private:
  // Calls keep_waiting() until it returns false or `microseconds` have passed; true if it is still waiting then.
  template <class Predicate>
  static bool spin_while(int microseconds, Predicate keep_waiting) {
    if (microseconds <= 0) return keep_waiting();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(microseconds);
    for (int round = 0;; ++round) {
      if (!keep_waiting()) return false;
      if ((round & 63) == 63 && std::chrono::steady_clock::now() > deadline) return true;
      cpu_relax();
    }
  }

  // The processor's spin-wait hint (x86 `pause`, Arm `yield`): a waiting loop yields the core's resources to a sibling
  // thread and leaves the loop without a memory-order mis-speculation. Not SIMD: no intrinsics header is needed.
  static void cpu_relax() noexcept {
#if (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))
    __builtin_ia32_pause();
#elif (defined(__GNUC__) || defined(__clang__)) && defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    std::this_thread::yield();
#endif
  }

  struct Job {
    Job(TaskRef t, std::int64_t n) : task(t), count(n) {}
    TaskRef task;
    std::int64_t count;
    std::atomic<std::int64_t> next{0};
    std::atomic<std::int64_t> done{0};
    std::mutex mutex;
    std::condition_variable finished;
    std::exception_ptr error;  // under mutex until done == count

    bool exhausted() const { return next.load(std::memory_order_relaxed) >= count; }
    // Claims and runs tasks until none is left.
    void work() {
      for (std::int64_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
        std::exception_ptr thrown;
        try {
          task(i);
        } catch (...) {
          thrown = std::current_exception();
        }
        if (thrown) {
          std::lock_guard<std::mutex> lock(mutex);
          if (!error) error = thrown;
        }
        if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == count) {
          std::lock_guard<std::mutex> lock(mutex);  // a waiter checks `done` under it: the notify cannot be missed
          finished.notify_all();
        }
      }
    }
    bool finished_all() const { return done.load(std::memory_order_acquire) == count; }
    void wait(int spin_microseconds) {
      if (!spin_while(spin_microseconds, [&] { return !finished_all(); })) return;
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return finished_all(); });
    }
  };

  void work() {
    std::uint64_t seen = 0;
    for (;;) {
      spin_while(spin_, [&] { return published_.load(std::memory_order_acquire) == seen; });
      std::shared_ptr<Job> job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        const auto ready = [&] {
          while (!jobs_.empty() && jobs_.front()->exhausted()) jobs_.pop_front();
          return stopping_ || !jobs_.empty();
        };
        if (!ready()) {
          ++sleeping_;
          wake_.wait(lock, ready);
          --sleeping_;
        }
        if (jobs_.empty()) return;  // stopping, nothing left
        job = jobs_.front();
        seen = published_.load(std::memory_order_relaxed);
      }
      job->work();
    }
  }

  int threads_;
  int spin_;  // microseconds a waiting thread spins before it sleeps
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;    // under mutex_
  bool stopping_ = false;                    // under mutex_
  int sleeping_ = 0;                         // workers blocked on wake_; under mutex_
  std::atomic<std::uint64_t> published_{0};  // jobs published so far (and the stop): what spinning workers watch
};

// The thread count of the default executor: SHRINK_NUM_THREADS when it is a number ≥ 1, else the hardware's.
inline int default_thread_count() {
  if (const char* text = std::getenv("SHRINK_NUM_THREADS")) {
    char* end = nullptr;
    const long n = std::strtol(text, &end, 10);
    if (end != text && *end == '\0' && n >= 1) return static_cast<int>(std::min(n, 1024L));
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

inline Executor& default_executor() {
  static ThreadPoolExecutor pool(default_thread_count());
  return pool;
}

inline SerialExecutor& serial_executor() {
  static SerialExecutor serial;
  return serial;
}

namespace executor_state {
inline std::atomic<Executor*> process_wide{nullptr};
inline thread_local Executor* scoped = nullptr;
}  // namespace executor_state

// The executor shrink's CPU operations use from now on, process-wide; nullptr restores default_executor(). The
// executor must outlive its use; shrink never deletes it.
inline void set_executor(Executor* executor) noexcept { executor_state::process_wide.store(executor); }

// The executor in force on this thread: a ScopedExecutor's, else set_executor's, else default_executor().
inline Executor& current_executor() {
  if (executor_state::scoped != nullptr) return *executor_state::scoped;
  if (Executor* e = executor_state::process_wide.load()) return *e;
  return default_executor();
}

// Overrides the executor on the current thread until destroyed, e.g. ScopedExecutor serial(serial_executor()).
class ScopedExecutor {
 public:
  explicit ScopedExecutor(Executor& executor) noexcept : previous_(executor_state::scoped) {
    executor_state::scoped = &executor;
  }
  ScopedExecutor(const ScopedExecutor&) = delete;
  ScopedExecutor& operator=(const ScopedExecutor&) = delete;
  ~ScopedExecutor() { executor_state::scoped = previous_; }

 private:
  Executor* previous_;
};

// The chunk size for `count` items of about `cost` operations each: chunks of at least `min_cost` operations
// (2^18 by default: tens of microseconds, far above a task's hand-over), a function of the problem alone.
inline std::int64_t chunk_size(std::int64_t count, double cost, double min_cost = 262144.0) {
  const double items = min_cost / std::max(cost, 1.0);
  return std::max<std::int64_t>(
      1, std::min<std::int64_t>(std::max<std::int64_t>(count, 1), static_cast<std::int64_t>(items + 0.5)));
}

// Calls body(begin, end) for the chunks [0, chunk), [chunk, 2 chunk), ... of [0, count) on the current executor; a
// single chunk runs on the calling thread. When bodies throw, every chunk still runs and the exception of the
// lowest chunk is rethrown: a body that walks its range in order and stops at its first failure makes the error
// reported that of the first failing item, as in a serial loop, whatever the executor.
template <class Body>
void parallel_for(std::int64_t count, std::int64_t chunk, Body&& body) {
  if (count <= 0) return;
  chunk = std::max<std::int64_t>(chunk, 1);
  const std::int64_t chunks = (count + chunk - 1) / chunk;
  if (chunks == 1) {
    body(std::int64_t{0}, count);
    return;
  }
  Executor& executor = current_executor();
  if (executor.concurrency() == 1) {  // in order: the first failing chunk is the lowest
    for (std::int64_t c = 0; c < chunks; ++c) body(c * chunk, std::min(count, (c + 1) * chunk));
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(chunks));
  auto task = [&](std::int64_t c) {
    try {
      body(c * chunk, std::min(count, (c + 1) * chunk));
    } catch (...) {
      errors[static_cast<std::size_t>(c)] = std::current_exception();
    }
  };
  executor.run(chunks, TaskRef(task));
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace shrink
