#include "runner/init_program.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

// runner/init_image.cc.
extern "C" const char agentenv_init_image[], agentenv_init_image_end[];

namespace agentenv::runner::internal {
namespace {

// MFD_EXEC (Linux 6.3): a kernel with vm.memfd_noexec wants it said.
#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

Result<UniqueFd> MemfdWith(const char* name, const char* data, size_t size, unsigned flags) {
  UniqueFd fd(memfd_create(name, MFD_CLOEXEC | flags));
  if (!fd && errno == EINVAL && (flags & MFD_EXEC)) fd.reset(memfd_create(name, MFD_CLOEXEC | (flags & ~MFD_EXEC)));
  if (!fd && errno == EACCES && (flags & MFD_EXEC))
    return FailErrno(std::string("memfd_create ") + name + " (vm.memfd_noexec forbids running a program from memory)",
                     errno);
  if (!fd) return FailErrno(std::string("memfd_create ") + name, errno);
  for (size_t done = 0; done < size;) {
    ssize_t n = write(fd.get(), data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return FailErrno(std::string("memfd ") + name, n < 0 ? errno : EIO);
    done += size_t(n);
  }
  return fd;
}

// The init program, sealed in a memfd: made on the first call, then the
// same for the process's life (its bytes are constant). Not a file beside
// the binary: nothing to install, find or keep in step with it.
Result<int> InitProgram() {
  static const Result<UniqueFd> program = []() -> Result<UniqueFd> {
    const size_t size = size_t(agentenv_init_image_end - agentenv_init_image);
    AE_ASSIGN(UniqueFd fd, MemfdWith("agentenv-init", agentenv_init_image, size, MFD_ALLOW_SEALING | MFD_EXEC));
    if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE) != 0)
      return FailErrno("memfd agentenv-init: seal", errno);
    return fd;
  }();
  if (!program) return Unexpected<Error>(program.error());
  return program->get();
}

}  // namespace

Result<UniqueFd> WriteInitMessage(const InitMessage& m) {
  const std::string bytes = EncodeInitMessage(m);
  return MemfdWith("agentenv-init-message", bytes.data(), bytes.size(), 0);
}

Result<void> PrepareInitExec(InitExec& x, const std::vector<int>& fds) {
  AE_ASSIGN(x.program, InitProgram());
  x.pass.clear();
  for (int fd : fds)
    if (fd > 2) x.pass.push_back(unsigned(fd));
  x.pass.push_back(unsigned(x.message));
  x.pass.push_back(unsigned(x.report));
  std::sort(x.pass.begin(), x.pass.end());
  x.keep = x.pass;
  for (int fd : {x.sync_r, x.sync_w, x.program})  // the program's closes at the exec
    if (fd > 2) x.keep.push_back(unsigned(fd));
  std::sort(x.keep.begin(), x.keep.end());
  x.message_arg = std::to_string(x.message);
  x.report_arg = std::to_string(x.report);
  return {};
}

void ExecInitProgram(const InitExec& x) {
  ResetProcessState();
  // The clone copied every descriptor open at that moment, other threads'
  // too (another workspace's lock, a lower gc holds, another env's pipes):
  // they go now, not at the exec, which waits for the caller's id maps.
  CloseAllBut(x.keep);
  for (unsigned fd : x.pass) fcntl(int(fd), F_SETFD, 0);
  if (x.nice > 0) (void)setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + x.nice);
  // Before the sync read: a caller that died before this line has closed
  // its end of the sync pipe, and the read below sees EOF.
  if (x.tied) prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (x.sync_r >= 0) {
    close(x.sync_w);
    char c;
    if (read(x.sync_r, &c, 1) != 1) _exit(127);  // the caller failed to map ids, or died
  }
  // Not before the ids are mapped: an exec by an unmapped user would drop
  // every capability in the new user namespace.
  char* const argv[] = {const_cast<char*>("agentenv-init"), const_cast<char*>(x.message_arg.c_str()),
                        const_cast<char*>(x.report_arg.c_str()), nullptr};
  char* const envp[] = {nullptr};
  syscall(SYS_execveat, x.program, "", argv, envp, AT_EMPTY_PATH);
  ChildFail(x.report, kStepInit);
}

}  // namespace agentenv::runner::internal
