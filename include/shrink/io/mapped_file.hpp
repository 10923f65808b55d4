// MappedFile: a whole file mapped read-only into memory (POSIX mmap), so multi-GB model files are not copied.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "shrink/core/error.hpp"

namespace shrink::io {

// A read-only range of bytes; it owns nothing (C++17 has no std::span).
struct ByteView {
  const std::byte* data = nullptr;
  std::size_t size = 0;

  const std::byte* begin() const { return data; }
  const std::byte* end() const { return data + size; }
  bool empty() const { return size == 0; }
};

// Owns one private read-only mapping of a regular file. An empty file has no mapping and bytes() is empty.
// The mapping reflects the file: a file truncated by another process while mapped raises SIGBUS on access,
// as with every mmap reader; shrink's writers never modify a file in place (they rename a new one over it).
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path) : path_(path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_errno("cannot open");
    struct stat info {};
    if (::fstat(fd, &info) != 0) {
      const int error = errno;
      ::close(fd);
      errno = error;
      fail_errno("cannot stat");
    }
    if (!S_ISREG(info.st_mode)) {
      ::close(fd);
      fail("shrink::io::MappedFile", path_ + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(info.st_size);
    if (size_ > 0) {
      void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (address == MAP_FAILED) {
        const int error = errno;
        ::close(fd);
        errno = error;
        fail_errno("cannot map");
      }
      data_ = static_cast<const std::byte*>(address);
    }
    ::close(fd);  // the mapping keeps the file alive
  }

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept
      : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  MappedFile& operator=(MappedFile&& other) noexcept {
    if (this != &other) {
      unmap();
      path_ = std::move(other.path_);
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~MappedFile() { unmap(); }

  const std::string& path() const { return path_; }
  ByteView bytes() const { return ByteView{data_, size_}; }
  std::size_t size() const { return size_; }

 private:
  [[noreturn]] void fail_errno(const char* what) const {
    fail("shrink::io::MappedFile", path_ + ": " + what + ": " + std::strerror(errno));
  }
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }

  std::string path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace shrink::io
