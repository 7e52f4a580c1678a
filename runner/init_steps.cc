// The steps of the env's init (runner/init_steps.h): in the runner library
// and in the init program.
#include "runner/init_steps.h"

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

namespace agentenv::runner::internal {

int RemountReadOnly(const char* target) {
  struct statvfs sv;
  if (statvfs(target, &sv) != 0) return -1;
  unsigned long keep = 0;
  if (sv.f_flag & ST_NOSUID) keep |= MS_NOSUID;
  if (sv.f_flag & ST_NODEV) keep |= MS_NODEV;
  if (sv.f_flag & ST_NOEXEC) keep |= MS_NOEXEC;
  if (sv.f_flag & ST_NOATIME) keep |= MS_NOATIME;
  if (sv.f_flag & ST_RELATIME) keep |= MS_RELATIME;
  return mount(nullptr, target, nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, nullptr);
}

int Execute(const Step& st) {
  switch (st.op) {
    case Op::kMakePrivate:
      return mount(nullptr, "/", nullptr, st.flags, nullptr);
    case Op::kMkdir:
      return mkdir(st.dst.c_str(), 0755) == 0 || errno == EEXIST ? 0 : -1;
    case Op::kBindRoot:
    case Op::kBind: {
      if (st.create == MountPoint::kCreateDir && mkdir(st.dst.c_str(), 0755) != 0 && errno != EEXIST) return -1;
      if (st.create == MountPoint::kCreateFile && access(st.dst.c_str(), F_OK) != 0) {
        int fd = open(st.dst.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) return -1;
        close(fd);
      }
      return mount(st.src.c_str(), st.dst.c_str(), nullptr, st.flags, nullptr);
    }
    case Op::kMount:
      if (mkdir(st.dst.c_str(), 0755) != 0 && errno != EEXIST) return -1;
      return mount(st.src.c_str(), st.dst.c_str(), st.fstype.c_str(), st.flags,
                   st.data.empty() ? nullptr : st.data.c_str());
    case Op::kRemountRo:
      return RemountReadOnly(st.dst.c_str());
    case Op::kSymlink:
      return symlink(st.src.c_str(), st.dst.c_str());
    case Op::kWriteFile: {
      int fd = open(st.dst.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0644);
      if (fd < 0) return -1;
      ssize_t n = write(fd, st.src.data(), st.src.size());
      close(fd);
      return n == ssize_t(st.src.size()) ? 0 : -1;
    }
    case Op::kPivot:
      // pivot_root(".", "."): the old root stacks under the new one; detach it.
      if (chdir(st.dst.c_str()) != 0) return -1;
      if (syscall(SYS_pivot_root, ".", ".") != 0) return -1;
      if (umount2(".", MNT_DETACH) != 0) return -1;
      return chdir("/");
    case Op::kLoopbackUp: {
      int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return -1;
      struct ifreq ifr {};
      std::strcpy(ifr.ifr_name, "lo");
      ifr.ifr_flags = IFF_UP | IFF_RUNNING;
      int rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
      close(fd);
      return rc;
    }
    case Op::kHostname:
      return sethostname(st.src.data(), st.src.size());
    case Op::kChdir:
      return chdir(st.dst.c_str());
    case Op::kCopyDirMeta: {
      // The merged root shows the upper's root: it must look like the tree's.
      struct stat ref;
      if (stat(st.src.c_str(), &ref) != 0) return -1;
      (void)!chown(st.dst.c_str(), ref.st_uid, ref.st_gid);  // an unmapped owner stays ours
      if (chmod(st.dst.c_str(), ref.st_mode & 07777) != 0) return -1;
      struct timespec ts[2] = {ref.st_atim, ref.st_mtim};
      return utimensat(AT_FDCWD, st.dst.c_str(), ts, 0);
    }
    case Op::kSendDir: {
      int fd = open(st.dst.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return -1;
      char data = 'd';
      struct iovec iov {&data, 1};
      alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
      struct msghdr msg {};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = ctl;
      msg.msg_controllen = sizeof ctl;
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
      int rc = sendmsg(st.fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
      int e = errno;
      close(fd);
      errno = e;
      return rc;
    }
  }
  return -1;
}

void ResetProcessState() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &dfl, nullptr);  // KILL/STOP just fail
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);  // supervisor fds never leak in
}

void CloseAllBut(const std::vector<unsigned>& keep) {
  unsigned from = 3;
  for (unsigned k : keep) {
    if (k > from) syscall(SYS_close_range, from, k - 1, 0U);
    if (k >= from) from = k + 1;
  }
  syscall(SYS_close_range, from, ~0U, 0U);
}

void ChildFail(int fd, int step) {
  ChildError ce{step, errno};
  (void)!write(fd, &ce, sizeof ce);
  _exit(127);
}

void DupStdio(int in, int out, int err, int report_fd) {
  if ((in >= 0 && dup2(in, 0) < 0) || (out >= 0 && dup2(out, 1) < 0) || (err >= 0 && dup2(err, 2) < 0))
    ChildFail(report_fd, kStepStdio);
}

}  // namespace agentenv::runner::internal
