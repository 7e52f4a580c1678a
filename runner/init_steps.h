// Internal to runner/: what the env's init does, shared by the runner
// library (which plans it) and the init program (runner/init_main.cc,
// which does it). Plain C++ and system calls: the init program is linked
// statically and knows nothing else of the project.
#pragma once

#include <string>
#include <vector>

namespace agentenv::runner::internal {

enum class Op { kMakePrivate, kBindRoot, kMount, kMkdir, kBind, kRemountRo, kSymlink, kWriteFile, kPivot,
                kLoopbackUp, kHostname, kChdir, kCopyDirMeta, kSendDir };
inline constexpr int kOpCount = int(Op::kSendDir) + 1;

// What a bind creates as its mount point when the target is on one of our
// own tmpfs mounts (/dev, /run) and does not exist yet.
enum class MountPoint { kMustExist, kCreateFile, kCreateDir };

struct Step {
  Op op;
  std::string what;  // shown in errors: "mount /proc" (the parent's alone: init reports the index)
  std::string src, dst, fstype, data;
  unsigned long flags = 0;
  bool optional = false;  // skipped if it fails (e.g. a missing host device)
  MountPoint create = MountPoint::kMustExist;
  int fd = -1;  // kSendDir: the socket the directory's fd is sent on
};

// Written by a failing child over a close-on-exec pipe. step >= 0 indexes
// the plan; the negative values name the steps after it.
struct ChildError {
  int step;
  int err;
};
inline constexpr int kStepExec = -1, kStepStdio = -2, kStepFork = -3, kStepCgroup = -4, kStepSetns = -5,
                     kStepChdir = -6, kStepTty = -7, kStepInit = -8, kStepMessage = -9,
                     kStepPid = -100;  // kStepPid: err = pid

// Runs one step; 0 or -1 with errno.
int Execute(const Step& step);

// Remounts the bind mount at `target` read-only, keeping the flags of the
// original mount that a user namespace locks (nosuid, nodev, noexec,
// atime): a remount that drops one fails with EPERM. Raw syscalls only
// (safe in a cloned child). Returns mount(2)'s result, errno set.
int RemountReadOnly(const char* target);

// In a freshly forked/cloned child: default signal dispositions, empty mask
// (the supervisor may ignore SIGPIPE or block signals for a signalfd), and
// every inherited fd >= 3 close-on-exec. Async-signal-safe.
void ResetProcessState();
// Closes every descriptor from 3 up but those in `keep` (sorted).
// Async-signal-safe.
void CloseAllBut(const std::vector<unsigned>& keep);
// Reports {step, errno} on fd and exits 127. Async-signal-safe.
[[noreturn]] void ChildFail(int fd, int step);
// Installs the non-negative fds as 0/1/2, or ChildFail(kStepStdio).
void DupStdio(int in, int out, int err, int report_fd);

}  // namespace agentenv::runner::internal
