// Internal to runner/: the cgroups one env lives in. Limits go to the v2
// tree where its controller is delegated to us, else to the v1 hierarchy of
// that controller; a v2 cgroup is also made (where writable) for cgroup.kill.
// Every directory is created under the caller's own cgroup and removed on
// destruction.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "runner/runner.h"

namespace agentenv::runner::internal {

class CgroupSet {
 public:
  CgroupSet() = default;
  CgroupSet(CgroupSet&&) = default;
  CgroupSet& operator=(CgroupSet&& o) noexcept;
  ~CgroupSet();

  // Creates the cgroups for limits (and a v2 one for killing, best effort).
  // Errors: kUnsupported "<limit> limit: <reason>" when a requested limit
  // cannot be enforced here.
  static Result<CgroupSet> Create(const Limits& limits);

  // Moves pid (and its future children) into every cgroup of the set.
  Result<void> Attach(pid_t pid) const;
  // Open cgroup.procs files: a forked helper writes "0" to each to join.
  std::vector<int> ProcsFds() const;
  // SIGKILLs every member: cgroup.kill on v2, else each pid in cgroup.procs.
  void Kill() const;
  // How many processes the memory limit has killed so far.
  uint64_t OomKills() const;
  bool empty() const { return dirs_.empty(); }

 private:
  struct Dir {
    std::string path;
    bool v2;
    std::vector<std::string> controllers;  // limits set in this directory
    UniqueFd procs;
  };
  void Remove();
  std::vector<Dir> dirs_;
};

}  // namespace agentenv::runner::internal
