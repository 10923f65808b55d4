// shrink_layout_probe: asks the GPU how its tensor-core instructions lay out fragments and metadata, and prints that
// next to what shrink's kernels assume (mma.sp s8 / f16 of the 2:4 kernel, mma.sync + ldmatrix and wgmma of the int8
// kernels), so that a wrong assumption can be corrected afterwards without the device. Well under a second of GPU time.
//
//   shrink_layout_probe [--verbose]        every probe, each in a child process of its own (a trap or a sticky error
//                                          ends only that probe); exit 0 all ran and matched (a probe skipped for the
//                                          device's architecture does not count against it), 1 otherwise, 77 no device
//   shrink_layout_probe --probe NAME       one probe in this process (exit 0 match, 1 differ, 2 error, 3 skipped)
// The int8 2:4 verdict is for the metadata mapping SHRINK_NM_INT8_METADATA selects; both mappings are always measured.
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpu/layout_probe.hpp"

namespace shrink_probe {

#ifndef SHRINK_PROBE_HAS_SM90A
int probe_wgmma_s8(const Options&) {
  std::printf("[wgmma_s8] skipped: this build has no sm_90a code (CMAKE_CUDA_ARCHITECTURES without 90)\n");
  return kSkipped;
}
#endif

namespace {

struct Probe {
  const char* name;
  int (*run)(const Options&);
};
constexpr Probe kProbes[] = {{"mma_sp_s8", probe_mma_sp_s8},
                             {"mma_sp_f16", probe_mma_sp_f16},
                             {"mma_s8", probe_mma_s8},
                             {"wgmma_s8", probe_wgmma_s8}};
constexpr unsigned kProbeSeconds = 60;  // a hung probe (a deadlocked wgmma) is killed by SIGALRM

const char* result_name(int status) {
  switch (status) {
    case kMatch: return "MATCH";
    case kDiffer: return "DIFFER";
    case kError: return "ERROR";
    case kSkipped: return "SKIPPED";
    default: return "ERROR";
  }
}

// Runs probe `name` in a child process (this program with --probe); its status, or kError when it died.
int run_child(const char* name, bool verbose, std::string& how) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid < 0) {
    how = text("fork failed: %s", std::strerror(errno));
    return kError;
  }
  if (pid == 0) {
    const char* args[] = {"shrink_layout_probe", "--probe", name, verbose ? "--verbose" : nullptr, nullptr};
    execv("/proc/self/exe", const_cast<char* const*>(args));
    std::printf("  exec of /proc/self/exe failed: %s\n", std::strerror(errno));
    std::fflush(stdout);
    _exit(kError);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      how = text("waitpid failed: %s", std::strerror(errno));
      return kError;
    }
  if (WIFSIGNALED(status)) {
    const int signal = WTERMSIG(status);
    how = text("killed by signal %d (%s)%s", signal, strsignal(signal), signal == SIGALRM ? ": timed out" : "");
    return kError;
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kError;
  if (code > kSkipped) how = text("exit status %d", code);
  return code;
}

int run_one(const char* name, const Options& options) {
  for (const Probe& p : kProbes)
    if (std::strcmp(p.name, name) == 0) {
      alarm(kProbeSeconds);
      const int result = p.run(options);
      std::printf("  => %s %s\n", name, result_name(result));
      std::fflush(stdout);
      return result;
    }
  std::printf("unknown probe '%s'; probes:", name);
  for (const Probe& p : kProbes) std::printf(" %s", p.name);
  std::printf("\n");
  return kError;
}

}  // namespace
}  // namespace shrink_probe

int main(int argc, char** argv) {
  using namespace shrink_probe;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as soon as it is known
  Options options;
  const char* only = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--verbose") == 0) {
      options.verbose = true;
    } else if (std::strcmp(argv[i], "--probe") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::printf("usage: %s [--verbose] [--probe NAME]\n", argv[0]);
      return 2;
    }
  }

  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    std::printf("no CUDA device (cudaGetDeviceCount: %s)\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 77;
  }
  if (only != nullptr) return run_one(only, options);

  cudaDeviceProp properties{};
  int driver = 0, runtime = 0;
  if (cudaGetDeviceProperties(&properties, 0) == cudaSuccess) {
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    std::printf("shrink_layout_probe: device 0 %s, sm_%d%d, %d SMs; driver %d, runtime %d\n", properties.name,
                properties.major, properties.minor, properties.multiProcessorCount, driver, runtime);
  }
  const char* selected = std::getenv("SHRINK_NM_INT8_METADATA");
  std::printf("SHRINK_NM_INT8_METADATA=%s\n\n", selected ? selected : "(unset: row_per_lane)");

  std::vector<std::pair<const char*, std::string>> summary;
  bool all_good = true;
  for (const Probe& p : kProbes) {
    std::string how;
    const int result = run_child(p.name, options.verbose, how);
    all_good = all_good && (result == kMatch || result == kSkipped);
    summary.emplace_back(p.name, std::string(result_name(result)) + (how.empty() ? "" : " (" + how + ")"));
    if (!how.empty()) std::printf("  => %s %s\n", p.name, summary.back().second.c_str());
    std::printf("\n");
  }
  std::printf("summary:");
  for (const auto& [name, result] : summary) std::printf(" %s %s;", name, result.c_str());
  std::printf("\n");
  return all_good ? 0 : 1;
}
