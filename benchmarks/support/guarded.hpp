// Benchmarks that cannot take the program down: each one catches its own exceptions, main() reports a throw and exits
// 1, terminate() says why before it aborts, and stdout is line-buffered so a program killed midway keeps its figures.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <utility>

namespace shrink::bench {

// Marks the running benchmark as failed by a throw. SkipWithError is safe anywhere in the benchmark in Google
// Benchmark 1.7.1: it stops a running timer, and a benchmark that returns after it, even from inside its
// `for (auto _ : state)` loop, is not held to finishing its iterations. Called once: its contract wants no second call,
// and the first reason stands.
inline void skip_after_throw(benchmark::State& state, const std::string& what) {
  if (!state.error_occurred()) state.SkipWithError(("threw: " + what).c_str());
}

// `fn` (called as fn(state, args...)) with its exceptions turned into this benchmark's error row: a CUDA error, a
// shrink::Error or a cuBLAS failure in one benchmark leaves the others running. Use at every registration:
// RegisterBenchmark(name, guarded(fn), args...).
template <class Fn>
auto guarded(Fn fn) {
  return [fn](benchmark::State& state, auto&&... args) {
    try {
      fn(state, std::forward<decltype(args)>(args)...);
    } catch (const std::exception& e) {
      skip_after_throw(state, e.what());
    } catch (...) {
      skip_after_throw(state, "an exception not derived from std::exception");
    }
  };
}

#define SHRINK_BENCH_CONCAT_(a, b) a##b
#define SHRINK_BENCH_CONCAT(a, b) SHRINK_BENCH_CONCAT_(a, b)

// BENCHMARK(fn) and BENCHMARK_TEMPLATE(fn, T...) with the benchmark guarded, under exactly the names those macros give
// ("fn", "fn<T>"): the check script's filters and the ratio targets name them. Chain ->Arg(...) etc. as usual.
#define SHRINK_GUARDED_BENCHMARK(fn)                                                                         \
  static ::benchmark::internal::Benchmark* SHRINK_BENCH_CONCAT(shrink_guarded_benchmark_, __COUNTER__) \
      BENCHMARK_UNUSED = ::benchmark::RegisterBenchmark(#fn, ::shrink::bench::guarded(&fn))
#define SHRINK_GUARDED_BENCHMARK_TEMPLATE(fn, ...)                                                           \
  static ::benchmark::internal::Benchmark* SHRINK_BENCH_CONCAT(shrink_guarded_benchmark_, __COUNTER__) \
      BENCHMARK_UNUSED = ::benchmark::RegisterBenchmark(#fn "<" #__VA_ARGS__ ">",                       \
                                                        ::shrink::bench::guarded(&fn<__VA_ARGS__>))

// Everything written so far, out of the buffers: before an abort, or after a line others wait for.
inline void flush_output() {
  std::cout.flush();
  std::fflush(stdout);
  std::fflush(stderr);
}

// std::terminate's last words: the exception's what() (an escaped throw, a throw from a destructor or a static
// initialiser), then everything flushed.
[[noreturn]] inline void terminate_with_reason() {
  std::fflush(stdout);
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "terminate: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "terminate: an exception not derived from std::exception\n");
    }
  } else {
    std::fprintf(stderr, "terminate: called without an exception\n");
  }
  flush_output();
  std::abort();
}

// Once per process, before anything is written: stdout line-buffered (a pipe or file would otherwise hold kilobytes
// that a timeout's kill throws away), and the terminate handler above.
inline bool prepare_process() {
  static const bool prepared = [] {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    std::set_terminate(terminate_with_reason);
    return true;
  }();
  return prepared;
}

// At static initialisation, ahead of the registrations of any file that includes this one, so a throw from one of
// them is reported too.
inline const bool process_prepared = prepare_process();

// The body of main(): returns body()'s status, or 1 after printing what a throw from it said (device queries, the
// registrations, the closing tables).
template <class Body>
int guarded_main(Body body) {
  prepare_process();
  try {
    return body();
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: %s\n", e.what());
  } catch (...) {
    std::fflush(stdout);
    std::fprintf(stderr, "error: an exception not derived from std::exception\n");
  }
  flush_output();
  return 1;
}

}  // namespace shrink::bench
