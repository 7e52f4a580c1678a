// Internal to runner/: the namespace setup an env's init performs, planned in
// the parent (allocations allowed) and executed in the cloned child (raw
// syscalls only, since the parent may be multi-threaded).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "runner/runner.h"

namespace agentenv::runner::internal {

enum class Op { kMakePrivate, kBindRoot, kMount, kMkdir, kBind, kRemountRo, kSymlink, kWriteFile, kPivot,
                kLoopbackUp, kHostname, kChdir, kCopyDirMeta, kSendDir };

// Rootless, apt's sandbox cannot drop to its _apt user (only one id is
// mapped, setgroups is denied): apt runs as the env's root instead, by
// this file on the env's /run tmpfs (never in the tree) named by
// APT_CONFIG. As root every id is mapped and apt keeps its sandbox.
inline constexpr const char* kAptConfigPath = "/run/agentenv/apt.conf";
inline constexpr const char* kAptConfig = "APT::Sandbox::User \"root\";\n";

// What a bind creates as its mount point when the target is on one of our
// own tmpfs mounts (/dev, /run) and does not exist yet.
enum class MountPoint { kMustExist, kCreateFile, kCreateDir };

struct Step {
  Op op;
  std::string what;  // shown in errors: "mount /proc"
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
inline constexpr int kStepExec = -1, kStepStdio = -2, kStepFork = -3, kStepCgroup = -4,
                     kStepSetns = -5, kStepChdir = -6, kStepTty = -7, kStepPid = -100;  // kStepPid: err = pid

// `disk_socket`: with Overlay::disk_bytes, where the tmpfs's root is sent
// (SCM_RIGHTS) once it is mounted.
std::vector<Step> Plan(const EnvSpec& spec, int disk_socket = -1);

// Runs one step in the child; 0 or -1 with errno. Async-signal-safe.
int Execute(const Step& step);

// Remounts the bind mount at `target` read-only, keeping the flags of the
// original mount that a user namespace locks (nosuid, nodev, noexec,
// atime): a remount that drops one fails with EPERM. Raw syscalls only
// (safe in a cloned child). Returns mount(2)'s result, errno set.
int RemountReadOnly(const char* target);

// The environment of a command: allow-list of the caller's plus pass/set.
// `rootless_apt`: also APT_CONFIG=kAptConfigPath (unless set_env names it).
std::vector<std::string> BuildEnv(const std::vector<std::string>& pass_env,
                                  const std::vector<std::string>& set_env, bool rootless_apt = false);

// Whether the plan for `spec` writes kAptConfigPath (rootless, /run in the tree).
bool RootlessApt(const EnvSpec& spec);

// Whether `path` ("/run") is in the env's tree as a directory (`dir`) or
// anything, before the env exists (for an overlay: upper over lower).
bool InTree(const EnvSpec& spec, const std::string& path, bool dir);

// argv and envp as execvpe wants them, built before fork.
struct ExecArgs {
  std::vector<std::string> env;
  std::vector<char*> argv_p, env_p;
  ExecArgs(const std::vector<std::string>& argv, std::vector<std::string> envp);
};

// Maps the caller to 0 inside the user namespace of pid; root keeps all ids.
Result<void> WriteIdMaps(pid_t pid);

// Starts fn(arg) in a child process, as fork() would with the CLONE_NEW*
// `flags` added; -1 and errno when it cannot. glibc's clone(), not fork():
// fork's atfork handlers are for a child that goes on like its parent, and
// the child here runs async-signal-safe code only. Not the raw syscall
// either: a sanitizer sees clone() for the fork it is (ThreadSanitizer
// holds its own locks across it and leaves its hooks out of the child, so
// the child never waits for a lock another thread held), the raw syscall
// it cannot see. The child's stack is a buffer in this call's frame, in the
// child's copy of memory: deep enough for execvpe's fallback for a script
// without #!, which copies argv onto it.
pid_t CloneChild(int flags, int (*fn)(void*), void* arg);

// In a freshly forked/cloned child: default signal dispositions, empty mask
// (the supervisor may ignore SIGPIPE or block signals for a signalfd), and
// every inherited fd >= 3 close-on-exec. Async-signal-safe.
void ResetProcessState();

// In a cloned child: closes every descriptor from 3 up but those in `keep`
// (sorted). Async-signal-safe.
void CloseAllBut(const std::vector<unsigned>& keep);
// In a child: reports {step, errno} on fd and exits 127. Async-signal-safe.
[[noreturn]] void ChildFail(int fd, int step);
// In a child: installs the non-negative fds as 0/1/2, or ChildFail(kStepStdio).
void DupStdio(const StdioFds& stdio, int report_fd);

// Reads ChildError records from fd until every writer has exec'd or
// exited; returns the first error, if any. kStepPid records set *pid.
std::optional<ChildError> ReadReports(int fd, pid_t* pid);

// Describes a ChildError as "<step>: <errno text>".
Unexpected<Error> DescribeChildError(const ChildError& ce, const std::vector<Step>& plan,
                                     const std::string& argv0);

}  // namespace agentenv::runner::internal
