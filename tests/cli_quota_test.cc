// Disk limits end to end (--disk, config disk): a write past the limit
// fails with ENOSPC inside the env, the live tree or workspace gets at
// most the limit, the repository passes fsck and the nodes after it are
// exact. As uid 65534 (rootless: the tmpfs is mounted in the env's user
// namespace) and as root.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "cli_exec_testutil.h"

namespace agentenv::test {

TEST_CASE("disk limit: exec --disk on the live tree fails writes past it with ENOSPC, keeps the rest exactly", "[cli][quota]") {
  for (As as : Users()) {
    DYNAMIC_SECTION(ModeName(as)) {
      TempDir tmp;
      fs::path root = BusyboxRepo(tmp);
      CmdResult r = RunAs(as, root, {"exec", "--disk", "8M", "--", "/bin/sh", "-c",
                                     "echo kept > /etc/kept; busybox dd if=/dev/zero of=/root/big bs=1M count=32"});
      INFO(r.Describe());
      CHECK(r.code != 0);  // dd's own exit status
      CHECK(r.err.find("No space left on device") != std::string::npos);
      // The host got at most the limit; what was written before is kept.
      struct stat st;
      REQUIRE(::stat((Work(root) / "root/big").c_str(), &st) == 0);
      CHECK(st.st_size <= 8 << 20);
      CHECK(ReadFile(Work(root) / "etc/kept") == "kept\n");
      // The node after it is the tree: status is clean, fsck passes.
      json status = RunAs(as, root, {"status", "--json"}).Json();
      CHECK(status["dirty"] == false);
      CHECK(RunAs(as, root, {"fsck"}).code == 0);
      CmdResult cat = RunAs(as, root, {"cat", "HEAD", "etc/kept"});
      CHECK(cat.out == "kept\n");

      // Deletions and replacements come through the upper's whiteouts.
      r = RunAs(as, root, {"exec", "--disk", "8M", "--", "/bin/sh", "-c",
                           "busybox rm -f /etc/kept /root/big && mkdir /etc/d && echo x > /etc/d/f"});
      INFO(r.Describe());
      REQUIRE(r.code == 0);
      CHECK_FALSE(fs::exists(Work(root) / "etc/kept"));
      CHECK_FALSE(fs::exists(Work(root) / "root/big"));
      CHECK(ReadFile(Work(root) / "etc/d/f") == "x\n");
      CHECK(RunAs(as, root, {"status", "--json"}).Json()["dirty"] == false);
      // The next snapshot is an ordinary one.
      WriteOwned(Work(root) / "etc/after", "1\n");
      CmdResult s = RunAs(as, root, {"snap", "--json", "-m", "after"});
      INFO(s.Describe());
      REQUIRE(s.code == 0);
      CHECK(s.Json()["added"] == 1);
      CHECK(RunAs(as, root, {"fsck"}).code == 0);
    }
  }
}

TEST_CASE("disk limit: a workspace's commands are held to fork --disk, its nodes stay exact", "[cli][quota][workspace]") {
  for (As as : Users()) {
    DYNAMIC_SECTION(ModeName(as)) {
      TempDir tmp;
      fs::path root = BusyboxRepo(tmp);
      CmdResult f = RunAs(as, root, {"fork", "--name", "w", "--disk", "8M"});
      INFO(f.Describe());
      REQUIRE(f.code == 0);
      CmdResult r = RunAs(as, root, {"exec", "--workspace", "w", "--", "/bin/sh", "-c",
                                     "echo a > /etc/a; busybox dd if=/dev/zero of=/root/big bs=1M count=32"});
      INFO(r.Describe());
      CHECK(r.code != 0);
      CHECK(r.err.find("No space left on device") != std::string::npos);
      struct stat st;
      REQUIRE(::stat((root / "workspaces/w/upper/root/big").c_str(), &st) == 0);
      CHECK(st.st_size <= 8 << 20);
      // The limit is per command: the next one starts from what is kept.
      r = RunAs(as, root, {"exec", "--workspace", "w", "--", "/bin/sh", "-c",
                           "cat /etc/a && busybox rm /root/big /bin/true && echo b > /etc/a"});
      INFO(r.Describe());
      REQUIRE(r.code == 0);
      CHECK(r.out == "a\n");
      json ws = RunAs(as, root, {"workspace", "ls", "--json"}).Json()["workspaces"][0];
      const std::string head = ws["head"];
      CHECK(RunAs(as, root, {"cat", head, "etc/a"}).out == "b\n");
      CmdResult ls = RunAs(as, root, {"ls", head, "bin"});
      CHECK(ls.out.find("true") == std::string::npos);
      CHECK(ls.out.find("busybox") != std::string::npos);
      CHECK(RunAs(as, root, {"ls", head, "root"}).out.find("big") == std::string::npos);
      // Nothing uncaptured is left: the workspace equals its last node.
      json d = RunAs(as, root, {"diff", "--workspace", "w", "--json"}).Json();
      CHECK(d["changes"].empty());
      CHECK(RunAs(as, root, {"fsck"}).code == 0);
      CHECK_FALSE(fs::exists(Work(root) / "etc/a"));  // the live tree never saw any of it
    }
  }
}

TEST_CASE("disk limit: config disk is the default, a request's --disk wins, supervise refuses plainly", "[cli][quota]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  CmdResult c = Run(root, {"config", "disk", "4M"});
  INFO(c.Describe());
  REQUIRE(c.code == 0);
  CHECK(Run(root, {"config", "--json"}).Json()["disk_bytes"] == 4 << 20);
  CmdResult r = Run(root, {"exec", "--", "/bin/sh", "-c", "busybox dd if=/dev/zero of=/root/big bs=1M count=16"});
  CHECK(r.err.find("No space left on device") != std::string::npos);
  r = Run(root, {"exec", "--disk", "32M", "--", "/bin/sh", "-c", "busybox dd if=/dev/zero of=/root/big bs=1M count=16"});
  INFO(r.Describe());
  CHECK(r.code == 0);
  CHECK(fs::file_size(Work(root) / "root/big") == 16u << 20);
  CHECK(Run(root, {"config", "disk", "0"}).code == 0);
  CHECK(Run(root, {"config", "--json"}).Json()["disk_bytes"] == 0);
  CHECK(Run(root, {"exec", "--disk", "1k", "--", "/bin/true"}).code == 2);  // below 1M: refused
  CmdResult s = Run(root, {"supervise", "--disk", "1G", "--", "/bin/true"});
  CHECK(s.code == 1);
  CHECK(s.err.find("supervise --disk") != std::string::npos);
}

TEST_CASE("config: a folder that is no repository, even one with an empty meta/, is refused and gets no config",
          "[cli][quota]") {
  TempDir tmp;
  for (bool with_meta : {false, true}) {
    fs::path root = tmp / (with_meta ? "empty-meta" : "plain");
    fs::create_directories(with_meta ? root / "meta" : root);
    for (std::vector<std::string> args : {std::vector<std::string>{"config", "disk", "2G"}, {"config"}}) {
      CmdResult r = Agentenv(root, args);
      INFO(r.Describe());
      CHECK(r.code == 3);
      CHECK(r.err.find("not an agentenv repository") != std::string::npos);
    }
    CHECK(!fs::exists(root / "config"));
    CHECK(!fs::exists(root / ".config.tmp"));
  }
}

}  // namespace agentenv::test
