#include "runner/setup.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "common/unique_fd.h"

namespace agentenv::runner::internal {
namespace {

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// A bind whose target is under one of our tmpfs mounts gets its mount point
// (and the directories leading to it) created there; nothing lands in the tree.
void PlanBind(const std::string& r, const Bind& b, bool run_tmpfs, std::vector<Step>& p) {
  const bool on_tmpfs = b.target.rfind("/dev/", 0) == 0 || (run_tmpfs && b.target.rfind("/run/", 0) == 0);
  MountPoint create = MountPoint::kMustExist;
  if (on_tmpfs) {
    for (size_t slash = b.target.find('/', 5); slash != std::string::npos; slash = b.target.find('/', slash + 1))
      p.push_back({Op::kMkdir, "mkdir " + b.target.substr(0, slash), "", r + b.target.substr(0, slash)});
    create = IsDir(b.source) ? MountPoint::kCreateDir : MountPoint::kCreateFile;
  }
  Step s{Op::kBind, "bind " + b.target, b.source, r + b.target, "", "", MS_BIND | MS_REC};
  s.create = create;
  p.push_back(s);
  if (b.read_only) p.push_back({Op::kRemountRo, "remount " + b.target + " read-only", "", r + b.target});
}

}  // namespace

std::vector<Step> Plan(const EnvSpec& s, int disk_socket) {
  const std::string r = s.root;
  std::vector<Step> p;
  // Nothing we mount may propagate back to the host.
  p.push_back({Op::kMakePrivate, "make / rprivate", "", "/", "", "", MS_REC | MS_PRIVATE});
  // pivot_root needs the new root to be a mount point: the tree bound onto
  // itself, or the workspace's overlay mounted there.
  if (s.overlay && s.overlay->disk_bytes) {
    // The upper on a tmpfs of the quota's size (see Overlay), over `work`.
    const Overlay& o = *s.overlay;
    const std::string disk = o.work, up = disk + "/upper", wk = disk + "/work";
    p.push_back({Op::kMount, "mount the disk quota's tmpfs on " + disk, "tmpfs", disk, "tmpfs",
                 "size=" + std::to_string(o.disk_bytes) + ",mode=0700", MS_NOSUID | MS_NODEV});
    p.push_back({Op::kMkdir, "mkdir " + up, "", up});
    p.push_back({Op::kMkdir, "mkdir " + wk, "", wk});
    p.push_back({Op::kCopyDirMeta, "copy the root's metadata to " + up, o.upper.empty() ? o.lower : o.upper, up});
    Step send{Op::kSendDir, "hand over the disk quota's tmpfs", "", disk};
    send.fd = disk_socket;
    p.push_back(send);
    const std::string lowers = o.upper.empty() ? o.lower : o.upper + ":" + o.lower;
    p.push_back({Op::kMount, "mount overlay " + r, "overlay", r, "overlay",
                 "lowerdir=" + lowers + ",upperdir=" + up + ",workdir=" + wk + ",userxattr", 0});
  } else if (s.overlay) {
    const Overlay& o = *s.overlay;
    p.push_back({Op::kMount, "mount overlay " + r, "overlay", r, "overlay",
                 "lowerdir=" + o.lower + ",upperdir=" + o.upper + ",workdir=" + o.work + ",userxattr", 0});
  } else {
    p.push_back({Op::kBindRoot, "bind " + r, r, r, "", "", MS_BIND | MS_REC});
  }
  // A /proc that shows only this pid namespace.
  p.push_back({Op::kMount, "mount /proc", "proc", r + "/proc", "proc", "", MS_NOSUID | MS_NODEV | MS_NOEXEC});
  // A minimal /dev on a tmpfs; device nodes are bind-mounted from the host.
  p.push_back({Op::kMount, "mount /dev", "tmpfs", r + "/dev", "tmpfs", "mode=0755", MS_NOSUID});
  for (const char* d : {"null", "zero", "full", "random", "urandom", "tty"}) {
    Step st{Op::kBind, std::string("bind /dev/") + d, std::string("/dev/") + d, r + "/dev/" + d, "", "",
            MS_BIND, true};
    st.create = MountPoint::kCreateFile;
    p.push_back(st);
  }
  p.push_back({Op::kMount, "mount /dev/pts", "devpts", r + "/dev/pts", "devpts",
               "newinstance,ptmxmode=0666,mode=620", MS_NOSUID | MS_NOEXEC});
  p.push_back({Op::kSymlink, "symlink /dev/ptmx", "pts/ptmx", r + "/dev/ptmx"});
  p.push_back({Op::kMount, "mount /dev/shm", "tmpfs", r + "/dev/shm", "tmpfs", "mode=1777",
               MS_NOSUID | MS_NODEV});
  // /run is runtime state (as on a booted system): a tmpfs, never snapshotted.
  // It also holds the supervisor's socket bind (kSocketPath).
  const bool run_tmpfs = InTree(s, "/run", true);
  if (run_tmpfs)
    p.push_back({Op::kMount, "mount /run", "tmpfs", r + "/run", "tmpfs", "mode=0755", MS_NOSUID | MS_NODEV});
  if (RootlessApt(s)) {
    p.push_back({Op::kMkdir, "mkdir /run/agentenv", "", r + "/run/agentenv"});
    p.push_back({Op::kWriteFile, std::string("write ") + kAptConfigPath, kAptConfig, r + kAptConfigPath});
  }
  // /tmp: a fresh tmpfs for each env, as bubblewrap's --tmpfs gives. Its
  // contents are never versioned (ignored), and apt, compilers and
  // installers need it.
  if (InTree(s, "/tmp", true))
    p.push_back({Op::kMount, "mount /tmp", "tmpfs", r + "/tmp", "tmpfs", "mode=1777", MS_NOSUID | MS_NODEV});
  // /sys read-only: bind the host's and remount it read-only.
  p.push_back({Op::kBind, "bind /sys", "/sys", r + "/sys", "", "", MS_BIND | MS_REC, true});
  p.push_back({Op::kRemountRo, "remount /sys read-only", "", r + "/sys", "", "", 0, true});
  // Name resolution of the host, only where the tree has the files.
  for (const char* f : {"/etc/resolv.conf", "/etc/hosts"}) {
    if (InTree(s, f, false) && access(f, R_OK) == 0)
      p.push_back({Op::kBind, std::string("bind ") + f, f, r + f, "", "", MS_BIND, true});
  }
  for (const Bind& b : s.binds) PlanBind(r, b, run_tmpfs, p);
  p.push_back({Op::kPivot, "pivot_root " + r, "", r});
  if (s.network == Network::kDeny) p.push_back({Op::kLoopbackUp, "bring up lo"});
  p.push_back({Op::kHostname, "sethostname", s.hostname});
  p.push_back({Op::kChdir, "chdir " + s.cwd, "", s.cwd});
  return p;
}

bool RootlessApt(const EnvSpec& spec) { return geteuid() != 0 && InTree(spec, "/run", true); }

bool InTree(const EnvSpec& spec, const std::string& path, bool dir) {
  auto has = [&](const std::string& p) { return dir ? IsDir(p) : access(p.c_str(), F_OK) == 0; };
  if (!spec.overlay) return has(spec.root + path);
  // Before the overlay is mounted: the upper wins, else the lower (a
  // whiteout in the upper hides it, and is no directory or file here).
  struct stat st;
  if (!spec.overlay->upper.empty() && lstat((spec.overlay->upper + path).c_str(), &st) == 0)
    return !(S_ISCHR(st.st_mode) && st.st_rdev == 0) && has(spec.overlay->upper + path);
  return has(spec.overlay->lower + path);
}

std::vector<std::string> BuildEnv(const std::vector<std::string>& pass_env,
                                  const std::vector<std::string>& set_env, bool rootless_apt) {
  std::vector<std::string> env;
  auto keep = [&](const std::string& name) {
    for (const auto& kv : set_env)  // set_env wins over what is passed through
      if (kv.compare(0, name.size() + 1, name + "=") == 0) return false;
    if (name == "PATH" || name == "HOME" || name == "TERM" || name == "LANG" || name.rfind("LC_", 0) == 0)
      return true;
    for (const auto& p : pass_env) if (p == name) return true;
    return false;
  };
  bool have_path = false;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (keep(name)) { env.push_back(kv); have_path |= name == "PATH"; }
  }
  bool have_apt = false;
  for (const auto& kv : set_env) {
    env.push_back(kv);
    have_apt |= kv.rfind("APT_CONFIG=", 0) == 0;
    have_path |= kv.rfind("PATH=", 0) == 0;
  }
  if (rootless_apt && !have_apt) env.push_back(std::string("APT_CONFIG=") + kAptConfigPath);
  if (!have_path) env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  return env;
}

namespace {
Result<void> WriteFile(const std::string& path, const std::string& data) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return FailErrno(path, errno);
  if (write(fd.get(), data.data(), data.size()) != ssize_t(data.size())) return FailErrno(path, errno);
  return {};
}
}  // namespace

Result<void> WriteIdMaps(pid_t pid) {
  std::string base = "/proc/" + std::to_string(pid);
  if (geteuid() == 0) {
    AE_TRY(WriteFile(base + "/uid_map", "0 0 4294967295\n"));
    return WriteFile(base + "/gid_map", "0 0 4294967295\n");
  }
  AE_TRY(WriteFile(base + "/uid_map", "0 " + std::to_string(geteuid()) + " 1\n"));
  AE_TRY(WriteFile(base + "/setgroups", "deny\n"));
  return WriteFile(base + "/gid_map", "0 " + std::to_string(getegid()) + " 1\n");
}

pid_t CloneChild(int flags, int (*fn)(void*), void* arg) {
  alignas(16) char stack[256 * 1024];
  return clone(fn, stack + sizeof stack, flags | SIGCHLD, arg);
}

std::optional<ChildError> ReadReports(int fd, pid_t* pid) {
  std::optional<ChildError> err;
  ChildError ce;
  for (;;) {
    ssize_t r = read(fd, &ce, sizeof ce);
    if (r < 0 && errno == EINTR) continue;
    if (r != sizeof ce) return err;
    if (ce.step == kStepPid) { if (pid) *pid = ce.err; }
    else if (!err) err = ce;
  }
}

Unexpected<Error> DescribeChildError(const ChildError& ce, const std::vector<Step>& plan,
                                     const std::string& argv0) {
  std::string what;
  switch (ce.step) {
    case kStepExec: what = "exec " + argv0; break;
    case kStepStdio: what = "redirect stdio"; break;
    case kStepFork: what = "fork"; break;
    case kStepCgroup: what = "join cgroup"; break;
    case kStepSetns: what = "setns"; break;
    case kStepChdir: what = "chdir"; break;
    case kStepTty: what = "controlling terminal (stdin must be a tty)"; break;
    case kStepInit: what = "exec the env's init program"; break;
    case kStepMessage: what = "the env's init program: reading its message"; break;
    default: what = ce.step >= 0 && size_t(ce.step) < plan.size() ? plan[size_t(ce.step)].what : "setup";
  }
  Unexpected<Error> e = FailErrno(what, ce.err);
  // The command itself is missing: a shell would say 127 (not found).
  if (ce.step == kStepExec && (ce.err == ENOENT || ce.err == ENOTDIR)) e.error().code = ErrorCode::kNoProgram;
  return e;
}

}  // namespace agentenv::runner::internal
