#pragma once
// The command line as a function: parses argv, runs the command, returns its exit code.
// harness/cli/main.cpp declares every option (the one file that compiles CLI11); the parsers
// are tested in tests/cli/options_test.cpp.
namespace oomguard::cli {

int cli_main(int argc, char** argv);

}  // namespace oomguard::cli
