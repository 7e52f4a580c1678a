// runner::Run: real namespaces over a busybox root tree, as root and as an
// unprivileged user (uid 65534).
#include <sys/resource.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cstring>
#include <thread>

#include "tests/runner_testutil.h"
#include "tests/testutil.h"

namespace fs = std::filesystem;
using namespace agentenv;
using namespace agentenv::runner;
using namespace agentenv::runner::test;
using agentenv::test::TempDir;

TEST_CASE("runner: as nobody, uid 0 inside, writes land in the tree, host files stay read-only") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  // A root-owned host file, bound writable: the mapping still gives no access.
  fs::path host_file = td / "hostfile";
  std::ofstream(host_file) << "host\n";
  chmod(host_file.c_str(), 0644);
  int st = AsNobody([&] {
    EnvSpec s = Spec(root, "id -u; echo hi > /usr/x; echo conf > /etc/y.conf; hostname; echo $$; "
                           "{ echo no > /proc/sys/kernel/hostname; } 2>/dev/null || echo ro; "
                           "{ echo pwned > /etc/hostfile; } 2>/dev/null || echo denied; "
                           "stat -c %u /etc/hostfile; cat /etc/hostfile");
    std::ofstream(root / "etc/hostfile");  // the bind's mount point
    s.binds.push_back({host_file, "/etc/hostfile"});
    auto r = Run(s);
    if (!r) { fprintf(stderr, "%s\n", r.error().message.c_str()); return false; }
    // 65534 inside is the overflow id: host root is not mapped.
    if (r->exit_code == 0 && r->out == "0\nagentenv\n2\nro\ndenied\n65534\nhost\n") return true;
    fprintf(stderr, "out=[%s] err=[%s]\n", r->out.c_str(), r->err.c_str());
    return false;
  });
  CHECK(st == 0);
  std::ifstream f(root / "usr/x"), g(root / "etc/y.conf"), h(host_file);
  std::string a, b, c;
  std::getline(f, a);
  std::getline(g, b);
  std::getline(h, c);
  CHECK(a == "hi");
  CHECK(b == "conf");
  CHECK(c == "host");
  struct stat sb;
  REQUIRE(stat((root / "usr/x").c_str(), &sb) == 0);
  CHECK(sb.st_uid == 65534);  // uid 0 inside is the caller outside
}

TEST_CASE("runner: a dpkg-deb package unpacks into the tree") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  fs::path pkg = td / "pkg";
  fs::create_directories(pkg / "DEBIAN");
  fs::create_directories(pkg / "usr/share/tiny");
  std::ofstream(pkg / "DEBIAN/control") << "Package: tiny\nVersion: 1.0\nArchitecture: all\n"
                                          "Maintainer: t <t@example.org>\nDescription: tiny\n";
  std::ofstream(pkg / "usr/share/tiny/hello") << "hello\n";
  REQUIRE(system(("dpkg-deb -Zgzip --build --root-owner-group " + pkg.string() + " " +
                  (root / "tiny.deb").string() + " >/dev/null && chown 65534:65534 " +
                  (root / "tiny.deb").string()).c_str()) == 0);
  int st = AsNobody([&] {
    auto r = Run(Spec(root, "busybox dpkg-deb -x /tiny.deb / && cat /usr/share/tiny/hello"));
    if (!r) { fprintf(stderr, "%s\n", r.error().message.c_str()); return false; }
    if (r->exit_code == 0 && r->out == "hello\n") return true;
    fprintf(stderr, "err=[%s]\n", r->err.c_str());
    return false;
  });
  CHECK(st == 0);
  CHECK(fs::exists(root / "usr/share/tiny/hello"));
}

TEST_CASE("runner: a real Debian package (xz-compressed data) unpacks into the tree") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  // The smallest package in the apt cache, if there is one.
  fs::path real;
  std::error_code ec;
  for (auto& e : fs::directory_iterator("/var/cache/apt/archives", ec))
    if (e.path().extension() == ".deb" && (real.empty() || e.file_size() < fs::file_size(real))) real = e.path();
  if (real.empty()) agentenv::test::Skip("no .deb in /var/cache/apt/archives");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  fs::copy_file(real, root / "real.deb");  // not in /tmp: each env has its own tmpfs there
  REQUIRE(lchown((root / "real.deb").c_str(), 65534, 65534) == 0);
  std::vector<std::string> paths;  // what the host's dpkg-deb says the package holds
  FILE* list = popen(("dpkg-deb --fsys-tarfile '" + real.string() + "' | tar -t").c_str(), "r");
  REQUIRE(list);
  for (char line[4096]; fgets(line, sizeof line, list);) paths.push_back(std::string(line, strcspn(line, "\n")));
  pclose(list);
  REQUIRE_FALSE(paths.empty());
  int st = AsNobody([&] {
    auto r = Run(Spec(root, "busybox dpkg-deb -x /real.deb /"));
    return r && r->exit_code == 0;
  });
  CHECK(st == 0);
  for (const auto& p : paths) {
    INFO(real << ": " << p);
    CHECK(fs::exists(fs::symlink_status(root / p)));
  }
}

TEST_CASE("runner: timeout kills the whole tree within 100 ms of the deadline") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  // A double-forked daemon in its own session, a nested shell, a busy loop.
  EnvSpec s = Spec(root, "(setsid sleep 981 &) ; sh -c 'sleep 981 & sleep 981' & "
                         "while :; do :; done");
  s.limits.timeout = std::chrono::milliseconds(300);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = Run(s);
  const auto late = std::chrono::steady_clock::now() - t0 - s.limits.timeout;
  REQUIRE(r);
  CHECK(r->timed_out);
  CHECK(r->signal == SIGKILL);
  UNSCOPED_INFO("returned " << std::chrono::duration_cast<std::chrono::microseconds>(late).count()
                            << " us after the deadline");
  CHECK(late <= std::chrono::milliseconds(100));
  // Run returns after the pid namespace is gone: nothing is left, right away.
  CHECK(CountProcesses({"sleep", "981"}) == 0);
}

TEST_CASE("runner: output cap truncates and reports") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  EnvSpec s = Spec(root, "i=0; while [ $i -lt 2000 ]; do echo 0123456789; i=$((i+1)); done; echo e >&2");
  s.limits.output_cap = 1000;
  auto r = Run(s);
  REQUIRE(r);
  CHECK(r->out.size() == 1000);
  CHECK(r->out_truncated);
  CHECK(r->err == "e\n");
  CHECK_FALSE(r->err_truncated);
  CHECK(r->exit_code == 0);
}

TEST_CASE("runner: a nice limit lowers the whole env's CPU priority, its command's included") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  // Field 19 of /proc/self/stat is the nice value (after the command name
  // in parentheses, which holds no space here).
  EnvSpec s = Spec(root, "read -r a b c d e f g h i j k l m n o p q r nice rest < /proc/self/stat; echo $nice");
  s.limits.nice = 7;
  const int before = getpriority(PRIO_PROCESS, 0);
  auto r = Run(s);
  REQUIRE(r);
  INFO(r->err);
  CHECK(r->out == std::to_string(before + 7) + "\n");
  CHECK(getpriority(PRIO_PROCESS, 0) == before);  // the caller's own is untouched
  s.limits.nice = 0;
  r = Run(s);
  REQUIRE(r);
  CHECK(r->out == std::to_string(before) + "\n");
}

// A TCP server on host 127.0.0.1; returns its port.
static int Listen(int* fd) {
  *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(*fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  getsockname(*fd, reinterpret_cast<sockaddr*>(&a), &len);
  listen(*fd, 4);
  return ntohs(a.sin_port);
}

TEST_CASE("runner: network deny blocks host loopback, inner loopback works") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  int srv;
  std::string port = std::to_string(Listen(&srv));
  std::string script = "echo x | nc -w 1 127.0.0.1 " + port + " && echo host-reached; "
                       // Retry until the listener is up (a loaded host may be slow to
                       // start it), then wait for what it received. The listener's
                       // stdin stays open: busybox nc quits at EOF on stdin, and a
                       // background job's stdin is /dev/null, so it could quit before
                       // reading what the client sent.
                       "sleep 30 | nc -l -p 7777 > /tmp/got & "
                       "i=0; while [ $i -lt 100 ]; do echo inner | nc -w 1 127.0.0.1 7777 2>/dev/null && break; i=$((i+1)); sleep 0.1; done; "
                       "i=0; while [ ! -s /tmp/got ] && [ $i -lt 100 ]; do i=$((i+1)); sleep 0.1; done; cat /tmp/got";
  EnvSpec s = Spec(root, script);
  s.network = Network::kDeny;
  s.limits.timeout = std::chrono::seconds(20);  // a wrongly reached server would hold nc open
  auto r = Run(s);
  REQUIRE(r);
  CHECK(r->out == "inner\n");
  pollfd pf{srv, POLLIN, 0};
  CHECK(poll(&pf, 1, 0) == 0);  // no connection is waiting at the host server
  // Control: with the host network the same server is reached (it closes at once).
  std::thread server([&] { int c = accept(srv, nullptr, nullptr); if (c >= 0) close(c); });
  s.network = Network::kAllow;
  s.argv = {"/bin/sh", "-c", "echo x | nc -w 1 127.0.0.1 " + port + " && echo host-reached"};
  r = Run(s);
  server.join();
  close(srv);
  REQUIRE(r);
  CHECK(r->out == "host-reached\n");
}

TEST_CASE("runner: a single socket file binds at the documented path") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string path = (td / "ctl.sock").string();
  std::strcpy(a.sun_path, path.c_str());
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  EnvSpec s = Spec(root, std::string("test -S ") + kSocketPath + " && echo socket");
  s.binds.push_back({path, kSocketPath});
  auto r = Run(s);
  close(fd);
  REQUIRE(r);
  CHECK(r->out == "socket\n");
  CHECK(fs::is_empty(root / "run"));  // the mount point lives on the env's /run tmpfs
}

TEST_CASE("runner: setup failures name the step and errno") {
  TempDir td;
  fs::path root = td / "root";
  MakeTree(root, 0);
  EnvSpec s = Spec(root, "true");
  s.binds.push_back({"/nonexistent-source", "/etc/hosts"});
  auto r = Run(s);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "bind /etc/hosts: No such file or directory");
  s.binds = {{"/etc/hostname", "/etc/missing"}};
  r = Run(s);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "bind /etc/missing: No such file or directory");
  s.binds.clear();
  s.argv = {"/bin/missing"};
  r = Run(s);
  REQUIRE_FALSE(r);
  CHECK(r.error().message == "exec /bin/missing: No such file or directory");
  s.argv = {};
  CHECK(Run(s).error().code == ErrorCode::kInvalid);
}

TEST_CASE("runner: each env gets its own tmpfs on /tmp, and rootless apt is told to run as the env's root") {
  if (!agentenv::test::IsRoot()) agentenv::test::Skip("needs root to switch to uid 65534");
  TempDir td;
  chmod(td.path().c_str(), 0711);
  fs::path root = td / "root";
  MakeTree(root, 65534);
  for (const char* d : {"tmp", "run"}) {
    fs::create_directories(root / d);
    REQUIRE(lchown((root / d).c_str(), 65534, 65534) == 0);
  }
  int st = AsNobody([&] {
    auto r = Run(Spec(root, "echo x > /tmp/f && stat -c %a /tmp && grep -c ' /tmp tmpfs ' /proc/mounts; "
                            "echo $APT_CONFIG; cat $APT_CONFIG"));
    if (!r) { fprintf(stderr, "%s\n", r.error().message.c_str()); return false; }
    if (r->out == "1777\n1\n/run/agentenv/apt.conf\nAPT::Sandbox::User \"root\";\n") return true;
    fprintf(stderr, "out=[%s] err=[%s]\n", r->out.c_str(), r->err.c_str());
    return false;
  });
  CHECK(st == 0);
  CHECK(fs::is_empty(root / "tmp"));  // the env's /tmp was its own
  CHECK(fs::is_empty(root / "run"));
  // As root every id is mapped: apt keeps its own sandbox user.
  auto r = Run(Spec(root, "echo [$APT_CONFIG]"));
  REQUIRE(r);
  CHECK(r->out == "[]\n");
}
