// runner/view: a directory shown read-only at another place, without FUSE:
// a bind mount (MS_BIND) remounted read-only (MS_REMOUNT|MS_BIND|MS_RDONLY).
// Either in the caller's mount namespace, where it stays until unmounted
// (needs CAP_SYS_ADMIN there), or in a mount namespace of its own made for
// one command, which vanishes with the command's last process (rootless:
// a user namespace comes with it when the caller cannot mount).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "runner/runner.h"

namespace agentenv::runner {

// Binds `source` read-only at `target` (an existing directory) in the
// caller's mount namespace. Errors: kUnsupported "<target>: needs root
// (CAP_SYS_ADMIN)" when the kernel says EPERM; otherwise "<target>: <errno
// text>" (nothing stays mounted on a failed remount). Thread-safe.
Result<void> MountReadOnly(const std::string& source, const std::string& target);

// Unmounts `target`. Errors: kNotFound when nothing is mounted there
// (EINVAL), kBusy when a process uses it (EBUSY), kUnsupported on EPERM.
Result<void> Unmount(const std::string& target);

// Runs argv (looked up in PATH) with `source` bound read-only at `target`
// in a new mount namespace, plus a user namespace mapping the caller's
// uid and gid to themselves when the caller may not unshare a mount
// namespace alone; waits for it. Nothing is mounted in the caller's
// namespace at any time, so nothing stays mounted whoever is killed. The
// command dies with the caller (SIGKILL when the calling thread ends).
// `keep_fd` (or -1) stays open in the command, e.g. a lease that must last
// as long as the view is used; `set_env` ("NAME=value") is added to the
// caller's environment. Errors: "<step>: <errno text>" for the namespace
// setup, kNotFound when argv[0] does not exist.
Result<ExitStatus> RunWithView(const std::string& source, const std::string& target,
                               const std::vector<std::string>& argv, const std::vector<std::string>& set_env,
                               int keep_fd);

}  // namespace agentenv::runner
