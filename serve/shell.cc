// shell (control/shell.h): an interactive shell inside the environment on a pty,
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

#include "common/unique_fd.h"
#include "mounts/disk_limit.h"
#include "control/open_repo.h"
#include "run/jobs.h"
#include "run/pipeline.h"
#include "serve/serving.h"
#include "serve/shell.h"
#include "workspace/workspace.h"
#include "runner/runner.h"

namespace agentenv::serve {
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

Result<ShellResult> RunShell(const std::string& root, const ShellOptions& opt) {
  AE_ASSIGN(auto repo, control::OpenRepo(root));
  control::Server server(std::move(repo));
  snap::Repo& r = server.repo();
  runner::EnvSpec spec;
  spec.root = r.work_dir();
  spec.cwd = opt.cwd;
  AE_ASSIGN(spec.network, run::ParseNetwork(opt.network));
  spec.terminal = true;

  // Like supervise: this process captures, so it holds the lock. A
  // workspace needs no capture (its upper is the journal) and no lock but
  // its own.
  std::optional<workspace::WorkspaceInUse> in_ws;
  if (!opt.workspace.empty()) {
    AE_ASSIGN(in_ws, workspace::UseWorkspace(r, opt.workspace, "shell"));
    in_ws->Apply(&spec);
    // A disk limit keeps the changes on a tmpfs until they are carried
    // back; an interactive shell's would not survive a kill of it.
    AE_ASSIGN(uint64_t disk, mounts::DiskBytesFor(r.root(), 0, in_ws->ws.disk_bytes));
    if (disk)
      return Fail(ErrorCode::kUnsupported, "shell --workspace " + opt.workspace + ": a disk limit of " +
                                               std::to_string(disk) + " bytes applies to it, which shell does not "
                                               "enforce; run commands with agentenv exec --workspace instead");
  }
  spec.tied_to_caller = true;
  const workspace::Workspace* ws = in_ws ? &in_ws->ws : nullptr;
  // bash if the tree has it (a workspace's: its upper over its lower).
  std::vector<std::string> cmd = opt.argv;
  if (cmd.empty()) {
    auto has_bash = [](const std::string& tree) { return ::access((tree + "/bin/bash").c_str(), X_OK) == 0; };
    bool bash = ws ? has_bash(ws->upper()) || has_bash(ws->lower) : has_bash(r.work_dir());
    cmd = {bash ? "/bin/bash" : "/bin/sh", "-i"};
  }
  spec.argv = cmd;
  std::unique_ptr<Serving> serving;
  if (ws) {
    AE_ASSIGN(serving, Serving::Signals(server, {SIGWINCH, SIGINT, SIGTERM, SIGHUP}));
  } else {
    ServeOptions so;
    so.signals = {SIGWINCH, SIGINT, SIGTERM, SIGHUP};
    so.capture = opt.capture;
    AE_ASSIGN(serving, Serving::Start(server, std::move(so)));
  }
  AE_ASSIGN(Pty pty, OpenPty());
  if (::isatty(0)) {
    termios t;
    if (::tcgetattr(0, &t) == 0) ::tcsetattr(pty.slave.get(), TCSANOW, &t);  // the caller's line settings
    CopyWinsize(0, pty.master.get());
  }
  int s = pty.slave.get();
  auto env = runner::Env::Start(spec, {s, s, s});
  pty.slave.reset();  // EOF/EIO on the master once the env's processes are gone
  if (!env) return Unexpected<Error>(env.error());
  std::optional<runner::ExitStatus> st;
  {
    RawMode raw(0);
    Relay(*env, pty.master.get(), serving->signal_fd());
    auto w = env->Wait();
    if (w) st = *w;
  }

  std::string line;
  for (const auto& a : cmd) line += (line.empty() ? "" : " ") + a;
  snap::SnapOptions snap_opt;
  snap::CommandOutcome how;
  if (st && st->signal) how.signal = uint32_t(st->signal);
  else if (st) how.exit_code = st->exit_code;
  snap_opt.provenance = run::CommandProvenance(snap::ProvenanceKind::kShell, "", cmd, "", how,
                                               {snap::Origin::kCli, "", ""});
  if (ws) {
    snap_opt.provenance->workspace = ws->name;
    snap_opt.provenance->base = ws->base;
  }
  Result<std::optional<store::ObjectId>> made = [&]() -> Result<std::optional<store::ObjectId>> {
    if (ws) {
      in_ws->lock.reset();  // the snapshot takes it again
      AE_ASSIGN(snap::SnapResult s, run::RecordWorkspace(r, in_ws->ws, snap_opt));  // its lock still held
      return s.node;
    }
    auto writer = server.LockWriters();  // the whole session's tail goes into this node
    AE_ASSIGN(snap::SnapResult s, r.Snapshot(snap_opt));
    return s.node;
  }();
  serving->Stop(false);  // the snapshot above saw everything
  if (!made) return Unexpected<Error>(made.error());
  ShellResult res;
  res.exit_code = !st ? 1 : st->signal ? 128 + st->signal : st->exit_code;
  if (*made) {
    res.node = (*made)->Hex();
    AE_ASSIGN(snap::NodeRecord rec, r.Record(**made));
    res.label = rec.title;
  }
  return res;
}

}  // namespace agentenv::serve
