// mount / umount end to end: a node shown as a read-only directory equals
// its export, refuses writes, keeps its lower from gc while mounted and
// leaves nothing mounted and nothing leased after umount or a kill -9.
// The persistent form as root; the `-- CMD` form as root and as uid 65534.
#include <catch2/catch.hpp>

#include <sys/mount.h>

#include "cli_exec_testutil.h"

namespace agentenv::test {
namespace {

bool MountedAt(const fs::path& dir) {
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string id, parent, devno, root, point;
    f >> id >> parent >> devno >> root >> point;
    if (point == dir.string()) return true;
  }
  return false;
}

// Unmounts `dir` at scope end if a failed test left it mounted.
struct Unmounted {
  fs::path dir;
  ~Unmounted() {
    while (MountedAt(dir)) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

// The node extracted from its export: what a view must equal.
fs::path Exported(const TempDir& tmp, const fs::path& root, const std::string& ref) {
  fs::path tar = tmp / "node.tar", x = tmp / "exported";
  CmdResult e = Run(root, {"export", ref, "-o", tar.string()});
  INFO(e.Describe());
  REQUIRE(e.code == 0);
  fs::create_directories(x);
  REQUIRE(RunCmd({"/usr/bin/tar", "-xpf", tar.string(), "-C", x.string()}).code == 0);
  return x;
}

// A busybox repository whose HEAD has a few files of its own.
fs::path Repo(const TempDir& tmp) {
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/app.conf", "v1\n");
  WriteOwned(Work(root) / "root/data", std::string(100000, 'x'));
  CmdResult s = Run(root, {"snap", "-m", "files"});
  REQUIRE(s.code == 0);
  return root;
}

size_t Lowers(const fs::path& root) {
  size_t n = 0;
  if (fs::exists(root / "lowers"))
    for (const auto& e : fs::directory_iterator(root / "lowers")) n += e.path().filename().string()[0] != '.';
  return n;
}

// gc as the user the views were made by (root, or 65534 through Run).
json Gc(const fs::path& root, bool as_root = false) {
  CmdResult r = as_root ? Agentenv(root, {"gc", "--json"}) : Run(root, {"gc", "--json"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return r.Json();
}

}  // namespace

TEST_CASE("mount: a node as a read-only directory until umount, its lower kept from gc while mounted", "[cli][mount]") {
  if (!IsRoot()) Skip("mounting in the host's namespace needs root");
  TempDir tmp;
  fs::path root = Repo(tmp);
  fs::path x = Exported(tmp, root, "HEAD");
  fs::path view = tmp / "view";
  fs::create_directories(view);
  Unmounted guard{view};
  // As root: the repository's owner is 65534, so root mounts with --root
  // and the binary runs as root here (Agentenv, not Run).
  CmdResult m = Agentenv(root, {"mount", "HEAD", view.string()});
  INFO(m.Describe());
  REQUIRE(m.code == 0);
  CHECK(MountedAt(view));
  CmdResult d = RunCmd({"/usr/bin/diff", "-r", "--no-dereference", x.string(), view.string()});
  INFO(d.Describe());
  CHECK(d.code == 0);
  int fd = ::open((view / "etc/new").c_str(), O_CREAT | O_WRONLY, 0644);
  CHECK(fd < 0);
  CHECK(errno == EROFS);
  if (fd >= 0) ::close(fd);
  CHECK(::unlink((view / "etc/app.conf").c_str()) != 0);
  CHECK(errno == EROFS);

  json ls = AgentenvJson(root, {"mount"});
  REQUIRE(ls["mounts"].size() == 1);
  CHECK(ls["mounts"][0]["dir"] == view.string());
  CHECK(ls["mounts"][0]["mounted"] == true);
  CHECK(ls["mounts"][0]["node"] == HeadId(root));

  // A second view at the same place is refused; gc keeps the lower.
  CHECK(Agentenv(root, {"mount", "HEAD", view.string()}).code == 6);
  json gc = AgentenvJson(root, {"gc"});
  CHECK(gc["lowers_removed"] == 0);
  CHECK(gc["mounts_reclaimed"] == 0);
  CHECK(Lowers(root) == 1);
  CHECK(RunCmd({"/usr/bin/diff", "-r", "--no-dereference", x.string(), view.string()}).code == 0);

  // umount: nothing mounted, no record, and the lower is gc's again.
  CmdResult u = Agentenv(root, {"umount", view.string()});
  INFO(u.Describe());
  REQUIRE(u.code == 0);
  CHECK_FALSE(MountedAt(view));
  CHECK(AgentenvJson(root, {"mount"})["mounts"].empty());
  CHECK(Agentenv(root, {"umount", view.string()}).code == 3);
  gc = AgentenvJson(root, {"gc"});
  CHECK(gc["lowers_removed"] == 1);
  CHECK(Lowers(root) == 0);

  // A view unmounted behind our back leaves a stale record: listed as
  // such, and gc removes it and then the lower it named.
  REQUIRE(Agentenv(root, {"mount", "HEAD~1", view.string()}).code == 0);
  REQUIRE(::umount2(view.c_str(), 0) == 0);
  ls = AgentenvJson(root, {"mount"});
  REQUIRE(ls["mounts"].size() == 1);
  CHECK(ls["mounts"][0]["mounted"] == false);
  gc = AgentenvJson(root, {"gc"});
  CHECK(gc["mounts_reclaimed"] == 1);
  CHECK(gc["lowers_removed"] == 1);
  CHECK(AgentenvJson(root, {"mount"})["mounts"].empty());
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

TEST_CASE("mount: unprivileged, the persistent form says what to do instead", "[cli][mount]") {
  if (IsRoot() && ::access("/usr/bin/setpriv", X_OK) != 0) Skip("needs setpriv to drop root");
  TempDir tmp;
  fs::path root = Repo(tmp);
  fs::path view = tmp / "view";
  fs::create_directories(view);
  if (IsRoot()) REQUIRE(::chown(view.c_str(), 65534, 65534) == 0);
  Unmounted guard{view};
  CmdResult m = Run(root, {"mount", "HEAD", view.string()});
  INFO(m.Describe());
  CHECK(m.code == 1);
  CHECK(m.err.find("needs root (CAP_SYS_ADMIN); use `agentenv mount REF DIR -- CMD`") != std::string::npos);
  CHECK_FALSE(MountedAt(view));
  CHECK(Run(root, {"mount", "--json"}).Json()["mounts"].empty());
}

TEST_CASE("mount -- CMD: the view for one command, rootless and as root, gone when it ends", "[cli][mount]") {
  for (bool as_root : {false, true}) {
    if (as_root && !IsRoot()) continue;
    DYNAMIC_SECTION((as_root ? "root" : "unprivileged")) {
      TempDir tmp;
      fs::path root = Repo(tmp);
      fs::path x = Exported(tmp, root, "HEAD");
      fs::path view = tmp / "view";
      fs::create_directories(view);
      if (IsRoot()) REQUIRE(::chown(view.c_str(), 65534, 65534) == 0);
      Unmounted guard{view};
      // Inside: the view equals the export, refuses writes, and a gc run
      // meanwhile keeps its lower (the command holds the lease).
      std::string script = "diff -r --no-dereference " + x.string() + " \"$AGENTENV_VIEW\" && echo same; " +
                           "touch \"$AGENTENV_VIEW/etc/new\" 2>&1; " + AGENTENV_BIN + " --root " + root.string() +
                           " gc --json; test -d " + (root / "lowers").string() + "/*/etc && echo kept";
      std::vector<std::string> args = {AGENTENV_BIN, "--root", root.string(), "mount", "HEAD", view.string(), "--",
                                       "/bin/sh", "-c", script};
      CmdResult r = RunCmd(as_root ? args : AsNobody(args));
      INFO(r.Describe());
      REQUIRE(r.code == 0);
      CHECK(r.out.find("same\n") != std::string::npos);
      CHECK(r.out.find("Read-only file system") != std::string::npos);
      CHECK(r.out.find("\"lowers_removed\":0") != std::string::npos);
      CHECK(r.out.find("kept\n") != std::string::npos);
      CHECK_FALSE(MountedAt(view));
      CHECK(fs::is_empty(view));
      // Nothing recorded, nothing leased: the lower is gc's.
      CHECK(Run(root, {"mount", "--json"}).Json()["mounts"].empty());
      CHECK(Gc(root, as_root)["lowers_removed"] == 1);

      // Without DIR: a directory of its own, named by $AGENTENV_VIEW, removed after.
      args = {AGENTENV_BIN, "--root", root.string(), "mount", "HEAD", "--", "/bin/sh", "-c",
              "cat \"$AGENTENV_VIEW/etc/app.conf\"; echo \"$AGENTENV_VIEW\""};
      r = RunCmd(as_root ? args : AsNobody(args));
      INFO(r.Describe());
      REQUIRE(r.code == 0);
      REQUIRE(r.out.rfind("v1\n", 0) == 0);
      std::string made = r.out.substr(3, r.out.size() - 4);
      CHECK_FALSE(made.empty());
      CHECK_FALSE(fs::exists(made));
      // The command's exit code is passed through; a missing one is 127.
      args = {AGENTENV_BIN, "--root", root.string(), "mount", "HEAD", "--", "/bin/sh", "-c", "exit 7"};
      CHECK(RunCmd(as_root ? args : AsNobody(args)).code == 7);
      args = {AGENTENV_BIN, "--root", root.string(), "mount", "HEAD", "--", "/no/such/cmd"};
      CHECK(RunCmd(as_root ? args : AsNobody(args)).code == 127);
    }
  }
}

TEST_CASE("mount -- CMD: kill -9 of mount or of CMD leaves nothing mounted and no lease", "[cli][mount]") {
  for (bool kill_mount : {true, false}) {
    DYNAMIC_SECTION((kill_mount ? "kill mount" : "kill CMD")) {
      TempDir tmp;
      fs::path root = Repo(tmp);
      fs::path view = tmp / "view", pidfile = tmp / "cmd.pid";
      fs::create_directories(view);
      if (IsRoot()) REQUIRE(::chown(view.c_str(), 65534, 65534) == 0);
      Unmounted guard{view};
      Child c;
      c.Start(AsNobody({AGENTENV_BIN, "--root", root.string(), "mount", "HEAD", view.string(), "--", "/bin/sh",
                        "-c", "echo $$ > " + pidfile.string() + ".tmp && mv " + pidfile.string() + ".tmp " +
                                  pidfile.string() + " && exec sleep 100"}),
              false, false);
      REQUIRE(WaitFor([&] { return fs::exists(pidfile) && fs::file_size(pidfile) > 0; }, 20000));
      const pid_t cmd = std::stoi(ReadFile(pidfile));
      if (kill_mount) {
        REQUIRE(c.Signal(SIGKILL));
      } else {
        REQUIRE(::kill(cmd, SIGKILL) == 0);
      }
      CHECK(c.Wait(20000) == 128 + SIGKILL);
      // The command dies with mount (and mount reports its death).
      CHECK(WaitFor([&] { return ::kill(cmd, 0) != 0; }, 20000));
      CHECK_FALSE(MountedAt(view));
      CHECK(fs::is_empty(view));
      CHECK(Gc(root)["lowers_removed"] == 1);
      CHECK(Lowers(root) == 0);
    }
  }
}

}  // namespace agentenv::test
