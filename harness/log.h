#pragma once
// Logging through spdlog, kept in its own TU: LibTorch ships a newer {fmt} in its include
// directory than Debian's spdlog is built for, so spdlog never meets a Torch include path.
#include <string>

namespace oomguard::log {

void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

}  // namespace oomguard::log
