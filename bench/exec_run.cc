// exec_run ROOT CMD...: runs CMD once in a runner env over ROOT (for exec_bench.sh).
#include <cstdio>

#include "runner/runner.h"

int main(int argc, char** argv) {
  if (argc < 3) { std::fprintf(stderr, "usage: exec_run ROOT CMD...\n"); return 2; }
  agentenv::runner::EnvSpec s;
  s.root = argv[1];
  s.argv.assign(argv + 2, argv + argc);
  s.stdio = agentenv::runner::Stdio::kInherit;
  auto r = agentenv::runner::Run(s);
  if (!r) { std::fprintf(stderr, "exec_run: %s\n", r.error().message.c_str()); return 1; }
  return r->exit_code;
}
