// Env: the long-lived handle. Start clones the env's init into new
// namespaces; init runs the setup plan, forks spec.argv as pid 2, reaps
// orphans, and reports pid 2's wait status over a pipe when it ends (its own
// exit then tears down the pid namespace, killing everything left).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "runner/env_state.h"
#include "runner/setup.h"

namespace agentenv::runner {
using namespace internal;

namespace {

// Written by init's signal handler only; signals sent to the env's pid are
// forwarded to the main command (init itself ignores what it has no handler for).
volatile pid_t g_main_pid = 0;
void Forward(int sig) { if (g_main_pid > 0) kill(g_main_pid, sig); }

// What init needs, all made by the parent before the clone: init may not
// allocate (another thread of the parent may have held malloc's lock).
struct InitArgs {
  const EnvSpec& spec;
  const std::vector<Step>& plan;
  const ExecArgs& exec;
  const std::vector<unsigned>& kept;  // sorted
  const std::vector<unsigned>& setup;  // sorted: what init needs until its command runs
  StdioFds stdio;
  int sync_r, sync_w, err_w, status_w;
};

// init: pid 1 of the new pid namespace. Raw syscalls only.
[[noreturn]] void InitMain(const InitArgs& a) {
  ResetProcessState();
  if (a.spec.limits.nice > 0) (void)setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + a.spec.limits.nice);
  // The clone copied every descriptor the parent had open, also other
  // threads' (another workspace's lock, a lower gc holds for removal): kept
  // until the setup below ends, they made those look taken to everyone
  // else. Only what the setup needs stays.
  CloseAllBut(a.setup);
  // Before the sync read: a caller that died before this line has closed
  // its end of the sync pipe, and the read below sees EOF.
  if (a.spec.tied_to_caller) prctl(PR_SET_PDEATHSIG, SIGKILL);
  close(a.sync_w);
  char c;
  if (read(a.sync_r, &c, 1) != 1) _exit(127);  // the parent failed to map ids
  for (size_t i = 0; i < a.plan.size(); ++i)
    if (Execute(a.plan[i]) != 0 && !a.plan[i].optional) ChildFail(a.err_w, int(i));
  prctl(PR_SET_NAME, "agentenv-init");
  // A raw clone, not fork(): glibc's fork takes the malloc and stdio
  // locks for its atfork handlers, and this process was cloned from a
  // multithreaded parent that may have held them (a tournament starts
  // envs from several threads): fork() here could wait for ever.
  pid_t m = pid_t(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (m < 0) ChildFail(a.err_w, kStepFork);
  if (m == 0) {
    DupStdio(a.stdio, a.err_w);
    if (a.spec.terminal && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) != 0)) ChildFail(a.err_w, kStepTty);
    execvpe(a.exec.argv_p[0], a.exec.argv_p.data(), a.exec.env_p.data());
    ChildFail(a.err_w, kStepExec);
  }
  g_main_pid = m;
  struct sigaction fwd {};
  fwd.sa_handler = Forward;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &fwd, nullptr);
  // From here init needs only status_w. Everything else goes, also the
  // descriptors other threads of the parent had open when it was cloned
  // (another env's output pipes): EOF of each env follows its own
  // processes alone.
  // The held descriptors (leases, locks) stay too, until init exits.
  CloseAllBut(a.kept);
  for (;;) {
    int status;
    pid_t w = wait(&status);
    if (w == m) {
      (void)!write(a.status_w, &status, sizeof status);
      _exit(0);
    }
    if (w < 0 && errno == ECHILD) _exit(0);
  }
}

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
  const ExecArgs a(spec.argv, BuildEnv(spec.pass_env, spec.set_env, st->rootless_apt));

  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd sync_r(p[0]), sync_w(p[1]);
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd err_r(p[0]), err_w(p[1]);
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd status_w(p[1]);
  // What init keeps open (sorted, made here: the child may not allocate).
  std::vector<unsigned> kept = {unsigned(status_w.get())};
  for (int fd : spec.held_fds)
    if (fd > 2) kept.push_back(unsigned(fd));
  std::sort(kept.begin(), kept.end());
  std::vector<unsigned> setup = kept;
  for (int fd : {sync_r.get(), sync_w.get(), err_w.get(), stdio.in, stdio.out, stdio.err, disk_w.get()})
    if (fd > 2) setup.push_back(unsigned(fd));
  std::sort(setup.begin(), setup.end());
  st->status_r.reset(p[0]);

  int flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC;
  if (spec.network == Network::kDeny) flags |= CLONE_NEWNET;
  InitArgs args{spec, plan, a, kept, setup, stdio, sync_r.get(), sync_w.get(), err_w.get(), status_w.get()};
  pid_t pid = CloneChild(flags, [](void* p) -> int { InitMain(*static_cast<const InitArgs*>(p)); }, &args);
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
