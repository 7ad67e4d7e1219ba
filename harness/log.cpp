#include "harness/log.h"

#include <spdlog/spdlog.h>

namespace oomguard::log {

void info(const std::string& message) {
  spdlog::info("{}", message);
}
void warn(const std::string& message) {
  spdlog::warn("{}", message);
}
void error(const std::string& message) {
  spdlog::error("{}", message);
}

}  // namespace oomguard::log
