// Env::Spawn and Env::Processes: reaching into a running env from outside.
//
// Spawn clones a helper, which execs the init program (runner/init_main.cc)
// to join the env's namespaces (user first: it grants the capabilities the
// other setns calls need) and fork the command, which lands in the env's
// pid namespace and joins the env's cgroups. The helper stays outside both and waits for the command, so the
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sstream>

#include "common/read_all.h"
#include "runner/env_state.h"
#include "runner/init_program.h"
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

// A process's /proc file ("" once the process is gone); they are small.
std::string ReadFile(const std::string& path) {
  auto text = ReadFileUpTo(path, 1 << 20);
  return text ? std::move(*text) : std::string();
}

}  // namespace

Result<Process> Env::Spawn(const Command& cmd, StdioFds stdio) {
  if (cmd.argv.empty()) return Fail(ErrorCode::kInvalid, "spawn: empty argv");
  if (s_->done) return Fail(ErrorCode::kInvalid, "spawn: the env has ended");
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return FailErrno("pipe", errno);
  UniqueFd report_r(p[0]), report_w(p[1]);
  InitMessage m;
  m.mode = InitMessage::Mode::kJoin;
  m.argv = cmd.argv;
  m.env = BuildEnv(cmd.pass_env, cmd.set_env, s_->rootless_apt);
  m.in = stdio.in, m.out = stdio.out, m.err = stdio.err;
  m.report = report_w.get();
  for (const auto& [kind, fd] : s_->ns) m.ns.emplace_back(kind, fd.get());
  m.procs = s_->cgroups.ProcsFds();
  m.cwd = cmd.cwd;
  AE_ASSIGN(UniqueFd message, WriteInitMessage(m));
  InitExec x;
  x.message = message.get();
  x.report = report_w.get();
  std::vector<int> fds = m.procs;
  for (const auto& [kind, fd] : m.ns) fds.push_back(fd);
  for (int fd : {stdio.in, stdio.out, stdio.err}) fds.push_back(fd);
  AE_TRY(PrepareInitExec(x, fds));
  auto st = std::make_unique<Process::State>();
  st->helper = CloneChild(0, [](void* p) -> int { ExecInitProgram(*static_cast<const InitExec*>(p)); }, &x);
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
