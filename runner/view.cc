// Read-only views (runner/view.h): a bind mount remounted read-only, in the
// caller's mount namespace or in one made for a single command.
#include "runner/view.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "common/unique_fd.h"
#include "runner/setup.h"

extern char** environ;

namespace agentenv::runner {
namespace {

int WriteProc(const char* path, const std::string& data) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, data.data(), data.size());
  close(fd);
  return n == ssize_t(data.size()) ? 0 : -1;
}

// The steps of the child, named in errors.
enum Step { kUnshare, kUidMap, kSetgroups, kGidMap, kPrivate, kBind, kRemount, kKeep, kExec, kSteps };
constexpr const char* kStepNames[kSteps] = {"unshare (mount namespace)", "write uid_map", "write setgroups",
                                            "write gid_map", "make / private", "bind", "remount read-only",
                                            "keep the lease", "exec"};

[[noreturn]] void ChildFail(int pipe_w, int step) {
  int msg[2] = {step, errno};
  (void)!write(pipe_w, msg, sizeof msg);
  _exit(127);
}

}  // namespace

Result<void> MountReadOnly(const std::string& source, const std::string& target) {
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    if (errno == EPERM) return Fail(ErrorCode::kUnsupported, target + ": needs root (CAP_SYS_ADMIN)");
    return FailErrno(target, errno);
  }
  if (internal::RemountReadOnly(target.c_str()) != 0) {
    int e = errno;
    umount2(target.c_str(), MNT_DETACH);  // never leave a writable view
    return FailErrno(target + ": remount read-only", e);
  }
  return {};
}

Result<void> Unmount(const std::string& target) {
  if (umount2(target.c_str(), UMOUNT_NOFOLLOW) == 0) return {};
  if (errno == EINVAL) return Fail(ErrorCode::kNotFound, target + ": not a mount point");
  if (errno == EBUSY) return Fail(ErrorCode::kBusy, target + ": in use by a process (its cwd or an open file)");
  if (errno == EPERM) return Fail(ErrorCode::kUnsupported, target + ": needs root (CAP_SYS_ADMIN)");
  return FailErrno(target, errno);
}

Result<ExitStatus> RunWithView(const std::string& source, const std::string& target,
                               const std::vector<std::string>& argv, const std::vector<std::string>& set_env,
                               int keep_fd) {
  if (argv.empty()) return Fail(ErrorCode::kInvalid, "mount: no command to run");
  // Everything the child needs is made here: after fork it may not
  // allocate (another thread may have held malloc's lock).
  const std::string uid_map = std::to_string(getuid()) + " " + std::to_string(getuid()) + " 1\n";
  const std::string gid_map = std::to_string(getgid()) + " " + std::to_string(getgid()) + " 1\n";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string_view kv(*e);
    bool replaced = false;
    for (const auto& s : set_env) replaced |= kv.substr(0, kv.find('=') + 1) == s.substr(0, s.find('=') + 1);
    if (!replaced) env_strings.emplace_back(kv);
  }
  env_strings.insert(env_strings.end(), set_env.begin(), set_env.end());
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd err_r(p[0]), err_w(p[1]);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return FailErrno("fork", errno);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the caller died before the line above
    if (unshare(CLONE_NEWNS) != 0) {
      // Unprivileged: a user namespace of our own gives the capability
      // to mount in the mount namespace that comes with it.
      if (errno != EPERM || unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ChildFail(err_w.get(), kUnshare);
      if (WriteProc("/proc/self/uid_map", uid_map) != 0) ChildFail(err_w.get(), kUidMap);
      if (WriteProc("/proc/self/setgroups", "deny") != 0) ChildFail(err_w.get(), kSetgroups);
      if (WriteProc("/proc/self/gid_map", gid_map) != 0) ChildFail(err_w.get(), kGidMap);
    }
    // Nothing mounted here may propagate back to the caller's namespace.
    if (mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0) ChildFail(err_w.get(), kPrivate);
    if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) ChildFail(err_w.get(), kBind);
    if (internal::RemountReadOnly(target.c_str()) != 0) ChildFail(err_w.get(), kRemount);
    if (keep_fd >= 0 && fcntl(keep_fd, F_SETFD, 0) != 0) ChildFail(err_w.get(), kKeep);
    execvpe(args[0], args.data(), envp.data());
    ChildFail(err_w.get(), kExec);
  }
  err_w.reset();
  int msg[2];
  ssize_t n;
  do n = read(err_r.get(), msg, sizeof msg);
  while (n < 0 && errno == EINTR);
  int status = 0;
  pid_t w;
  do w = waitpid(pid, &status, 0);
  while (w < 0 && errno == EINTR);
  if (w < 0) return FailErrno("waitpid", errno);
  if (n == ssize_t(sizeof msg)) {
    if (msg[0] == kExec && msg[1] == ENOENT) return Fail(ErrorCode::kNoProgram, "exec " + argv[0] + ": No such file or directory");
    const std::string what = msg[0] >= 0 && msg[0] < kSteps ? kStepNames[msg[0]] : "setup";
    return Fail(what + (msg[0] == kBind || msg[0] == kRemount ? " " + target : "") + ": " + std::strerror(msg[1]));
  }
  ExitStatus st;
  if (WIFSIGNALED(status)) st.signal = WTERMSIG(status);
  else st.exit_code = WEXITSTATUS(status);
  return st;
}

}  // namespace agentenv::runner
