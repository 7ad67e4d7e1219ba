#include "harness/atomic_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace oomguard {

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.close();
    if (out.fail()) {
      const std::string reason = errno != 0 ? std::strerror(errno) : "write failed";
      std::remove(tmp.c_str());
      throw std::runtime_error(path + ": cannot be written (" + tmp + ": " + reason + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(tmp.c_str());
    throw std::runtime_error(
        path + ": cannot be written (renaming " + tmp + " to it: " + reason + ")");
  }
}

}  // namespace oomguard
