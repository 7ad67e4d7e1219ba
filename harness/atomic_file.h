#pragma once
// Files other tools read (reports, summaries, JUnit) are written whole or not at all.
#include <string>

namespace oomguard {

// Writes `text` to path + ".tmp", then renames it to `path`: a reader never sees half a file.
// Throws std::runtime_error naming the path.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace oomguard
