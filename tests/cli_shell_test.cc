// `agentenv shell` driven through a pty of the test's own: the test is the
// terminal (it types, it resizes), agentenv the program on it.
#include <catch2/catch.hpp>

#include <pty.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "tests/cli_exec_testutil.h"

namespace agentenv::test {
namespace {

// agentenv shell (as 65534) on the slave side of a pty, with the slave as
// its controlling terminal, like a login on a terminal.
class Terminal {
 public:
  Terminal(const fs::path& root, unsigned short rows, unsigned short cols) {
    winsize ws{rows, cols, 0, 0};
    int m = -1, s = -1;
    REQUIRE(::openpty(&m, &s, nullptr, nullptr, &ws) == 0);
    master_.reset(m);
    ::fcntl(m, F_SETFD, FD_CLOEXEC);
    REQUIRE(::tcgetattr(m, &initial_) == 0);
    std::vector<std::string> argv = AsNobody({AGENTENV_BIN, "shell", "--root", root.string(), "--quiet-ms", "100"});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::setsid();
      ::ioctl(s, TIOCSCTTY, 0);
      ::dup2(s, 0), ::dup2(s, 1), ::dup2(s, 2);
      if (s > 2) ::close(s);
      ::setenv("TERM", "dumb", 1);
      ::execv(args[0], args.data());
      _exit(127);
    }
    ::close(s);
  }
  ~Terminal() {
    if (pid_ > 0) ::kill(pid_, SIGKILL), ::waitpid(pid_, nullptr, 0);
  }
  void Type(const std::string& s) { REQUIRE(::write(master_.get(), s.data(), s.size()) == ssize_t(s.size())); }
  // Reads the screen until `want` shows up (true) or the time is up.
  bool ReadUntil(const std::string& want, int timeout_ms) {
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (screen_.find(want) == std::string::npos) {
      int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (left <= 0) return false;
      pollfd p{master_.get(), POLLIN, 0};
      if (::poll(&p, 1, left) <= 0) continue;
      char buf[4096];
      ssize_t n = ::read(master_.get(), buf, sizeof buf);
      if (n <= 0) return false;  // EIO: the program closed the terminal
      screen_.append(buf, size_t(n));
    }
    return true;
  }
  void Resize(unsigned short rows, unsigned short cols) {
    winsize ws{rows, cols, 0, 0};
    REQUIRE(::ioctl(master_.get(), TIOCSWINSZ, &ws) == 0);  // the kernel sends SIGWINCH to agentenv
  }
  // Exit code of agentenv; -1 if it did not end in time.
  int Wait(int timeout_ms) {
    // Woken by output (the pty is kept drained, or agentenv would block
    // on it) or by agentenv's exit (its pidfd), never by a timer.
    UniqueFd exited(int(::syscall(SYS_pidfd_open, pid_, 0)));
    REQUIRE(exited);
    auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    int master = master_.get();  // -1 once the pty hangs up: poll then skips it
    while (Clock::now() < deadline) {
      pollfd p[2] = {{master, POLLIN, 0}, {exited.get(), POLLIN, 0}};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (::poll(p, 2, int(std::max<int64_t>(left, 0))) < 0 && errno != EINTR) break;
      char buf[4096];
      if (p[0].revents & POLLIN) {
        ssize_t n = ::read(master, buf, sizeof buf);
        if (n > 0) screen_.append(buf, size_t(n));
        else master = -1;
      } else if (p[0].revents) {
        master = -1;
      }
      if (p[1].revents & POLLIN) {
        for (pollfd q{master_.get(), POLLIN, 0}; ::poll(&q, 1, 0) > 0;) {  // what it wrote last
          ssize_t n = ::read(master_.get(), buf, sizeof buf);
          if (n <= 0) break;
          screen_.append(buf, size_t(n));
        }
        int st = 0;
        REQUIRE(::waitpid(pid_, &st, 0) == pid_);
        pid_ = -1;
        return ExitCode(st);
      }
    }
    return -1;
  }
  termios Mode() {
    termios t{};
    ::tcgetattr(master_.get(), &t);
    return t;
  }
  const termios& initial() const { return initial_; }
  const std::string& screen() const { return screen_; }
  int master() const { return master_.get(); }

 private:
  UniqueFd master_;
  pid_t pid_ = -1;
  termios initial_{};
  std::string screen_;
};

}  // namespace

TEST_CASE("cli shell: a pty shell inside the env, window size passed and resized, raw mode restored, snapshot on exit", "[cli][shell]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string before = HeadId(root);
  Terminal t(root, 33, 101);
  REQUIRE(t.ReadUntil("# ", 15000));  // the shell's prompt
  // The caller's terminal is raw while the shell runs (the inner pty echoes).
  CHECK((t.Mode().c_lflag & (ICANON | ECHO)) == 0);
  t.Type("stty size > /size; [ -t 0 ] && [ -t 1 ] && echo terminal > /tty\r");
  REQUIRE(t.ReadUntil("stty size > /size", 5000));
  REQUIRE(WaitFor([&] { return fs::exists(Work(root) / "tty"); }, 5000));
  // SIGWINCH to agentenv: the inner pty takes the new size.
  t.Resize(40, 120);
  t.Type("stty size > /resized\r");
  REQUIRE(WaitFor([&] { return ReadFile(Work(root) / "resized") == "40 120\n"; }, 5000));
  t.Type("echo hi > /f; exit 3\r");
  int code = t.Wait(15000);
  INFO(t.screen());
  CHECK(code == 3);
  CHECK(ReadFile(Work(root) / "size") == "33 101\n");
  CHECK(ReadFile(Work(root) / "tty") == "terminal\n");  // a terminal, not a pipe
  CHECK(ReadFile(Work(root) / "f") == "hi\n");
  // Raw mode undone.
  CHECK((t.Mode().c_lflag & (ICANON | ECHO)) == (t.initial().c_lflag & (ICANON | ECHO)));
  // Everything the shell did is in history, the last node labelled by the shell.
  std::string head = HeadId(root);
  CHECK(head != before);
  json diff = json::parse(Run(root, {"diff", before, head, "--json"}).out, nullptr, false);
  INFO(diff.dump());
  std::set<std::string> paths;
  for (const auto& c : diff["changes"]) paths.insert(c.value("path", ""));
  CHECK(paths == std::set<std::string>{"f", "resized", "size", "tty"});
  json st = json::parse(Run(root, {"status", "--json"}).out, nullptr, false);
  CHECK(st.value("dirty", true) == false);
}

}  // namespace agentenv::test
