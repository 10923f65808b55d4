// Hugging Face checkpoints of one or many safetensors files: a single file, a directory holding model.safetensors,
// or shards listed by an index (model.safetensors.index.json), resolved and validated; and the index of new shards.
//
// The index (Hugging Face's sharded layout) is JSON: {"metadata": {"total_size": BYTES, ...}, "weight_map":
// {"tensor name": "model-00001-of-00003.safetensors", ...}}; total_size is the sum of the tensors' data bytes.
// Index files are untrusted: shard names must be plain file names beside the index, every shard must exist and
// hold exactly the tensors the weight_map gives it, and no tensor may be in two shards.
#pragma once

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "shrink/core/error.hpp"
#include "shrink/io/mapped_file.hpp"
#include "shrink/io/safetensors.hpp"

namespace shrink::io {

inline constexpr const char* kSingleCheckpointFile = "model.safetensors";
inline constexpr const char* kCheckpointIndexFile = "model.safetensors.index.json";
// Largest index a reader accepts (far beyond the weight_map of any real model).
inline constexpr std::uint64_t kCheckpointIndexMaxBytes = 100'000'000;

// One safetensors file of a checkpoint and the tensors its header lists (in file order).
struct CheckpointShard {
  std::string file;  // the name in the checkpoint's directory (a single file given as such: its path)
  std::string path;  // the path to open
  std::vector<TensorInfo> tensors;
};

// A checkpoint resolved and validated. Nothing stays open: open each shard's SafetensorsFile when its turn comes.
struct Checkpoint {
  std::string directory;                // the checkpoint directory; empty for a single file given as a file
  std::string index_path;               // the index; empty unless sharded
  nlohmann::json index_metadata;        // the index's "metadata" object (null when it had none)
  std::vector<CheckpointShard> shards;  // sharded: by file name; otherwise the one file

  bool sharded() const { return !index_path.empty(); }
  // Every tensor of every shard, shard by shard.
  std::vector<TensorInfo> tensors() const {
    std::vector<TensorInfo> all;
    for (const CheckpointShard& s : shards) all.insert(all.end(), s.tensors.begin(), s.tensors.end());
    return all;
  }
};

namespace detail {

// Whether `path` names an existing regular file (links followed: the Hugging Face cache links every file to a blob).
inline bool is_regular_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

inline std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// A shard name must stay inside the checkpoint's directory: a plain file name, no path, no NUL.
inline std::string shard_name_problem(const std::string& name) {
  if (name.empty()) return "an empty name";
  if (name.find('/') != std::string::npos || name.find('\\') != std::string::npos) return "a path, not a file name";
  if (name == "." || name == "..") return "a directory";
  if (name.find('\0') != std::string::npos) return "a name with a NUL character";
  const std::string suffix = ".safetensors";
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "not a .safetensors file name";
  return "";
}

// Parses index JSON, refusing duplicate keys (which nlohmann would collapse: a tensor listed twice) and deep nesting.
inline nlohmann::json parse_index_json(const char* text, std::size_t size, const std::string& label) {
  constexpr int kMaxDepth = 16;
  std::vector<std::set<std::string>> keys;
  using Event = nlohmann::json::parse_event_t;
  auto callback = [&](int depth, Event event, nlohmann::json& parsed) -> bool {
    if (event == Event::object_start || event == Event::array_start) {
      if (depth >= kMaxDepth)
        fail("shrink::io::read_checkpoint_index", label + ": JSON nested deeper than " + std::to_string(kMaxDepth) +
                                                      " levels: expected {\"metadata\": {...}, \"weight_map\": {...}}");
      keys.emplace_back();
    } else if (event == Event::object_end || event == Event::array_end) {
      keys.pop_back();
    } else if (event == Event::key && !keys.back().insert(parsed.get<std::string>()).second) {
      fail("shrink::io::read_checkpoint_index", label + ": duplicate key " + quoted(parsed.get<std::string>()) +
                                                    ": expected each tensor (and each key) once");
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, text + size, callback);
  } catch (const nlohmann::json::exception& e) {
    std::string message = e.what();
    if (message.size() > 300) message = message.substr(0, 300) + "...";
    fail("shrink::io::read_checkpoint_index", label + ": not valid JSON: " + message);
  }
}

}  // namespace detail

// Reads and validates a sharded checkpoint's index and the header of every shard it lists (each shard is opened,
// checked and closed again). Throws shrink::Error naming the index or shard file, the tensor and what was expected.
inline Checkpoint read_checkpoint_index(const std::string& index_path) {
  const char* fn = "shrink::io::read_checkpoint_index";
  Checkpoint c;
  c.index_path = index_path;
  c.directory = detail::parent_directory(index_path);
  nlohmann::json root;
  {
    const MappedFile file(index_path);
    if (file.size() > kCheckpointIndexMaxBytes)
      fail(fn, index_path + ": index of " + std::to_string(file.size()) + " bytes: expected at most " +
                   std::to_string(kCheckpointIndexMaxBytes));
    root = detail::parse_index_json(reinterpret_cast<const char*>(file.bytes().data), file.size(), index_path);
  }
  if (!root.is_object())
    fail(fn, index_path + ": the index is " + detail::json_type(root) +
                 ": expected an object {\"metadata\": {...}, \"weight_map\": {tensor: shard file}}");
  if (!root.contains("weight_map"))
    fail(fn, index_path + ": no \"weight_map\": expected an object mapping each tensor name to its shard file");
  const nlohmann::json& map = root["weight_map"];
  if (!map.is_object() || map.empty())
    fail(fn, index_path + ": \"weight_map\" is " + (map.is_object() ? "empty" : detail::json_type(map)) +
                 ": expected an object mapping each tensor name to its shard file");
  if (root.contains("metadata")) {
    c.index_metadata = root["metadata"];
    if (!c.index_metadata.is_object() && !c.index_metadata.is_null())
      fail(fn, index_path + ": \"metadata\" is " + detail::json_type(c.index_metadata) + ": expected an object");
  }

  std::map<std::string, std::string> shard_of;             // tensor -> shard file, from the index
  std::map<std::string, std::vector<std::string>> listed;  // shard file -> its tensors, from the index
  for (const auto& item : map.items()) {
    const std::string& tensor = item.key();
    if (!item.value().is_string())
      fail(fn, index_path + ": weight_map entry of tensor " + detail::quoted(tensor) + " is " +
                   detail::json_type(item.value()) + ": expected the name of its shard file");
    const std::string shard = item.value().get<std::string>();
    const std::string problem = detail::shard_name_problem(shard);
    if (!problem.empty())
      fail(fn, index_path + ": weight_map maps tensor " + detail::quoted(tensor) + " to " + detail::quoted(shard) +
                   ", " + problem + ": expected the name of a .safetensors file in the index's directory");
    shard_of.emplace(tensor, shard);
    listed[shard].push_back(tensor);
  }
  for (const auto& entry : listed) {
    const std::string path = c.directory + "/" + entry.first;
    if (!detail::is_regular_file(path))
      fail(fn, index_path + ": shard " + detail::quoted(entry.first) + " (of tensor " +
                   detail::quoted(entry.second.front()) + ") is not a file in " + c.directory +
                   ": expected every shard the weight_map lists (incomplete download?)");
    CheckpointShard shard{entry.first, path, SafetensorsFile(path).tensors()};
    std::set<std::string> held;
    for (const TensorInfo& t : shard.tensors) {
      held.insert(t.name);
      const auto found = shard_of.find(t.name);
      if (found == shard_of.end())
        fail(fn, path + ": tensor " + detail::quoted(t.name) + " is not in the weight_map of " + index_path +
                     ": expected the index to list every tensor of every shard");
      if (found->second != entry.first)
        fail(fn, path + ": tensor " + detail::quoted(t.name) + " is also in this shard, but " + index_path +
                     " maps it to " + detail::quoted(found->second) + ": expected each tensor in one shard only");
    }
    for (const std::string& tensor : entry.second)
      if (!held.count(tensor))
        fail(fn, index_path + ": weight_map maps tensor " + detail::quoted(tensor) + " to " + path +
                     ", which has no such tensor: expected each tensor in the shard the index names");
    c.shards.push_back(std::move(shard));
  }
  return c;
}

// Resolves what a user names as a checkpoint: a .safetensors file, an index .json file, or a directory holding
// either model.safetensors or model.safetensors.index.json (not both). Every file is validated.
inline Checkpoint open_checkpoint(const std::string& path) {
  const char* fn = "shrink::io::open_checkpoint";
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    std::string directory = path;
    while (directory.size() > 1 && directory.back() == '/') directory.pop_back();
    const std::string single = directory + "/" + kSingleCheckpointFile;
    const std::string index = directory + "/" + kCheckpointIndexFile;
    const bool has_single = detail::is_regular_file(single), has_index = detail::is_regular_file(index);
    if (has_single && has_index)
      fail(fn, directory + ": holds both " + kSingleCheckpointFile + " and " + kCheckpointIndexFile +
                   ": expected one checkpoint (name the file to use)");
    if (!has_single && !has_index)
      fail(fn, directory + ": a directory without " + kSingleCheckpointFile + " or " + kCheckpointIndexFile +
                   ": expected a checkpoint directory (or name the .safetensors file)");
    if (has_index) return read_checkpoint_index(index);
    Checkpoint c;
    c.directory = directory;
    c.shards.push_back({kSingleCheckpointFile, single, SafetensorsFile(single).tensors()});
    return c;
  }
  const std::string json = ".json";
  if (path.size() > json.size() && path.compare(path.size() - json.size(), json.size(), json) == 0)
    return read_checkpoint_index(path);
  Checkpoint c;
  c.shards.push_back({path, path, SafetensorsFile(path).tensors()});
  return c;
}

// Opens a shard of `checkpoint` again, checking that it still holds the tensors it held when the checkpoint was read
// (a file replaced in between would not match what was planned from it).
inline SafetensorsFile open_shard(const CheckpointShard& shard) {
  SafetensorsFile file(shard.path);
  const std::vector<TensorInfo>& now = file.tensors();
  bool same = now.size() == shard.tensors.size();
  for (std::size_t i = 0; same && i < now.size(); ++i)
    same = now[i].name == shard.tensors[i].name && now[i].dtype == shard.tensors[i].dtype &&
           now[i].shape == shard.tensors[i].shape && now[i].offset == shard.tensors[i].offset;
  if (!same)
    fail("shrink::io::open_shard", shard.path +
                                       ": the file changed while it was being read: expected the tensors "
                                       "its header listed when the checkpoint was opened");
  return file;
}

// Reads a checkpoint's tensors by name with one shard open (mapped) at a time: asking for a tensor of another shard
// closes the open one first, so memory holds at most one shard's mapping.
class CheckpointReader {
 public:
  explicit CheckpointReader(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {
    for (std::size_t k = 0; k < checkpoint.shards.size(); ++k)
      for (const TensorInfo& t : checkpoint.shards[k].tensors) shard_of_.emplace(t.name, k);
  }

  const Checkpoint& checkpoint() const { return checkpoint_; }
  bool contains(const std::string& tensor) const { return shard_of_.count(tensor) != 0; }
  // The index of the shard holding `tensor`.
  std::size_t shard_index(const std::string& tensor) const {
    const auto found = shard_of_.find(tensor);
    if (found == shard_of_.end())
      fail("shrink::io::CheckpointReader", "no tensor " + detail::quoted(tensor) + " in the checkpoint");
    return found->second;
  }
  // Shard k, opened (checked against what the checkpoint read) unless it is the open one.
  const SafetensorsFile& shard(std::size_t k) {
    if (!open_ || k != open_index_) {
      open_.reset();
      open_.emplace(open_shard(checkpoint_.shards.at(k)));
      open_index_ = k;
    }
    return *open_;
  }
  // The shard holding `tensor`, opened.
  const SafetensorsFile& file_of(const std::string& tensor) { return shard(shard_index(tensor)); }

 private:
  const Checkpoint& checkpoint_;
  std::map<std::string, std::size_t> shard_of_;
  std::optional<SafetensorsFile> open_;
  std::size_t open_index_ = 0;
};

// The index of written shards: `metadata` (the input index's) with "total_size" set to the sum of the tensors' data
// bytes, and a weight_map naming each tensor's shard, sorted by tensor name.
inline nlohmann::json checkpoint_index_json(const nlohmann::json& metadata,
                                            const std::vector<CheckpointShard>& shards) {
  std::uint64_t total = 0;
  std::map<std::string, std::string> map;
  for (const CheckpointShard& s : shards)
    for (const TensorInfo& t : s.tensors) {
      total += t.bytes;
      if (!map.emplace(t.name, s.file).second)
        fail("shrink::io::checkpoint_index_json", "tensor " + detail::quoted(t.name) + " is in two shards, " +
                                                      detail::quoted(map[t.name]) + " and " + detail::quoted(s.file) +
                                                      ": expected each tensor in one shard");
    }
  nlohmann::json index = nlohmann::json::object();
  index["metadata"] = metadata.is_object() ? metadata : nlohmann::json::object();
  index["metadata"]["total_size"] = total;
  index["weight_map"] = nlohmann::json::object();
  for (const auto& entry : map) index["weight_map"][entry.first] = entry.second;
  return index;
}

}  // namespace shrink::io
