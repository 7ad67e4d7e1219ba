// oomguard: the executable's entry point (harness/cli/main.cpp has the command line).
#include "harness/cli/main.h"

int main(int argc, char** argv) {
  return oomguard::cli::cli_main(argc, argv);
}
