// `shrink inspect` on a GGUF file: its version, metadata (long arrays summarised) and tensor table, as text or JSON.
#pragma once

#include <string>

namespace shrink::cli {

// Whether `path` is a regular file starting with the GGUF magic (whatever its extension).
bool is_gguf_file(const std::string& path);

// Prints the listing of the GGUF file `path` (a table, or JSON with `json`); shrink::Error for a bad file.
void inspect_gguf(const std::string& path, bool json);

}  // namespace shrink::cli
