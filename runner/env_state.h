// Internal to runner/: what an Env and a Process hold, shared by env.cc
// (start, wait, kill) and spawn.cc (spawn, process listing).
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <utility>
#include <vector>

#include "common/unique_fd.h"
#include "runner/cgroup.h"
#include "runner/runner.h"

namespace agentenv::runner {

inline ExitStatus DecodeWaitStatus(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) s.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) s.signal = WTERMSIG(status);
  return s;
}

struct Env::State {
  pid_t pid = -1;
  UniqueFd pidfd, status_r;
  std::vector<std::pair<int, UniqueFd>> ns;  // (CLONE_NEW*, /proc/<init>/ns/<x>), user first
  struct stat pidns {};
  internal::CgroupSet cgroups;
  std::optional<ExitStatus> done;
  bool rootless_apt = false;
  UniqueFd disk;  // Overlay::disk_bytes: the tmpfs's root  // the env's /run holds kAptConfigPath: commands spawned later get APT_CONFIG too

  void Finish(int init_status) {
    int main_status = 0;
    // init reports the main command's status before exiting; without a
    // report init was killed (KillAll, timeout): the whole env got SIGKILL.
    if (read(status_r.get(), &main_status, sizeof main_status) == sizeof main_status) {
      done = DecodeWaitStatus(main_status);
    } else {
      done = DecodeWaitStatus(init_status);
    }
    done->oom_killed = cgroups.OomKills() > 0;
    cgroups = internal::CgroupSet();  // removes the directories
  }
  ~State() {
    if (pid > 0 && !done) {
      kill(pid, SIGKILL);
      cgroups.Kill();
      while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {}
    }
  }
};

struct Process::State {
  pid_t helper = -1, pid = -1;  // helper: our child that waits for the command (pid)
  std::optional<ExitStatus> done;
  ~State() {
    if (helper > 0 && !done) {
      kill(helper, SIGTERM);  // it kills the command and reaps it (see spawn.cc)
      while (waitpid(helper, nullptr, 0) < 0 && errno == EINTR) {}
    }
  }
};

}  // namespace agentenv::runner
