// runner::Env (the supervisor's handle) and cgroup limits, as root and as
// uid 65534.
#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <thread>

#include "tests/runner_testutil.h"
#include "tests/testutil.h"

namespace fs = std::filesystem;
using namespace agentenv;
using namespace agentenv::runner;
using namespace agentenv::runner::test;
using agentenv::test::TempDir;

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

int CountIn(const std::vector<ProcessInfo>& ps, const std::string& cmdline) {
  return int(std::count_if(ps.begin(), ps.end(), [&](const ProcessInfo& p) { return p.cmdline == cmdline; }));
}

// The supervisor's view of one env: start, spawn, list, kill everything.
// m: a marker number no other test uses (its sleeps are m, m+1, m+2).
// Returns "" on success, else what went wrong.
std::string EnvLifecycle(const fs::path& root, int m) {
  const std::string daemon = std::to_string(m), main = std::to_string(m + 1), spawned = std::to_string(m + 2);
  // A daemon that double-forks into its own session, then the main command.
  EnvSpec s = Spec(root, "(setsid sleep " + daemon + " &); echo ready > /dev/shm/ready; sleep " + main);
  auto env = Env::Start(s);
  if (!env) return "start: " + env.error().message;
  if (!agentenv::test::WaitFor([&] { auto ps = env->Processes(); return ps && CountIn(*ps, "sleep " + daemon) == 1; }, 5000))
    return "daemon never listed";
  auto ps = env->Processes();
  if (!ps) return ps.error().message;
  bool init_seen = false;
  for (const auto& p : *ps) init_seen |= p.ns_pid == 1 && p.pid == env->pid();
  if (!init_seen) return "init not listed as pid 1";

  // A spawned command shares the env's mounts, hostname and pid namespace.
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) return "pipe";
  auto proc = env->Spawn({{"/bin/sh", "-c", "cat /dev/shm/ready; hostname; echo $$ > /dev/shm/spawned; exit 7"}},
                         StdioFds{-1, pipefd[1], -1});
  close(pipefd[1]);
  if (!proc) return "spawn: " + proc.error().message;
  auto st = proc->Wait();
  char buf[256] = {};
  ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
  close(pipefd[0]);
  if (!st || st->exit_code != 7) return "spawned exit code";
  if (n <= 0 || std::string(buf) != "ready\nagentenv\n") return std::string("spawned output: ") + buf;
  auto bad = env->Spawn({{"/bin/nope"}});
  if (bad || bad.error().message != "exec /bin/nope: No such file or directory")
    return "spawn of a missing binary: " + (bad ? std::string("succeeded") : bad.error().message);

  // A spawned command that keeps running dies with the env.
  auto lingering = env->Spawn({{"sleep", spawned}});
  if (!lingering) return "spawn: " + lingering.error().message;
  if (!agentenv::test::WaitFor([&] { return CountProcesses({"sleep", spawned}) == 1; }, 5000)) return "spawned sleep not seen";
  if (ReadFile("/proc/" + std::to_string(lingering->pid()) + "/cgroup") !=
      ReadFile("/proc/" + std::to_string(env->pid()) + "/cgroup"))
    return "spawned command is not in the env's cgroups";
  if (env->TryWait().value().has_value()) return "env ended early";

  env->KillAll();
  for (const std::string& marker : {daemon, main, spawned})
    if (CountProcesses({"sleep", marker}) != 0) return "survivor: sleep " + marker;
  auto end = env->Wait();
  if (!end || end->signal != SIGKILL) return "env status after KillAll";
  auto lst = lingering->Wait();
  if (!lst || lst->signal != SIGKILL) return "spawned status after KillAll";
  if (!env->Processes().value().empty()) return "processes listed after KillAll";
  if (env->Spawn({{"true"}})) return "spawn into an ended env succeeded";
  return "";
}

}  // namespace

TEST_CASE("runner env: spawn, list and KillAll as root") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  CHECK(EnvLifecycle(root, 971) == "");
}

TEST_CASE("runner env: spawn, list and KillAll as nobody") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  CHECK(AsNobody([&] {
          std::string e = EnvLifecycle(root, 974);
          if (!e.empty()) fprintf(stderr, "nobody: %s\n", e.c_str());
          return e.empty();
        }) == 0);
}

TEST_CASE("runner env: the main command's status, signals forwarded, Process::Kill") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  auto env = Env::Start(Spec(root, "trap 'exit 42' TERM; sleep 985 & wait"));
  REQUIRE(env);
  auto p = env->Spawn({{"sleep", "986"}});
  REQUIRE(p);
  CHECK(p->pid() > 0);
  p->Kill();
  auto ps = p->Wait();
  REQUIRE(ps);
  CHECK(ps->signal == SIGKILL);
  CHECK(agentenv::test::WaitFor([&] { return CountProcesses({"sleep", "986"}) == 0; }, 5000));
  // SIGTERM to the env reaches the main command (init forwards it).
  REQUIRE(agentenv::test::WaitFor([&] { return CountProcesses({"sleep", "985"}) == 1; }, 5000));
  kill(env->pid(), SIGTERM);
  auto st = env->Wait();
  REQUIRE(st);
  CHECK(st->exit_code == 42);
  CHECK(CountProcesses({"sleep", "985"}) == 0);
}

TEST_CASE("runner limits: memory limit OOM-kills, or says why it cannot") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  // Doubling a string reaches 256 MiB in 28 steps.
  EnvSpec s = Spec(root, "awk 'BEGIN { s = \"x\"; while (length(s) < 268435456) s = s s; print \"survived\" }'");
  s.limits.memory_bytes = 32 << 20;
  auto r = Run(s);
  if (!r) {
    // Not enforceable here: the error must say which limit and why.
    CHECK(r.error().code == ErrorCode::kUnsupported);
    CHECK(r.error().message.rfind("memory limit: ", 0) == 0);
    WARN("memory limit unsupported here: " << r.error().message);
    return;
  }
  CHECK(r->out == "");
  CHECK(r->oom_killed);
  CHECK((r->signal == SIGKILL || r->exit_code == 137));
}

TEST_CASE("runner limits: pids limit stops forks, spawned commands share the cgroups, cpu quota set") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  // Where a memory limit cannot be set, the test above checks how that is
  // reported; the limits here need the same cgroup access.
  EnvSpec s = Spec(root, "true");
  s.limits.memory_bytes = 32 << 20;
  auto r = Run(s);
  if (!r && r.error().code == ErrorCode::kUnsupported)
    agentenv::test::Skip("memory limit unsupported here: " + r.error().message);
  REQUIRE(r);

  // init + sh + 2 sleeps reach the limit; the third fork fails and ash gives up.
  s = Spec(root, "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & echo $i; done");
  s.limits.pids = 4;
  s.limits.timeout = std::chrono::seconds(3);
  r = Run(s);
  REQUIRE(r);
  UNSCOPED_INFO("out=[" << r->out << "] err=[" << r->err << "]");
  CHECK(r->out == "1\n2\n");
  CHECK(r->err.find("can't fork") != std::string::npos);
  CHECK(!r->timed_out);

  // A command spawned into a limited env lands in the same (v1) cgroups.
  s = Spec(root, "sleep 988");
  s.limits.pids = 16;
  auto env = Env::Start(s);
  REQUIRE(env);
  auto p = env->Spawn({{"sleep", "989"}});
  REQUIRE(p);
  std::string cg = ReadFile("/proc/" + std::to_string(p->pid()) + "/cgroup");
  CHECK(cg.find(":pids:/agentenv-") != std::string::npos);
  CHECK(cg == ReadFile("/proc/" + std::to_string(env->pid()) + "/cgroup"));
  env->KillAll();
  CHECK(p->Wait().value().signal == SIGKILL);

  s = Spec(root, "cat /proc/self/cgroup");
  s.limits.cpus = 0.25;
  r = Run(s);
  REQUIRE(r);
  std::string line;
  for (std::istringstream in(r->out); std::getline(in, line);) {
    auto path = line.substr(line.rfind(':') + 1);
    if (line.find(":cpu") == std::string::npos || path.find("agentenv-") == std::string::npos) continue;
    // The env's cgroup is gone now; its path names which hierarchy held the quota.
    CHECK(path.find("agentenv-") != std::string::npos);
    CHECK_FALSE(fs::exists("/sys/fs/cgroup/cpu" + path));  // removed on teardown
    return;
  }
  FAIL("no cpu cgroup in " << r->out);
}

TEST_CASE("runner limits: cpu quota holds the env to its share") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  auto spin = [&](double cpus) -> double {  // CPU seconds per wall second of a busy loop
    EnvSpec s = Spec(root, "while :; do :; done");
    s.limits.cpus = cpus;
    auto env = Env::Start(s);
    if (!env) agentenv::test::Skip("cpu limit unsupported here: " + env.error().message);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto ticks = [&] {
      long total = 0;
      auto ps = env->Processes();
      for (const auto& p : ps.value()) {
        std::ifstream st("/proc/" + std::to_string(p.pid) + "/stat");
        std::string s((std::istreambuf_iterator<char>(st)), {});
        std::istringstream rest(s.substr(s.rfind(')') + 2));
        std::string f;
        for (int i = 0; i < 11; ++i) rest >> f;  // fields 3..13
        long utime, stime;
        rest >> utime >> stime;
        total += utime + stime;
      }
      return total;
    };
    long t0 = ticks();
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    long t1 = ticks();
    env->KillAll();
    return double(t1 - t0) / double(sysconf(_SC_CLK_TCK));
  };
  double used = spin(0.2);
  UNSCOPED_INFO("used " << used << " CPU seconds in 1 s at cpus=0.2");
  CHECK(used < 0.35);
  CHECK(used > 0.05);
}

TEST_CASE("runner limits: unprivileged limits fail with kUnsupported, never a silent no-op") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  CHECK(AsNobody([&] {
          EnvSpec s = Spec(root, "true");
          s.limits.memory_bytes = 64 << 20;
          auto r = Run(s);
          if (r) return access("/sys/fs/cgroup/memory", W_OK) == 0;  // delegated: fine
          return r.error().code == ErrorCode::kUnsupported && r.error().message.rfind("memory limit: ", 0) == 0 &&
                 r.error().message.find("not delegated") != std::string::npos;
        }) == 0);
  // Without limits the same user runs fine: no cgroup is needed.
  CHECK(AsNobody([&] { auto r = Run(Spec(root, "true")); return r && r->exit_code == 0; }) == 0);
}

TEST_CASE("runner env: held descriptors live as long as the env and a tied env dies with the thread that started it") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, getuid());
  // A lock the env holds: free again only once the env is gone.
  fs::path lockfile = td / "lock";
  int lock = ::open(lockfile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX) == 0);
  auto locked = [&] {
    int other = ::open(lockfile.c_str(), O_RDWR | O_CLOEXEC);
    bool held = ::flock(other, LOCK_EX | LOCK_NB) != 0;
    ::close(other);
    return held;
  };
  std::optional<Env> env;
  std::thread starter([&] {
    EnvSpec s = Spec(root, "sleep 30");
    s.held_fds = {lock};
    s.tied_to_caller = false;
    auto e = Env::Start(s);
    REQUIRE(e);
    env.emplace(std::move(*e));
  });
  starter.join();
  ::close(lock);  // ours is gone: only the env's init holds it now
  CHECK(locked());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Not tied: the starting thread ended, the env runs on.
  auto st = env->TryWait();
  REQUIRE(st);
  CHECK_FALSE(st->has_value());
  env->KillAll();
  CHECK(agentenv::test::WaitFor([&] { return !locked(); }, 5000));

  // Tied: the env ends with the thread that started it.
  std::optional<Env> tied;
  std::thread t([&] {
    EnvSpec s = Spec(root, "sleep 30");
    s.tied_to_caller = true;
    auto e = Env::Start(s);
    REQUIRE(e);
    tied.emplace(std::move(*e));
  });
  t.join();
  CHECK(agentenv::test::WaitFor([&] {
    auto w = tied->TryWait();
    return w && w->has_value();
  }, 5000));
}

// A process's other descriptors (another thread's lock on a workspace or a
// lower) must not live on in what the runner clones: a spawned command's
// helper lives as long as the command, and a lock copied into it made that
// workspace "busy" for everyone else.
TEST_CASE("runner env: a spawned command's helper holds none of its parent's other descriptors") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  auto env = Env::Start(Spec(root, "sleep 987"));
  REQUIRE(env);
  const std::string lock_path = (td / "lock").string();
  int held = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX) == 0);  // taken before the spawn: the clone copies it
  auto p = env->Spawn({{"sleep", "988"}});
  REQUIRE(p);
  REQUIRE(agentenv::test::WaitFor([&] { return CountProcesses({"sleep", "988"}) == 1; }, 5000));
  ::close(held);  // our copy goes: the lock is free unless the helper kept one
  int other = ::open(lock_path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  CHECK(::flock(other, LOCK_EX | LOCK_NB) == 0);
  ::close(other);
  p->Kill();
  CHECK(p->Wait());
  kill(env->pid(), SIGKILL);
  CHECK(env->Wait());
}

namespace {

// Whether any private writable mapping of process `pid` (its heap, stack,
// data) holds `needle`, read through /proc/<pid>/mem as a debugger would,
// a chunk at a time. Mappings past 1 GiB are a sanitizer's shadow memory,
// reserved, not data: skipped.
bool MemoryHolds(pid_t pid, const std::string& needle) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  int mem = ::open(("/proc/" + std::to_string(pid) + "/mem").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(mem >= 0);
  constexpr size_t kChunk = 1 << 20;
  std::string buf(kChunk + needle.size(), '\0');
  bool found = false;
  for (std::string line; !found && std::getline(maps, line);) {
    unsigned long from, to;
    char perms[5] = {};
    if (sscanf(line.c_str(), "%lx-%lx %4s", &from, &to, perms) != 3 || perms[0] != 'r' || perms[1] != 'w') continue;
    if (to - from > (1ul << 30)) continue;
    size_t kept = 0;  // the last chunk's tail: a needle may straddle two chunks
    for (unsigned long at = from; !found && at < to; at += kChunk) {
      ssize_t n = pread(mem, buf.data() + kept, std::min<unsigned long>(kChunk, to - at), off_t(at));
      if (n <= 0) break;
      std::string_view seen(buf.data(), kept + size_t(n));
      found = seen.find(needle) != std::string_view::npos;
      kept = std::min(seen.size(), needle.size() - 1);
      std::memmove(buf.data(), seen.data() + seen.size() - kept, kept);
    }
  }
  ::close(mem);
  return found;
}

// The parent of `pid` as the host sees it.
pid_t ParentOf(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  return pid_t(std::stol(stat.substr(stat.rfind(')') + 4)));
}

}  // namespace

// An env's init is pid 1 of a namespace where the agent is root: whatever
// init's memory holds, the agent can read (/proc/1/mem). It once was a
// clone of its caller that never exec'd (a copy of serve's heap: other
// environments' requests, tokens in flight), and so was a spawned
// command's helper.
TEST_CASE("runner env: an env's init and a spawned command's helper hold none of their caller's memory") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  const std::string secret = "caller-secret-" + agentenv::test::RandomString(24, uint64_t(getpid()));  // on the heap
  char self[4096] = {};
  REQUIRE(readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  auto env = Env::Start(Spec(root, "sleep 977"));
  REQUIRE(env);
  auto p = env->Spawn({{"sleep", "978"}});
  REQUIRE(p);
  REQUIRE(agentenv::test::WaitFor([&] { return CountProcesses({"sleep", "978"}) == 1; }, 5000));
  const pid_t helper = ParentOf(p->pid());
  REQUIRE(helper != getpid());
  for (pid_t pid : {env->pid(), helper}) {
    INFO("pid " << pid << (pid == helper ? " (the helper)" : " (init)"));
    CHECK(ReadFile("/proc/" + std::to_string(pid) + "/maps").find(self) == std::string::npos);
    CHECK_FALSE(MemoryHolds(pid, secret));
  }
  CHECK(MemoryHolds(getpid(), secret));  // the probe finds it where it is
  // From inside: pid 1 is the init program, and reads as such.
  auto r = Run(Spec(root, "cat /proc/1/comm"));
  REQUIRE(r);
  CHECK(r->out == "agentenv-init\n");
  p->Kill();
  CHECK(p->Wait());
  env->KillAll();
}
