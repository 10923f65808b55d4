// AtomicFile: a new file written next to `path` and renamed over it once complete, so that `path` holds either what
// it held before or the whole new file, never a part. The file is written as an unnamed file in `path`'s directory
// (Linux O_TMPFILE), which commit() names and renames over `path`: an AtomicFile destroyed before commit(), or a
// process that dies (Ctrl-C, kill, crash), leaves nothing behind. Where the filesystem has no unnamed files, a
// temporary name beside `path` is used instead, removed by an AtomicFile destroyed before commit(). Writes are
// buffered (1 MiB); commit() flushes and fsyncs before the rename. I/O errors raise shrink::Error naming the owner
// (the writer using it), the path, the step and the system's reason, after the temporary file is removed.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"

namespace shrink::io {

class AtomicFile {
 public:
  // `owner` names the writer in error messages ("shrink::io::SafetensorsWriter").
  AtomicFile(std::string path, std::string owner) : path_(std::move(path)), owner_(std::move(owner)) {}
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() { discard(); }

  const std::string& path() const { return path_; }
  bool is_open() const { return fd_ >= 0; }
  bool failed() const { return failed_; }

  // Creates the temporary file.
  void open() {
#if defined(O_TMPFILE) && defined(__linux__)
    // Naming it at commit() goes through /proc/self/fd: without /proc, use a named temporary from the start.
    if (::access("/proc/self/fd", X_OK) == 0) {
      const std::size_t slash = path_.find_last_of('/');
      const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path_.substr(0, slash);
      fd_ = ::open(directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
      if (fd_ >= 0) {
        unnamed_ = true;
        return;
      }
      // EOPNOTSUPP, EISDIR (filesystems or kernels without O_TMPFILE), ENOENT, ...: the named way says why.
    }
#endif
    for (int attempt = 0; attempt < 100; ++attempt) {
      temporary_ = next_temporary_name();
      fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd_ >= 0) return;
      if (errno != EEXIST) break;
    }
    const std::string reason = std::strerror(errno);
    temporary_.clear();
    failed_ = true;
    fail(owner_.c_str(), path_ + ": cannot create a temporary file beside it: " + reason);
  }

  void append(const void* data, std::size_t size) {
    if (size == 0) return;
    if (buffer_.size() + size > kBufferBytes) flush();
    if (size >= kBufferBytes) {
      write_all(static_cast<const char*>(data), size);
      return;
    }
    const char* p = static_cast<const char*>(data);
    buffer_.insert(buffer_.end(), p, p + size);
  }
  // `count` zero bytes (padding).
  void append_zeros(std::size_t count) {
    static const char zeros[64] = {};
    for (; count > 0; count -= std::min(count, sizeof zeros)) append(zeros, std::min(count, sizeof zeros));
  }

  // Flushes, syncs and renames the file to `path`.
  void commit() {
    flush();
    if (::fsync(fd_) != 0) fail_io("fsync");
    if (unnamed_) name_unnamed_file();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail_io("close");
    if (::rename(temporary_.c_str(), path_.c_str()) != 0) fail_io("rename to " + path_);
    temporary_.clear();
  }

  // Closes and removes the temporary file, if any (an unnamed one goes with its descriptor).
  void discard() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!temporary_.empty()) ::unlink(temporary_.c_str());
    temporary_.clear();
    buffer_.clear();
  }

 private:
  static constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

  [[noreturn]] void fail_io(const std::string& what) {
    const std::string reason = std::strerror(errno);
    discard();
    failed_ = true;
    fail(owner_.c_str(), path_ + ": " + what + " failed: " + reason);
  }
  // A name beside `path_` that no file has yet (the caller creates it with O_EXCL, or links to it).
  std::string next_temporary_name() const {
    static std::atomic<unsigned> counter{0};
    return path_ + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
  }
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  void write_all(const char* data, std::size_t size) {
    while (size > 0) {
      const ::ssize_t n = ::write(fd_, data, size);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_io("write");
      }
      data += n;
      size -= static_cast<std::size_t>(n);
    }
  }
  // Gives the unnamed file a temporary name beside `path_`, for commit()'s rename over `path_` (link cannot replace).
  void name_unnamed_file() {
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    for (int attempt = 0; attempt < 100; ++attempt) {
      temporary_ = next_temporary_name();
      if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, temporary_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        unnamed_ = false;
        return;
      }
      if (errno != EEXIST) break;
    }
    temporary_.clear();
    fail_io("naming the written file beside it");
  }

  std::string path_;
  std::string owner_;
  std::string temporary_;  // the named temporary file, if any
  bool unnamed_ = false;   // fd_ is an unnamed (O_TMPFILE) file
  bool failed_ = false;
  int fd_ = -1;
  std::vector<char> buffer_;
};

}  // namespace shrink::io
