// Env: the long-lived handle. Start clones the env's init into new
// namespaces, maps its ids and lets it exec the init program
// (runner/init_main.cc), which runs the setup plan, forks spec.argv as
// pid 2, reaps orphans, and reports pid 2's wait status over a pipe when it
// ends (its own exit then tears down the pid namespace, killing everything
// left).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "runner/env_state.h"
#include "runner/init_program.h"
#include "runner/setup.h"

namespace agentenv::runner {
using namespace internal;

namespace {

// The directory fd init sent with SCM_RIGHTS (kSendDir), already queued.
Result<UniqueFd> ReceiveFd(int sock) {
  char data;
  struct iovec iov {&data, 1};
  alignas(struct cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctl;
  msg.msg_controllen = sizeof ctl;
  if (recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1) return FailErrno("disk quota: receiving its tmpfs", errno);
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return Fail("disk quota: the env sent no tmpfs");
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  return UniqueFd(fd);
}

}  // namespace

Env::Env(std::unique_ptr<State> s) : s_(std::move(s)) {}
Env::Env(Env&&) noexcept = default;
Env& Env::operator=(Env&&) noexcept = default;
Env::~Env() = default;
pid_t Env::pid() const { return s_->pid; }
int Env::pidfd() const { return s_->pidfd.get(); }
int Env::disk() const { return s_->disk.get(); }

Result<Env> Env::Start(const EnvSpec& spec, StdioFds stdio) {
  if (spec.argv.empty()) return Fail(ErrorCode::kInvalid, "start: empty argv");
  if (spec.overlay) {
    for (const std::string* d : {&spec.overlay->lower, &spec.overlay->upper, &spec.overlay->work})
      if (d->find_first_of(",:") != std::string::npos)
        return Fail(ErrorCode::kInvalid, *d + ": an overlay directory's path may not contain ',' or ':'");
  }
  auto st = std::make_unique<State>();
  AE_ASSIGN(st->cgroups, CgroupSet::Create(spec.limits));
  // With a disk quota, init sends the tmpfs it mounted over this socket.
  UniqueFd disk_r, disk_w;
  if (spec.overlay && spec.overlay->disk_bytes) {
    int sp[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) != 0) return FailErrno("socketpair", errno);
    disk_r.reset(sp[0]);
    disk_w.reset(sp[1]);
  }
  const std::vector<Step> plan = Plan(spec, disk_w.get());
  st->rootless_apt = RootlessApt(spec);

  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd sync_r(p[0]), sync_w(p[1]);
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd err_r(p[0]), err_w(p[1]);
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd status_w(p[1]);
  st->status_r.reset(p[0]);

  InitMessage m;
  m.mode = InitMessage::Mode::kEnv;
  m.argv = spec.argv;
  m.env = BuildEnv(spec.pass_env, spec.set_env, st->rootless_apt);
  m.in = stdio.in, m.out = stdio.out, m.err = stdio.err;
  m.report = err_w.get();
  m.plan = plan;
  m.status = status_w.get();
  m.kept = {status_w.get()};
  for (int fd : spec.held_fds)
    if (fd > 2) m.kept.push_back(fd);
  std::sort(m.kept.begin(), m.kept.end());
  m.terminal = spec.terminal;
  m.tied = spec.tied_to_caller;
  AE_ASSIGN(UniqueFd message, WriteInitMessage(m));
  InitExec x;
  x.message = message.get();
  x.report = err_w.get();
  x.nice = spec.limits.nice;
  x.tied = spec.tied_to_caller;
  x.sync_r = sync_r.get();
  x.sync_w = sync_w.get();
  std::vector<int> fds = m.kept;
  for (int fd : {stdio.in, stdio.out, stdio.err, disk_w.get()}) fds.push_back(fd);
  AE_TRY(PrepareInitExec(x, fds));

  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC;
  if (spec.network == Network::kDeny) flags |= CLONE_NEWNET;
  pid_t pid = CloneChild(flags, [](void* p) -> int { ExecInitProgram(*static_cast<const InitExec*>(p)); }, &x);
  if (pid < 0) return FailErrno("clone (user/mount/pid namespaces)", errno);
  st->pid = pid;
  sync_r.reset();
  err_w.reset();
  status_w.reset();
  fcntl(st->status_r.get(), F_SETFL, O_NONBLOCK);
  st->pidfd.reset(int(syscall(SYS_pidfd_open, pid, 0)));
  if (!st->pidfd) return FailErrno("pidfd_open", errno);  // ~State kills and reaps init
  if (auto m = WriteIdMaps(pid); !m) return Wrap("user namespace id map", m.error());
  if (auto m = st->cgroups.Attach(pid); !m) return Wrap("join cgroup", m.error());
  // Namespace fds taken while init is an unreaped child: no pid reuse race.
  std::vector<std::pair<int, const char*>> kinds = {
      {CLONE_NEWUSER, "user"}, {CLONE_NEWNS, "mnt"}, {CLONE_NEWUTS, "uts"}, {CLONE_NEWIPC, "ipc"}};
  if (spec.network == Network::kDeny) kinds.push_back({CLONE_NEWNET, "net"});
  kinds.push_back({CLONE_NEWPID, "pid"});
  for (auto [kind, name] : kinds) {
    std::string path = "/proc/" + std::to_string(pid) + "/ns/" + name;
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return FailErrno(path, errno);
    if (kind == CLONE_NEWPID && fstat(fd.get(), &st->pidns) != 0) return FailErrno(path, errno);
    st->ns.emplace_back(kind, std::move(fd));
  }
  (void)!write(sync_w.get(), "x", 1);
  sync_w.reset();
  if (auto ce = ReadReports(err_r.get(), nullptr)) return DescribeChildError(*ce, plan, spec.argv[0]);
  if (disk_r) {
    disk_w.reset();
    AE_ASSIGN(st->disk, ReceiveFd(disk_r.get()));
  }
  return Env(std::move(st));
}

Result<ExitStatus> Env::Wait() {
  if (!s_->done) {
    int status = 0;
    while (waitpid(s_->pid, &status, 0) < 0) {
      if (errno != EINTR) return FailErrno("waitpid", errno);
    }
    s_->Finish(status);
  }
  return *s_->done;
}

Result<std::optional<ExitStatus>> Env::TryWait() {
  if (!s_->done) {
    int status = 0;
    pid_t r = waitpid(s_->pid, &status, WNOHANG);
    if (r < 0) return FailErrno("waitpid", errno);
    if (r == 0) return std::optional<ExitStatus>();
    s_->Finish(status);
  }
  return std::optional<ExitStatus>(*s_->done);
}

void Env::KillAll() {
  if (s_->done) return;
  // SIGKILL to a pid namespace's init kills every process in it; the kernel
  // lets init finish exiting only after all of them are gone.
  kill(s_->pid, SIGKILL);
  s_->cgroups.Kill();
  (void)Wait();
}

}  // namespace agentenv::runner
