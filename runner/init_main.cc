// agentenv-init: the program an env's init and Env::Spawn's helper run.
//
// Both used to be clones of their caller that never exec'd: a copy of
// `serve`'s whole memory lived as long as the command, readable by the
// agent through /proc/1/mem (init is pid 1 of the env, root in its user
// namespace), and every page `serve` wrote while one lived was a
// copy-on-write fault and a TLB shootdown on every core. The caller's
// clone now execs this small static program at once (runner/init_program.h),
// which does what the clone did: its memory is this program's alone.
//
// argv[1] is the descriptor of its message (runner/init_message.h), argv[2]
// the one its errors go to as ChildError records, as before.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <linux/close_range.h>

#include "runner/init_message.h"

namespace agentenv::runner::internal {
namespace {

// A message is a plan and a command line: far below this.
constexpr size_t kMaxMessage = size_t(64) << 20;

// Written by the signal handlers' setters only: the command they act on.
volatile pid_t g_command = 0;
void Forward(int sig) { if (g_command > 0) kill(g_command, sig); }
void KillCommand(int) { if (g_command > 0) kill(g_command, SIGKILL); }

// From offset 0: the writer's offset is at its end (one open file).
bool ReadMessage(int fd, std::string* out) {
  char buf[1 << 16];
  for (;;) {
    ssize_t n = pread(fd, buf, sizeof buf, off_t(out->size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return true;
    if (out->size() + size_t(n) > kMaxMessage) {
      errno = EFBIG;
      return false;
    }
    out->append(buf, size_t(n));
  }
}

std::vector<char*> Pointers(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

// The command, in a child of ours (what comes before it is the caller's).
[[noreturn]] void ExecCommand(InitMessage& m) {
  DupStdio(m.in, m.out, m.err, m.report);
  if (m.terminal && (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) != 0)) ChildFail(m.report, kStepTty);
  std::vector<char*> argv = Pointers(m.argv), env = Pointers(m.env);
  execvpe(argv[0], argv.data(), env.data());
  ChildFail(m.report, kStepExec);
}

// pid 1 of a new env: the setup, the command as pid 2, then reaping until
// pid 2 ends (its status goes to m.status; init's exit then tears the pid
// namespace down, killing whatever is left).
[[noreturn]] void RunEnv(InitMessage& m) {
  // Set again, not only inherited: an exec may reset it.
  if (m.tied) prctl(PR_SET_PDEATHSIG, SIGKILL);
  for (size_t i = 0; i < m.plan.size(); ++i)
    if (Execute(m.plan[i]) != 0 && !m.plan[i].optional) ChildFail(m.report, int(i));
  prctl(PR_SET_NAME, "agentenv-init");
  pid_t command = fork();
  if (command < 0) ChildFail(m.report, kStepFork);
  if (command == 0) ExecCommand(m);
  g_command = command;
  struct sigaction fwd {};
  fwd.sa_handler = Forward;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &fwd, nullptr);
  // Only what init holds stays: the end of each of the env's pipes follows
  // its own processes alone.
  std::vector<unsigned> kept(m.kept.begin(), m.kept.end());
  std::sort(kept.begin(), kept.end());
  CloseAllBut(kept);
  for (;;) {
    int status;
    pid_t w = wait(&status);
    if (w == command) {
      (void)!write(m.status, &status, sizeof status);
      _exit(0);
    }
    if (w < 0 && errno == ECHILD) _exit(0);
  }
}

// Env::Spawn's helper (runner/spawn.cc tells why it stays outside the env
// and waits): joins the env's namespaces, forks the command into them and
// passes its end on as its own. SIGTERM (Process::Kill) kills the command.
[[noreturn]] void RunJoin(InitMessage& m) {
  for (auto [kind, fd] : m.ns)
    if (setns(fd, kind) != 0) ChildFail(m.report, kStepSetns);
  pid_t command = fork();  // lands in the env's pid namespace
  if (command < 0) ChildFail(m.report, kStepFork);
  if (command == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The files were opened by the supervisor: the kernel checks its credentials.
    for (int fd : m.procs)
      if (write(fd, "0", 1) != 1) ChildFail(m.report, kStepCgroup);
    if (chdir(m.cwd.c_str()) != 0) ChildFail(m.report, kStepChdir);
    ExecCommand(m);
  }
  g_command = command;
  struct sigaction term {};
  term.sa_handler = KillCommand;
  sigaction(SIGTERM, &term, nullptr);
  ChildError pid{kStepPid, command};
  (void)!write(m.report, &pid, sizeof pid);
  syscall(SYS_close_range, 3U, ~0U, 0U);  // the report, the namespaces, the command's stdio
  int status = 0;
  while (waitpid(command, &status, 0) < 0)
    if (errno != EINTR) _exit(127);
  if (WIFSIGNALED(status)) {
    // Pass the signal on as our own end; no core file of the helper.
    struct rlimit none {};
    setrlimit(RLIMIT_CORE, &none);
    kill(getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

}  // namespace
}  // namespace agentenv::runner::internal

int main(int argc, char** argv) {
  using namespace agentenv::runner::internal;
  if (argc != 3) return 127;
  // Every descriptor passed in closes in the command at its exec.
  syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);
  const int fd = atoi(argv[1]), report = atoi(argv[2]);
  std::string bytes;
  InitMessage m;
  if (!ReadMessage(fd, &bytes)) ChildFail(report, kStepMessage);
  close(fd);
  if (!DecodeInitMessage(bytes, &m) || m.report != report) {
    errno = EINVAL;
    ChildFail(report, kStepMessage);
  }
  if (m.mode == InitMessage::Mode::kJoin) RunJoin(m);
  RunEnv(m);
}
