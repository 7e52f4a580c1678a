// exec_run ROOT CMD...: runs CMD once in a runner env over ROOT (for exec_bench.sh).
// exec_run --spawn N ROOT CMD...: starts one env (an idle /bin/sh) and spawns
// CMD into it N times, one after another; prints the mean per spawn.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runner/runner.h"

namespace rn = agentenv::runner;

static int Spawns(int n, char* root, char** cmd, int ncmd) {
  int idle[2];
  if (pipe(idle) != 0) return 1;
  rn::EnvSpec s;
  s.root = root;
  s.argv = {"/bin/sh"};  // reads the never-written pipe: stays idle
  auto env = rn::Env::Start(s, rn::StdioFds{idle[0], -1, -1});
  if (!env) { std::fprintf(stderr, "exec_run: %s\n", env.error().message.c_str()); return 1; }
  rn::Command c;
  c.argv.assign(cmd, cmd + ncmd);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    auto p = env->Spawn(c);
    if (!p) { std::fprintf(stderr, "exec_run: %s\n", p.error().message.c_str()); return 1; }
    if (auto st = p->Wait(); !st || st->exit_code != 0) return 1;
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("%.1f\n", us);
  env->KillAll();
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 5 && std::strcmp(argv[1], "--spawn") == 0) return Spawns(std::atoi(argv[2]), argv[3], argv + 4, argc - 4);
  if (argc < 3) { std::fprintf(stderr, "usage: exec_run [--spawn N] ROOT CMD...\n"); return 2; }
  rn::EnvSpec s;
  s.root = argv[1];
  s.argv.assign(argv + 2, argv + argc);
  s.stdio = rn::Stdio::kInherit;
  auto r = rn::Run(s);
  if (!r) { std::fprintf(stderr, "exec_run: %s\n", r.error().message.c_str()); return 1; }
  return r->exit_code;
}
