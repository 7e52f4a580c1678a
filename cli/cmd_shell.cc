// agentenv shell: an interactive shell inside the environment on a pty,
// with automatic capture while it runs and a snapshot when it ends.
//
// The pty is ours (opened here, outside the env); the shell gets the slave
// as its controlling terminal (runner: EnvSpec::terminal). We copy bytes
// between the caller's terminal (in raw mode, restored on every exit path)
// and the master, and pass window-size changes on: SIGWINCH → TIOCSWINSZ on
// the master, which signals the shell's foreground process group.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "cli/capture.h"
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/ops.h"
#include "common/unique_fd.h"
#include "runner/runner.h"

namespace agentenv::cli {
namespace {

// The caller's terminal in raw mode for this object's lifetime.
class RawMode {
 public:
  explicit RawMode(int fd) : fd_(fd) {
    if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
    termios raw = saved_;
    ::cfmakeraw(&raw);
    active_ = ::tcsetattr(fd, TCSAFLUSH, &raw) == 0;
  }
  ~RawMode() {
    if (active_) ::tcsetattr(fd_, TCSAFLUSH, &saved_);
  }
  RawMode(const RawMode&) = delete;
  RawMode& operator=(const RawMode&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

struct Pty {
  UniqueFd master, slave;
};

Result<Pty> OpenPty() {
  Pty p;
  p.master.reset(::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.master) return FailErrno("posix_openpt", errno);
  if (::grantpt(p.master.get()) != 0 || ::unlockpt(p.master.get()) != 0) return FailErrno("unlockpt", errno);
  char name[128];
  if (::ptsname_r(p.master.get(), name, sizeof name) != 0) return FailErrno("ptsname", errno);
  p.slave.reset(::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.slave) return FailErrno(name, errno);
  return p;
}

void CopyWinsize(int from, int to) {
  winsize ws{};
  if (::ioctl(from, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) ::ioctl(to, TIOCSWINSZ, &ws);
}

bool WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd pf{fd, POLLOUT, 0};
      ::poll(&pf, 1, 100);
      continue;
    }
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Copies between the caller and the pty until the shell's env has ended
// and its output is drained. SIGTERM/SIGHUP kill the env.
void Relay(runner::Env& env, int master, int sigfd) {
  bool in_open = true, exited = false;
  char buf[65536];
  for (;;) {
    pollfd p[4] = {{master, POLLIN, 0}, {in_open ? 0 : -1, POLLIN, 0}, {sigfd, POLLIN, 0},
                   {exited ? -1 : env.pidfd(), POLLIN, 0}};
    // After the env is gone, read what is left without waiting.
    if (::poll(p, 4, exited ? 0 : -1) < 0 && errno != EINTR) return;
    if (p[0].revents) {
      ssize_t n = ::read(master, buf, sizeof buf);
      if (n > 0) {
        WriteAll(1, buf, size_t(n));
        continue;  // drain before looking at the rest
      }
      if (n < 0 && errno == EINTR) continue;
      return;  // EIO: no process holds the slave any more
    }
    if (exited) return;
    if (p[1].revents) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) {
        WriteAll(master, buf, size_t(n));
      } else if (n == 0 || errno != EINTR) {
        in_open = false;
        WriteAll(master, "\x04", 1);  // our input ended (a pipe): the shell reads end-of-file too
      }
    }
    if (p[2].revents) {
      signalfd_siginfo si;
      if (::read(sigfd, &si, sizeof si) == sizeof si) {
        if (si.ssi_signo == SIGWINCH) CopyWinsize(0, master);
        else if (si.ssi_signo == SIGINT) ::kill(env.pid(), SIGINT);  // init forwards it to the shell
        else env.KillAll();
      }
    }
    if (p[3].revents) exited = true;
  }
}

}  // namespace

int CmdShell(int argc, char** argv) {
  Globals g;
  std::vector<std::string> cmd;
  std::string network = "allow", cwd = "/";
  int quiet_ms = 300, max_delay_ms = 3000;
  CLI::App app{"Open an interactive shell inside the environment (on a pty) with automatic capture while it "
               "runs and a snapshot when it exits; the shell's exit code is passed through", "shell"};
  AddGlobals(app, g);
  app.add_option("--network", network, "allow or deny (deny: loopback only)")->check(CLI::IsMember({"allow", "deny"}));
  app.add_option("--cwd", cwd, "Working directory inside (default /)");
  app.add_option("--quiet-ms", quiet_ms, "Capture quiet period (default 300)")->check(CLI::Range(10, 600000));
  app.add_option("--max-delay-ms", max_delay_ms, "Capture maximum delay (default 3000)")->check(CLI::Range(10, 3600000));
  app.add_option("command", cmd, "Shell to run (after --; default /bin/bash -i if the tree has it, else /bin/sh -i)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  snap::Repo& r = **repo;
  if (cmd.empty()) {
    cmd = {::access((r.work_dir() + "/bin/bash").c_str(), X_OK) == 0 ? "/bin/bash" : "/bin/sh", "-i"};
  }

  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGWINCH, SIGINT, SIGTERM, SIGHUP}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);  // before the watcher's thread starts
  UniqueFd sigfd(::signalfd(-1, &sigs, SFD_CLOEXEC));
  if (!sigfd) return ReportError(g, Error{std::string("signalfd: ") + std::strerror(errno), errno, ErrorCode::kIo});

  auto pty = OpenPty();
  if (!pty) return ReportError(g, pty.error());
  if (::isatty(0)) {
    termios t;
    if (::tcgetattr(0, &t) == 0) ::tcsetattr(pty->slave.get(), TCSANOW, &t);  // the caller's line settings
    CopyWinsize(0, pty->master.get());
  }
  // Like supervise: this process captures, so it holds the lock (a daemon
  // serving the same root makes this wait, then fail with kBusy).
  if (auto held = r.HoldLock(); !held) return ReportError(g, held.error());
  auto capture = Capture::Start(r, {quiet_ms, max_delay_ms});
  if (!capture) return ReportError(g, capture.error());

  runner::EnvSpec spec;
  spec.root = r.work_dir();
  spec.argv = cmd;
  spec.cwd = cwd;
  spec.network = network == "deny" ? runner::Network::kDeny : runner::Network::kAllow;
  spec.terminal = true;
  int s = pty->slave.get();
  auto env = runner::Env::Start(spec, {s, s, s});
  pty->slave.reset();  // EOF/EIO on the master once the env's processes are gone
  if (!env) return ReportError(g, env.error());
  std::optional<runner::ExitStatus> st;
  {
    RawMode raw(0);
    Relay(*env, pty->master.get(), sigfd.get());
    auto w = env->Wait();
    if (w) st = *w;
  }

  std::string line;
  for (const auto& a : cmd) line += (line.empty() ? "" : " ") + a;
  snap::SnapOptions opt;
  opt.label = "shell: " + line.substr(0, 180);
  Result<snap::SnapResult> snap = [&]() -> Result<snap::SnapResult> {
    std::lock_guard writer(WriterMutex());  // the whole session's tail goes into this node
    return r.Snapshot(opt);
  }();
  (*capture)->Stop(false);  // the snapshot above saw everything
  if (!snap) return ReportError(g, snap.error());
  int code = !st ? kExitFailed : st->signal ? 128 + st->signal : st->exit_code;
  nlohmann::json j = {{"exit_code", code}, {"node", snap->node ? nlohmann::json(snap->node->Hex()) : nlohmann::json(nullptr)}};
  if (g.json) ReportOk(g, j, "");
  else if (snap->node) std::fprintf(stderr, "agentenv: node %s: %s\n", Short(*snap->node).c_str(), opt.label.c_str());
  return code;
}

}  // namespace agentenv::cli
