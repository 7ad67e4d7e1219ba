// Replays inputs through a fuzz target without libFuzzer: each argument is a file or a
// directory of files (the seed corpus and every finding kept as a regression). Built with
// every compiler, so the targets compile and their corpus passes in each CI run;
// ci/run-fuzz.sh links the same targets with libFuzzer instead.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"

namespace {

int replay(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return 1;
  }
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in), {}};
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0, errors = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& entry : std::filesystem::directory_iterator(arg)) {
        if (entry.is_regular_file()) {
          errors += replay(entry.path());
          ++inputs;
        }
      }
    } else {
      errors += replay(arg);
      ++inputs;
    }
  }
  std::printf("replayed %d inputs\n", inputs);
  return errors == 0 && inputs > 0 ? 0 : 1;
}
