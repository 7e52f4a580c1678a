#include "runner/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <atomic>
#include <cmath>
#include <sstream>
#include <thread>

#include "common/read_all.h"

namespace agentenv::runner::internal {
namespace {

// One mounted cgroup hierarchy and where this process sits in it.
struct Hierarchy {
  bool v2 = false;
  std::vector<std::string> controllers;  // v1: mount options naming controllers
  std::string dir;                       // our cgroup's directory
};

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, sep);) out.push_back(t);
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

// A /proc or cgroup file ("" when it cannot be read).
std::string ReadAll(const std::string& path) {
  auto text = ReadFileUpTo(path, 64 << 20);
  return text ? std::move(*text) : std::string();
}

// Joins /proc/self/cgroup (our path per hierarchy) with /proc/self/mountinfo
// (where each hierarchy is mounted, and which part of it the mount shows).
std::vector<Hierarchy> Discover() {
  std::vector<std::pair<std::string, std::string>> member;  // controllers ("" = v2), path
  std::istringstream cg(ReadAll("/proc/self/cgroup"));
  for (std::string line; std::getline(cg, line);) {
    auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    member.emplace_back(line.substr(a + 1, b - a - 1), line.substr(b + 1));
  }
  std::vector<Hierarchy> out;
  std::istringstream mi(ReadAll("/proc/self/mountinfo"));
  for (std::string line; std::getline(mi, line);) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    auto pre = Split(line.substr(0, dash), ' '), post = Split(line.substr(dash + 3), ' ');
    if (pre.size() < 5 || post.size() < 3 || (post[0] != "cgroup" && post[0] != "cgroup2")) continue;
    Hierarchy h;
    h.v2 = post[0] == "cgroup2";
    if (!h.v2) h.controllers = Split(post[2], ',');
    for (const auto& [ctl, path] : member) {
      auto names = Split(ctl, ',');
      bool match = h.v2 ? ctl.empty() : !names.empty() && Has(h.controllers, names[0]);
      if (!match) continue;
      const std::string& root = pre[3];  // the part of the hierarchy this mount shows
      if (root != "/" && path.rfind(root, 0) != 0) break;
      std::string rel = root == "/" ? path : path.substr(root.size());
      h.dir = pre[4] + (rel == "/" ? "" : rel);
      break;
    }
    if (h.dir.empty()) continue;
    bool dup = false;
    for (const auto& o : out) dup |= o.dir == h.dir;
    if (!dup) out.push_back(std::move(h));
  }
  return out;
}

int WriteString(const std::string& path, const std::string& data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return errno;
  if (write(fd.get(), data.data(), data.size()) != ssize_t(data.size())) return errno;
  return 0;
}

// Removes empty cgroups left by supervisors that died without cleaning up
// (agentenv-<pid>-<n> whose pid is gone); busy ones fail rmdir and stay.
void SweepStale(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  for (dirent* e; (e = readdir(d));) {
    int pid = 0;
    if (sscanf(e->d_name, "agentenv-%d-", &pid) != 1 || pid <= 0) continue;
    if (kill(pid, 0) != 0 && errno == ESRCH) rmdir((dir + "/" + e->d_name).c_str());
  }
  closedir(d);
}

std::string Name() {
  static std::atomic<unsigned> counter{0};
  return "agentenv-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

// "memory" is the controller behind the memory limit, and so on.
struct Wanted {
  std::string controller, limit;  // limit: the name users see in errors
};

}  // namespace

CgroupSet& CgroupSet::operator=(CgroupSet&& o) noexcept {
  if (this != &o) {
    Remove();
    dirs_ = std::move(o.dirs_);
    o.dirs_.clear();
  }
  return *this;
}

CgroupSet::~CgroupSet() { Remove(); }

Result<CgroupSet> CgroupSet::Create(const Limits& limits) {
  std::vector<Wanted> wanted;
  if (limits.memory_bytes) wanted.push_back({"memory", "memory"});
  if (limits.pids) wanted.push_back({"pids", "pids"});
  if (limits.cpus > 0) wanted.push_back({"cpu", "cpu"});
  const std::vector<Hierarchy> hs = Discover();
  CgroupSet set;
  const std::string name = Name();
  auto make = [&](const Hierarchy& h) -> int {  // index into set.dirs_, or -errno
    for (size_t i = 0; i < set.dirs_.size(); ++i)
      if (set.dirs_[i].path == h.dir + "/" + name) return int(i);
    std::string path = h.dir + "/" + name;
    SweepStale(h.dir);
    if (mkdir(path.c_str(), 0755) != 0) return -errno;
    set.dirs_.push_back({path, h.v2, {}, UniqueFd(open((path + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC))});
    if (!set.dirs_.back().procs) return -errno;  // removed with the set
    return int(set.dirs_.size() - 1);
  };
  const Hierarchy* v2 = nullptr;
  for (const auto& h : hs) if (h.v2) v2 = &h;
  // The v2 cgroup is made even without limits: cgroup.kill reaches helpers
  // outside the pid namespace too. Not writable (rootless): pid ns teardown suffices.
  if (v2) (void)make(*v2);
  for (const Wanted& w : wanted) {
    const std::string why = w.limit + " limit: ";
    const Hierarchy* h = nullptr;
    if (v2 && Has(Split(ReadAll(v2->dir + "/cgroup.controllers"), ' '), w.controller)) h = v2;
    if (!h) {
      for (const auto& x : hs) if (!x.v2 && Has(x.controllers, w.controller)) h = &x;
    }
    if (!h) return Fail(ErrorCode::kUnsupported, why + "no cgroup " + w.controller + " controller on this host");
    if (h->v2) {
      // A v2 controller works in a child only once the parent enables it for
      // its subtree, which fails while the parent holds processes (us).
      std::string sc = h->dir + "/cgroup.subtree_control";
      if (!Has(Split(ReadAll(sc), ' '), w.controller)) {
        if (int e = WriteString(sc, "+" + w.controller))
          return Fail(ErrorCode::kUnsupported, why + "cannot enable the v2 " + w.controller + " controller (" + sc +
                                                   ": " + std::strerror(e) + "; run the supervisor in a leaf of a delegated subtree)");
      }
    }
    int i = make(*h);
    if (i < 0)
      return Fail(ErrorCode::kUnsupported,
                  why + "no writable cgroup (" + h->dir + ": " + std::strerror(-i) + "; " +
                      (h->v2 ? "v2 cgroup not delegated" : "v1 " + w.controller + " controller not delegated") + ")");
    Dir& d = set.dirs_[size_t(i)];
    d.controllers.push_back(w.controller);
    std::vector<std::pair<std::string, std::string>> files;
    if (w.controller == "memory") {
      std::string b = std::to_string(limits.memory_bytes);
      files = d.v2 ? decltype(files){{"memory.max", b}} : decltype(files){{"memory.limit_in_bytes", b}};
    } else if (w.controller == "pids") {
      files = {{"pids.max", std::to_string(limits.pids)}};
    } else {
      const long period = 100000, quota = std::max(1000L, std::lround(limits.cpus * period));
      files = d.v2 ? decltype(files){{"cpu.max", std::to_string(quota) + " " + std::to_string(period)}}
                   : decltype(files){{"cpu.cfs_period_us", std::to_string(period)},
                                     {"cpu.cfs_quota_us", std::to_string(quota)}};
    }
    for (const auto& [file, value] : files) {
      if (int e = WriteString(d.path + "/" + file, value))
        return Fail(ErrorCode::kUnsupported, why + d.path + "/" + file + ": " + std::strerror(e));
    }
    if (w.controller == "memory") {
      // Without a swap limit the env would swap instead of being OOM-killed;
      // absent where the host has no swap accounting (then there is no swap use to cap).
      std::string f = d.path + (d.v2 ? "/memory.swap.max" : "/memory.memsw.limit_in_bytes");
      if (access(f.c_str(), F_OK) == 0) {
        if (int e = WriteString(f, d.v2 ? "0" : std::to_string(limits.memory_bytes)))
          return Fail(ErrorCode::kUnsupported, why + f + ": " + std::strerror(e));
      }
    }
  }
  return set;
}

Result<void> CgroupSet::Attach(pid_t pid) const {
  std::string s = std::to_string(pid);
  for (const Dir& d : dirs_) {
    if (write(d.procs.get(), s.data(), s.size()) != ssize_t(s.size()))
      return FailErrno(d.path + "/cgroup.procs", errno);
  }
  return {};
}

std::vector<int> CgroupSet::ProcsFds() const {
  std::vector<int> fds;
  for (const Dir& d : dirs_) fds.push_back(d.procs.get());
  return fds;
}

void CgroupSet::Kill() const {
  for (const Dir& d : dirs_) {
    if (d.v2 && WriteString(d.path + "/cgroup.kill", "1") == 0) return;
  }
  // v1: no atomic kill; members cannot fork past a pid namespace teardown,
  // so a few passes over the list reach everyone.
  for (int pass = 0; pass < 3 && !dirs_.empty(); ++pass) {
    std::istringstream procs(ReadAll(dirs_[0].path + "/cgroup.procs"));
    bool any = false;
    for (pid_t p; procs >> p;) { kill(p, SIGKILL); any = true; }
    if (!any) break;
  }
}

uint64_t CgroupSet::OomKills() const {
  for (const Dir& d : dirs_) {
    if (!Has(d.controllers, "memory")) continue;
    std::istringstream in(ReadAll(d.path + (d.v2 ? "/memory.events" : "/memory.oom_control")));
    for (std::string key; in >> key;) {
      uint64_t v = 0;
      in >> v;
      if (key == "oom_kill") return v;
    }
  }
  return 0;
}

void CgroupSet::Remove() {
  if (dirs_.empty()) return;
  Kill();
  // Members leave the cgroup as they exit; wait briefly for the last ones.
  for (const Dir& d : dirs_) {
    for (int i = 0; i < 200 && rmdir(d.path.c_str()) != 0 && errno == EBUSY; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (i % 20 == 19) Kill();
    }
  }
  dirs_.clear();
}

}  // namespace agentenv::runner::internal
