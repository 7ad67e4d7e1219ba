// oomguard_cli_forks [--stdout] OOMGUARD < CASES: runs the command line's cli_main once per
// line of CASES (its arguments, split at spaces as the shell's `read -a` splits them), each
// in a process forked from this one, and prints one line per case as soon as it ends: its
// exit code, a tab, and what it wrote to stderr (--stdout: to stdout and stderr, as 2>&1
// takes them) with each newline written as \n. A script can keep it as a coprocess. LibTorch starts
// once, here, instead of once per case (about 0.5 s each): the checks of many bad inputs
// (tests/cli/bad_inputs.sh) take a second instead of a minute. Each case is still a process of its
// own, with the exit code and stderr that `oomguard` itself gives (entry.cpp calls cli_main and
// nothing else); OOMGUARD is its argv[0], what `repeat` starts its runs from. A case's stdin
// is /dev/null. A case that starts the process again (harness/memory/start_again.cpp: execv of
// /proc/self/exe) starts this executable, which, told so by OOMGUARD_CLI_FORKS_CASE, runs
// cli_main on its arguments as oomguard would.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/cli/main.h"

namespace {

// Runs cli_main on `args` in a child; returns its exit code (128 + signal when killed) and
// sets `err` to its stderr.
int run_forked(std::vector<std::string> args, bool with_stdout, std::string& err) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    std::perror("oomguard_cli_forks: pipe");
    return 125;
  }
  std::fflush(nullptr);
  const pid_t child = fork();
  if (child < 0) {
    std::perror("oomguard_cli_forks: fork");
    return 125;
  }
  if (child == 0) {
    close(pipe_fds[0]);
    dup2(pipe_fds[1], STDERR_FILENO);
    if (with_stdout)
      dup2(pipe_fds[1], STDOUT_FILENO);
    close(pipe_fds[1]);
    if (!with_stdout && std::freopen("/dev/null", "w", stdout) == nullptr)
      _exit(125);
    const int nothing = open("/dev/null", O_RDONLY);
    if (nothing < 0 || dup2(nothing, STDIN_FILENO) < 0)
      _exit(125);
    close(nothing);
    setenv("OOMGUARD_CLI_FORKS_CASE", "1", 1);
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const int rc = oomguard::cli::cli_main(static_cast<int>(args.size()), argv.data());
    std::fflush(nullptr);
    _exit(rc);
  }
  close(pipe_fds[1]);
  err.clear();
  char buffer[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buffer, sizeof buffer)) > 0)
    err.append(buffer, static_cast<size_t>(n));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("OOMGUARD_CLI_FORKS_CASE") != nullptr)
    return oomguard::cli::cli_main(argc, argv);  // a case that started itself again
  const bool with_stdout = argc == 3 && std::string(argv[1]) == "--stdout";
  if (argc != 2 && !with_stdout) {
    std::fprintf(
        stderr,
        "usage: oomguard_cli_forks [--stdout] OOMGUARD < CASES (one case's arguments a line)\n");
    return 2;
  }
  const char* cli = argv[argc - 1];
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> args{cli};
    std::istringstream words(line);
    for (std::string word; words >> word;)
      args.push_back(word);
    std::string err;
    const int rc = run_forked(args, with_stdout, err);
    std::string escaped;
    for (const char c : err)
      escaped += c == '\n' ? std::string("\\n") : std::string(1, c);
    std::cout << rc << '\t' << escaped << std::endl;
  }
  return 0;
}
