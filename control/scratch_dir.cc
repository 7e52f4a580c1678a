#include "control/scratch_dir.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>

#include <cerrno>
#include <filesystem>

#include "snap/fsops.h"

namespace agentenv::control {
namespace {

// Every kind of scratch directory, so that any writer sweeps all of them.
constexpr const char* kPrefixes[] = {"import", "push", "pull"};

bool IsScratchName(const std::string& name) {
  for (std::string_view p : kPrefixes) {
    if (name.size() == p.size() + 7 && name.compare(0, p.size(), p) == 0 && name[p.size()] == '-') return true;
  }
  return false;
}

}  // namespace

int RemoveStaleScratch(const std::string& parent) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    if (!IsScratchName(e.path().filename().string())) continue;
    UniqueFd lock(::open((e.path() / "lock").c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC));
    if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (snap::RemoveTree(e.path().string())) ++removed;
  }
  return removed;
}

Result<ScratchDir> ScratchDir::Make(const std::string& parent, const std::string& prefix) {
  RemoveStaleScratch(parent);
  ScratchDir d;
  d.path_ = parent + "/" + prefix + "-XXXXXX";
  if (!::mkdtemp(d.path_.data())) {
    d.path_.clear();
    return FailErrno(parent + ": making a scratch directory", errno);
  }
  d.lock_.reset(::open((d.path_ + "/lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!d.lock_ || ::flock(d.lock_.get(), LOCK_EX) != 0) return FailErrno(d.path_ + "/lock", errno);
  std::error_code ec;
  d.path_ = std::filesystem::absolute(d.path_, ec).string();  // the daemon has another cwd
  return d;
}

ScratchDir::ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)), lock_(std::move(o.lock_)) {
  o.path_.clear();
}

ScratchDir::~ScratchDir() {
  if (path_.empty()) return;
  // An unpacked tree may hold directories without write permission, which
  // only RemoveTree opens up on the way down.
  (void)snap::RemoveTree(path_);
}

}  // namespace agentenv::control
