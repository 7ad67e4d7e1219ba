#include "harness/atomic_file.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace oomguard {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.good()) {
      throw std::runtime_error(path + ": cannot be written (" + tmp + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error(path + ": cannot be written (rename of " + tmp + " failed)");
  }
}

}  // namespace oomguard
