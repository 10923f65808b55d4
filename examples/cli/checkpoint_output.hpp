// Where a command writes what it makes of a checkpoint: a file for a file, a checkpoint directory for a directory or
// an index. A directory is built in a hidden staging directory beside OUT (the shards, the index rewritten from
// the shards written, the checkpoint's other files copied) and renamed to OUT when complete: a failed run removes
// it, and a killed run's staging directory is removed by the next run that writes OUT.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <system_error>
#include <vector>

#include "args.hpp"
#include "paths.hpp"
#include "shrink/core/error.hpp"
#include "shrink/io/checkpoint.hpp"

namespace shrink::cli {

class CheckpointOutput {
 public:
  // Checks OUT before anything is read or written: a file input needs an OUT that is not the input; a directory or
  // index input needs an OUT that does not exist yet or is an empty directory (a checkpoint is never overwritten).
  CheckpointOutput(const io::Checkpoint& input, const std::string& in, const std::string& out)
      : input_(input), out_(out) {
    if (input.directory.empty()) {
      require_distinct_output(in, out);
      return;
    }
    while (out_.size() > 1 && out_.back() == '/') out_.pop_back();
    directory_ = true;
    struct stat info {};
    if (::stat(out_.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode))
        throw UsageError("OUT '" + out +
                         "' is an existing file: a checkpoint directory (or index) writes a "
                         "directory; expected a new or empty directory");
      if (!std::filesystem::is_empty(out_))
        throw UsageError("OUT '" + out +
                         "' is a directory that is not empty: expected a new or empty directory "
                         "(shrink never writes over a checkpoint)");
    }
    const std::string parent = parent_directory(out_);
    const std::string base = out_.substr(out_.find_last_of('/') + 1);
    if (base.empty() || base == "." || base == "..")
      throw UsageError("OUT '" + out +
                       "': expected a directory named by its own name (it is built beside OUT and "
                       "renamed to it), not '.', '..' or '/'");
    const std::string prefix = "." + base + ".shrink-partial-";
    remove_stale_staging(parent, prefix);
    staging_ = parent + "/" + prefix + std::to_string(::getpid());
    std::error_code ignored;
    std::filesystem::remove_all(staging_, ignored);  // this process's own, from an earlier writer
    if (::mkdir(staging_.c_str(), 0777) != 0)
      throw shrink::Error("OUT '" + out + "': cannot create the directory " + staging_ +
                          " beside it: " + std::strerror(errno));
  }

  CheckpointOutput(const CheckpointOutput&) = delete;
  CheckpointOutput& operator=(const CheckpointOutput&) = delete;
  ~CheckpointOutput() {
    std::error_code ignored;
    if (!staging_.empty()) std::filesystem::remove_all(staging_, ignored);
  }

  bool is_directory() const { return directory_; }
  // Where the output of shard k is written (inside the staging directory, before commit()).
  std::string shard_path(std::size_t k) const {
    return is_directory() ? staging_ + "/" + input_.shards.at(k).file : out_;
  }
  // Where shard k's output lies once committed.
  std::string final_shard_path(std::size_t k) const {
    return is_directory() ? out_ + "/" + input_.shards.at(k).file : out_;
  }

  // Where a command keeps scratch files (spill_file.hpp): the staging directory, or OUT's directory for a file, so
  // they take space where the output will.
  std::string scratch_directory() const { return is_directory() ? staging_ : parent_directory(out_); }

  // A file of a directory output written with `text` in place of the input's copy (config.json, say).
  void write_file(const std::string& name, const std::string& text) { replaced_[name] = text; }

  // Completes a directory output: the index rewritten from the shards written (when the input is sharded), the
  // checkpoint's other files copied (or written, for those given to write_file), everything synced, then the staging
  // directory renamed to OUT.
  void commit() {
    if (staging_.empty()) return;
    if (input_.sharded()) {
      std::vector<io::CheckpointShard> written;
      for (std::size_t k = 0; k < input_.shards.size(); ++k)
        written.push_back({input_.shards[k].file, shard_path(k), io::SafetensorsFile(shard_path(k)).tensors()});
      const std::string index_name = input_.index_path.substr(input_.index_path.find_last_of('/') + 1);
      write_synced(staging_ + "/" + index_name,
                   io::checkpoint_index_json(input_.index_metadata, written).dump(2) + "\n");
    }
    for (const std::string& name : other_files())
      if (!replaced_.count(name)) copy_synced(input_.directory + "/" + name, staging_ + "/" + name);
    for (const auto& file : replaced_) write_synced(staging_ + "/" + file.first, file.second);
    sync_path(staging_, O_RDONLY | O_DIRECTORY);
    if (::rename(staging_.c_str(), out_.c_str()) != 0)
      throw shrink::Error("OUT '" + out_ +
                          "': cannot move the finished checkpoint into place: " + std::strerror(errno));
    staging_.clear();
    sync_path(parent_directory(out_), O_RDONLY | O_DIRECTORY);
  }

  // The regular files of the input's directory that are neither its shards nor its index (config.json, tokenizer
  // files, ...), sorted; weight files of other formats (.safetensors, .bin, .pt, .pth, .gguf) are left out.
  std::vector<std::string> other_files() const {
    std::set<std::string> skip;
    for (const io::CheckpointShard& s : input_.shards) skip.insert(s.file);
    if (input_.sharded()) skip.insert(input_.index_path.substr(input_.index_path.find_last_of('/') + 1));
    std::vector<std::string> names;
    std::error_code error;  // a link to nothing is not a regular file
    for (const auto& entry : std::filesystem::directory_iterator(input_.directory)) {
      const std::string name = entry.path().filename().string();
      if (skip.count(name) || has_weight_suffix(name) || !std::filesystem::is_regular_file(entry.path(), error))
        continue;
      names.push_back(name);
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  static std::string parent_directory(const std::string& path) {
    const std::size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  }
  static bool has_weight_suffix(const std::string& name) {
    for (const char* suffix : {".safetensors", ".bin", ".pt", ".pth", ".gguf"}) {
      const std::size_t n = std::strlen(suffix);
      if (name.size() >= n && name.compare(name.size() - n, n, suffix) == 0) return true;
    }
    return false;
  }
  // Removes the staging directories of OUT left by runs that were killed (their process no longer exists).
  static void remove_stale_staging(const std::string& parent, const std::string& prefix) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(parent, error)) {
      const std::string name = entry.path().filename().string();
      if (name.compare(0, prefix.size(), prefix) != 0 || name.size() == prefix.size()) continue;
      const std::string digits = name.substr(prefix.size());
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
      const pid_t pid = static_cast<pid_t>(std::atol(digits.c_str()));
      if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
        std::error_code ignored;
        std::filesystem::remove_all(entry.path(), ignored);
      }
    }
  }
  static void sync_path(const std::string& path, int flags) {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
    if (fd < 0) return;  // syncing is best effort beyond the shards, which their writer syncs
    (void)::fsync(fd);
    ::close(fd);
  }
  static void write_synced(const std::string& path, const std::string& text) {
    {
      std::ofstream file(path, std::ios::binary);
      file << text;
      if (!file.flush()) throw shrink::Error(path + ": write failed");
    }
    sync_path(path, O_RDONLY);
  }
  static void copy_synced(const std::string& from, const std::string& to) {
    std::error_code error;
    if (!std::filesystem::copy_file(from, to, error))
      throw shrink::Error("cannot copy " + from + " into the output: " + error.message());
    sync_path(to, O_RDONLY);
  }

  const io::Checkpoint& input_;
  std::string out_;
  std::string staging_;                          // the directory being built; empty for a file output or once committed
  bool directory_ = false;                       // OUT is a directory
  std::map<std::string, std::string> replaced_;  // files written with this text instead of copied
};

}  // namespace shrink::cli
