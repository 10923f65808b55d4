// A scratch file for results computed before the output is written (GPTQ, AWQ, HQQ, SparseGPT): each one appended
// when it is made and read back when its tensor's turn comes, so a command holds one tensor's result in memory at a
// time and every failure happens before the output exists. The file has no name (Linux O_TMPFILE, or a name removed
// at once), so nothing is left behind however the process ends.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "shrink/core/byte_buffer.hpp"
#include "shrink/core/error.hpp"

namespace shrink::cli {

// Where a result lies in the spill file.
struct SpillRef {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

class SpillFile {
 public:
  // A file in `directory` (the output's, so that it draws on the space the output will use, not /tmp's).
  explicit SpillFile(const std::string& directory) : directory_(directory.empty() ? "." : directory) {}
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  ~SpillFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  SpillRef append(const void* data, std::size_t size) {
    open();
    const SpillRef ref{end_, size};
    const char* p = static_cast<const char*>(data);
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = ::pwrite(fd_, p + done, size - done, static_cast<off_t>(end_ + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw shrink::Error(directory_ + ": cannot write a scratch file there: " + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    end_ += size;
    return ref;
  }
  SpillRef append(const ByteBuffer& bytes) { return append(bytes.data(), bytes.size()); }

  ByteBuffer read(const SpillRef& ref) const {
    ByteBuffer out(static_cast<std::size_t>(ref.size));
    for (std::size_t done = 0; done < out.size();) {
      const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, static_cast<off_t>(ref.offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw shrink::Error(directory_ + ": cannot read back a scratch file: " + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
    return out;
  }

 private:
  void open() {
    if (fd_ >= 0) return;
#if defined(O_TMPFILE) && defined(__linux__)
    fd_ = ::open(directory_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd_ >= 0) return;
#endif
    std::string name = directory_ + "/.shrink-scratch-XXXXXX";
    std::vector<char> path(name.begin(), name.end());
    path.push_back('\0');
    fd_ = ::mkstemp(path.data());
    if (fd_ < 0) throw shrink::Error(directory_ + ": cannot create a scratch file there: " + std::strerror(errno));
    ::unlink(path.data());
  }

  std::string directory_;
  int fd_ = -1;
  std::uint64_t end_ = 0;
};

}  // namespace shrink::cli
