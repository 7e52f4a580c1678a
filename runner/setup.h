// Internal to runner/: the namespace setup an env's init performs, planned
// here (runner/init_steps.h has the steps; the init program does them).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "runner/init_steps.h"
#include "runner/runner.h"

namespace agentenv::runner::internal {

// Rootless, apt's sandbox cannot drop to its _apt user (only one id is
// mapped, setgroups is denied): apt runs as the env's root instead, by
// this file on the env's /run tmpfs (never in the tree) named by
// APT_CONFIG. As root every id is mapped and apt keeps its sandbox.
inline constexpr const char* kAptConfigPath = "/run/agentenv/apt.conf";
inline constexpr const char* kAptConfig = "APT::Sandbox::User \"root\";\n";

// `disk_socket`: with Overlay::disk_bytes, where the tmpfs's root is sent
// (SCM_RIGHTS) once it is mounted.
std::vector<Step> Plan(const EnvSpec& spec, int disk_socket = -1);

// The environment of a command: allow-list of the caller's plus pass/set.
// `rootless_apt`: also APT_CONFIG=kAptConfigPath (unless set_env names it).
std::vector<std::string> BuildEnv(const std::vector<std::string>& pass_env,
                                  const std::vector<std::string>& set_env, bool rootless_apt = false);

// Whether the plan for `spec` writes kAptConfigPath (rootless, /run in the tree).
bool RootlessApt(const EnvSpec& spec);

// Whether `path` ("/run") is in the env's tree as a directory (`dir`) or
// anything, before the env exists (for an overlay: upper over lower).
bool InTree(const EnvSpec& spec, const std::string& path, bool dir);

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
// child's copy of memory.
pid_t CloneChild(int flags, int (*fn)(void*), void* arg);

// Reads ChildError records from fd until every writer has exec'd or
// exited; returns the first error, if any. kStepPid records set *pid.
std::optional<ChildError> ReadReports(int fd, pid_t* pid);

// Describes a ChildError as "<step>: <errno text>".
Unexpected<Error> DescribeChildError(const ChildError& ce, const std::vector<Step>& plan,
                                     const std::string& argv0);

}  // namespace agentenv::runner::internal
