// Shared by the runner tests: a static busybox root tree, a spec for it,
// running a body as uid 65534, and a scan for surviving processes.
#pragma once

#include <grp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "runner/runner.h"

namespace agentenv::runner::test {

namespace fs = std::filesystem;

// A root tree with busybox and the usual top-level directories, owned by uid
// (when running as root; otherwise by the caller).
inline void MakeTree(const fs::path& root, uid_t uid) {
  for (const char* d : {"bin", "proc", "dev", "sys", "etc", "tmp", "usr", "root", "run"})
    fs::create_directories(root / d);
  fs::copy_file("/bin/busybox", root / "bin/busybox");
  for (const char* a : {"sh", "echo", "cat", "sleep", "ls", "id", "nc", "touch", "hostname", "true", "awk",
                        "setsid", "mkdir", "test", "stat"})
    fs::create_symlink("busybox", root / "bin" / a);
  std::ofstream(root / "etc/hosts") << "";
  if (geteuid() != 0) return;
  for (auto& e : fs::recursive_directory_iterator(root))
    if (lchown(e.path().c_str(), uid, uid) != 0) FAIL("chown");
  REQUIRE(lchown(root.c_str(), uid, uid) == 0);
}

inline EnvSpec Spec(const fs::path& root, std::string script) {
  EnvSpec s;
  s.root = root;
  s.argv = {"/bin/sh", "-c", std::move(script)};
  return s;
}

// Runs body in a child with uid/gid 65534 and no groups (as `setpriv
// --reuid=65534 --regid=65534 --clear-groups`); returns its exit status, 0 = ok.
inline int AsNobody(const std::function<bool()>& body) {
  pid_t p = fork();
  if (p == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(65534, 65534, 65534) != 0 ||
        setresuid(65534, 65534, 65534) != 0) _exit(2);
    // As after an exec of a plain binary (setpriv): our /proc files are ours again.
    prctl(PR_SET_DUMPABLE, 1);
    _exit(body() ? 0 : 1);
  }
  int st = 0;
  waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

// Processes (zombies included) anywhere on the host whose command line is
// exactly argv (e.g. {"sleep", "987"}: a marker no other process uses).
inline int CountProcesses(const std::vector<std::string>& argv) {
  int n = 0;
  for (auto& e : fs::directory_iterator("/proc")) {
    std::ifstream c(e.path() / "cmdline");
    std::vector<std::string> args;
    for (std::string a; std::getline(c, a, '\0');) args.push_back(a);
    if (args == argv) ++n;
  }
  return n;
}

}  // namespace agentenv::runner::test
