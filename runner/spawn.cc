// Env::Spawn and Env::Processes: reaching into a running env from outside.
//
// Spawn clones a helper that joins the env's namespaces (user first: it
// grants the capabilities the other setns calls need) and forks the
// command, which lands in the env's pid namespace and joins the env's
// cgroups. The helper stays outside both and waits for the command, so the
// command is reaped at once even when the env dies: the env's init cannot
// finish exiting while a zombie from outside its namespace is unreaped, and
// an orphan would wait for the host's init to reap it (seconds, measured).
// For the same reason the helper is never killed on purpose: Process::Kill
// sends it SIGTERM, it SIGKILLs the command, reaps it and exits with its
// status. PR_SET_PDEATHSIG covers a helper killed by anyone else.
#include <algorithm>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "common/read_all.h"
#include "runner/env_state.h"
#include "runner/setup.h"

namespace agentenv::runner {
using namespace internal;

Process::Process(std::unique_ptr<State> s) : s_(std::move(s)) {}
Process::Process(Process&&) noexcept = default;
Process& Process::operator=(Process&&) noexcept = default;
Process::~Process() = default;
pid_t Process::pid() const { return s_->pid; }
void Process::Kill() { if (!s_->done) kill(s_->helper, SIGTERM); }

Result<ExitStatus> Process::Wait() {
  if (!s_->done) {
    int status = 0;
    while (waitpid(s_->helper, &status, 0) < 0)
      if (errno != EINTR) return FailErrno("waitpid", errno);
    s_->done = DecodeWaitStatus(status);
  }
  return *s_->done;
}

Result<std::optional<ExitStatus>> Process::TryWait() {
  if (!s_->done) {
    int status = 0;
    pid_t r = waitpid(s_->helper, &status, WNOHANG);
    if (r < 0) return FailErrno("waitpid", errno);
    if (r == 0) return std::optional<ExitStatus>();
    s_->done = DecodeWaitStatus(status);
  }
  return std::optional<ExitStatus>(*s_->done);
}

namespace {

// The helper's command; its SIGTERM handler (Process::Kill) kills it.
volatile pid_t g_command = 0;
void KillCommand(int) { if (g_command > 0) kill(g_command, SIGKILL); }

// What the helper needs, all made by Spawn before the clone.
struct HelperArgs {
  const std::vector<int>& procs;
  const std::vector<std::pair<int, int>>& ns;
  const char* cwd;
  char* const* argv;
  char* const* envp;
  StdioFds stdio;
  int report;
  const std::vector<unsigned>& keep;  // sorted: every descriptor above
};

// The helper's half of Spawn, in the cloned child. Raw syscalls only.
[[noreturn]] void RunHelper(const HelperArgs& h) {
  const auto& [procs, ns, cwd, argv, envp, stdio, report, keep] = h;
  ResetProcessState();
  // The helper lives as long as its command: the descriptors the clone
  // copied from our parent's other threads (locks, leases) go at once.
  CloseAllBut(keep);
  for (auto [kind, fd] : ns) if (setns(fd, kind) != 0) ChildFail(report, kStepSetns);
  // Lands in the env's pid namespace. A raw clone, not fork(): fork's
  // atfork handlers would take malloc's lock, which another thread of
  // our parent may have held when it cloned us.
  pid_t c = pid_t(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
  if (c < 0) ChildFail(report, kStepFork);
  if (c == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The files were opened by the supervisor: the kernel checks its credentials.
    for (int fd : procs) if (write(fd, "0", 1) != 1) ChildFail(report, kStepCgroup);
    if (chdir(cwd) != 0) ChildFail(report, kStepChdir);
    DupStdio(stdio, report);
    execvpe(argv[0], argv, envp);
    ChildFail(report, kStepExec);
  }
  g_command = c;
  struct sigaction term {};
  term.sa_handler = KillCommand;
  sigaction(SIGTERM, &term, nullptr);
  ChildError pid{kStepPid, c};
  (void)!write(report, &pid, sizeof pid);
  close(report);
  for (int fd : {stdio.in, stdio.out, stdio.err}) if (fd > 2) close(fd);
  int status = 0;
  while (waitpid(c, &status, 0) < 0) if (errno != EINTR) _exit(127);
  if (WIFSIGNALED(status)) {
    // Pass the signal on as our own end; no core file of the helper.
    struct rlimit none {};
    setrlimit(RLIMIT_CORE, &none);
    kill(getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

// A process's /proc file ("" once the process is gone); they are small.
std::string ReadFile(const std::string& path) {
  auto text = ReadFileUpTo(path, 1 << 20);
  return text ? std::move(*text) : std::string();
}

}  // namespace

Result<Process> Env::Spawn(const Command& cmd, StdioFds stdio) {
  if (cmd.argv.empty()) return Fail(ErrorCode::kInvalid, "spawn: empty argv");
  if (s_->done) return Fail(ErrorCode::kInvalid, "spawn: the env has ended");
  const ExecArgs a(cmd.argv, BuildEnv(cmd.pass_env, cmd.set_env, s_->rootless_apt));
  std::vector<std::pair<int, int>> ns;
  for (const auto& [kind, fd] : s_->ns) ns.emplace_back(kind, fd.get());
  const std::vector<int> procs = s_->cgroups.ProcsFds();

  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd report_r(p[0]), report_w(p[1]);
  auto st = std::make_unique<Process::State>();
  std::vector<unsigned> keep;
  for (int fd : procs) keep.push_back(unsigned(fd));
  for (const auto& [kind, fd] : ns) keep.push_back(unsigned(fd));
  for (int fd : {stdio.in, stdio.out, stdio.err, report_w.get()})
    if (fd > 2) keep.push_back(unsigned(fd));
  std::sort(keep.begin(), keep.end());
  HelperArgs args{procs, ns, cmd.cwd.c_str(), a.argv_p.data(), a.env_p.data(), stdio, report_w.get(), keep};
  st->helper = CloneChild(0, [](void* p) -> int { RunHelper(*static_cast<const HelperArgs*>(p)); }, &args);
  if (st->helper < 0) return FailErrno("clone", errno);
  report_w.reset();
  pid_t pid = -1;
  if (auto ce = ReadReports(report_r.get(), &pid))
    return DescribeChildError(*ce, {}, cmd.argv[0]);  // ~State reaps the helper
  st->pid = pid;
  return Process(std::move(st));
}

Result<std::vector<ProcessInfo>> Env::Processes() const {
  std::vector<ProcessInfo> out;
  if (s_->done) return out;
  DIR* d = opendir("/proc");
  if (!d) return FailErrno("/proc", errno);
  for (dirent* e; (e = readdir(d));) {
    char* end;
    long pid = strtol(e->d_name, &end, 10);
    if (*end || pid <= 0) continue;
    const std::string base = std::string("/proc/") + e->d_name;
    struct stat ns;
    if (stat((base + "/ns/pid").c_str(), &ns) != 0) continue;  // gone, or not ours to inspect
    if (ns.st_ino != s_->pidns.st_ino || ns.st_dev != s_->pidns.st_dev) continue;
    ProcessInfo info{pid_t(pid), 0, 0, ""};
    std::string stat = ReadFile(base + "/stat");
    if (auto rp = stat.rfind(')'); rp != std::string::npos) {
      std::istringstream rest(stat.substr(rp + 2));
      char state;
      rest >> state >> info.ppid;
    }
    std::istringstream status(ReadFile(base + "/status"));
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("NSpid:", 0) != 0) continue;
      std::istringstream ids(line.substr(6));
      for (pid_t x; ids >> x;) info.ns_pid = x;  // the innermost namespace comes last
    }
    std::string cmdline = ReadFile(base + "/cmdline");
    while (!cmdline.empty() && cmdline.back() == '\0') cmdline.pop_back();
    for (char& c : cmdline) if (c == '\0') c = ' ';
    info.cmdline = std::move(cmdline);
    if (!stat.empty()) out.push_back(std::move(info));
  }
  closedir(d);
  return out;
}

}  // namespace agentenv::runner
