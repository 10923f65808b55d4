// A fresh temporary directory for one test, removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>

namespace shrink::test {

class TempDir {
 public:
  TempDir() {
    static std::atomic<unsigned> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            ("shrink-io-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  // Names of the entries in the directory (to check no temporary file was left behind).
  std::size_t entries() const {
    std::size_t n = 0;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) (void)entry, ++n;
    return n;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace shrink::test
