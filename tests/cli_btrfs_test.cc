// The btrfs backend through the agentenv binary, on a loopback btrfs.
#include <catch2/catch.hpp>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

TEST_CASE("cli btrfs: init chooses btrfs, snap keeps a subvolume, fork is a snapshot", "[cli][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  const fs::path root = m.dir() + "/repo";
  REQUIRE(Agentenv(root, {"init"}).code == 0);
  json st = AgentenvJson(root, {"status"});
  CHECK(st.value("backend", "") == "btrfs");
  WriteFile(root / "work/current/a", "one\n");
  json s1 = AgentenvJson(root, {"snap", "-m", "one"});
  REQUIRE(s1.value("created", false));
  WriteFile(root / "work/current/a", "two\n");
  json s2 = AgentenvJson(root, {"snap", "-m", "two"});
  REQUIRE(s2.value("created", false));
  CHECK(fs::is_directory(root / "subvols" / s2["node"].value("id", "")));
  json f = AgentenvJson(root, {"fork", "HEAD~1", "--name", "w"});
  CHECK(f.value("materialized", "") == "snapshot");
  const std::string lower = f["workspace"].value("lower", "");
  REQUIRE_FALSE(lower.empty());
  CHECK(ReadFile(fs::path(lower) / "a") == "one\n");
  CHECK(Agentenv(root, {"workspace", "rm", "w"}).code == 0);
  CHECK(Agentenv(root, {"gc"}).code == 0);  // removes the lower, a subvolume
  CHECK_FALSE(fs::exists(lower));
}

TEST_CASE("cli btrfs: uid 0 of a user namespace snapshots by walking and keeps no subvolumes", "[cli][btrfs][rootless]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  REQUIRE(::chmod(t.str().c_str(), 0755) == 0);
  REQUIRE(::chown(m.dir().c_str(), 65534, 65534) == 0);
  const std::string root = m.dir() + "/repo";
  auto as_ns_root = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "/usr/bin/unshare", "-Ur", AGENTENV_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--root");
    argv.push_back(root);
    return RunCmd(argv);
  };
  CmdResult init = as_ns_root({"init"});
  if (init.code != 0 && init.err.find("unshare") != std::string::npos) Skip("no unprivileged user namespaces here");
  REQUIRE(init.code == 0);
  WriteFile(fs::path(root) / "work/current/a", "one\n");
  CmdResult s1 = as_ns_root({"snap", "-m", "one"});
  INFO(s1.Describe());
  CHECK(s1.code == 0);
  WriteFile(fs::path(root) / "work/current/a", "two\n");
  CmdResult s2 = as_ns_root({"snap", "-m", "two"});
  INFO(s2.Describe());
  CHECK(s2.code == 0);
  CHECK(s2.out.find("node ") != std::string::npos);
  CHECK_FALSE(fs::exists(fs::path(root) / "subvols"));
  CHECK(as_ns_root({"status"}).out.find("backend: btrfs") != std::string::npos);
}

TEST_CASE("cli btrfs: AGENTENV_BACKEND=btrfs off btrfs fails clearly and makes nothing", "[cli][btrfs]") {
  TempDir t;
  const fs::path root = t.path() / "repo";
  CmdResult r = RunCmd({"/usr/bin/env", "AGENTENV_BACKEND=btrfs", AGENTENV_BIN, "init", "--root", root.string()});
  INFO(r.Describe());
  if (r.code == 0) Skip("the temporary directory is on btrfs");
  CHECK(r.err.find("not a btrfs filesystem") != std::string::npos);
  CHECK_FALSE(fs::exists(root));
}

}  // namespace
}  // namespace agentenv::test
