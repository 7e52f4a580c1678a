// The btrfs backend through the agentenv binary, on a loopback btrfs.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <random>

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

TEST_CASE("cli btrfs: every way of init leaves HEAD's subvolume snapshot for the first snap to search from",
          "[cli][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  const fs::path mnt = m.dir(), src = mnt / "src";
  fs::create_directories(src / "etc");
  WriteFile(src / "etc/conf", "setting=1\n");
  WriteFile(src / "top", "top\n");
  auto has_head_snapshot = [](const fs::path& root) { return fs::is_directory(root / "subvols" / HeadId(root)); };
  const fs::path from = mnt / "from";
  REQUIRE(Agentenv(from, {"init", "--from", src.string()}).code == 0);
  CHECK(has_head_snapshot(from));
  REQUIRE(Agentenv(from, {"export", "HEAD", "-o", (mnt / "tree.tar").string()}).code == 0);
  REQUIRE(Agentenv(from, {"export", "HEAD", "--oci", (mnt / "oci").string()}).code == 0);
  const fs::path empty = mnt / "empty", tarball = mnt / "tarball", oci = mnt / "from-oci";
  REQUIRE(Agentenv(empty, {"init"}).code == 0);
  CHECK(has_head_snapshot(empty));
  REQUIRE(Agentenv(tarball, {"init", "--tarball", (mnt / "tree.tar").string()}).code == 0);
  CHECK(has_head_snapshot(tarball));
  REQUIRE(Agentenv(oci, {"init", "--from-oci", (mnt / "oci").string()}).code == 0);
  CHECK(has_head_snapshot(oci));
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

// Entries of work/ that a swap left (none once a writer ran).
std::vector<std::string> SwapLeftovers(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root / "work"))
    if (e.path().filename().string().rfind(".swap-", 0) == 0) out.push_back(e.path().filename().string());
  return out;
}

TEST_CASE("cli btrfs: restore swaps in the node's snapshot, and SIGKILL during it leaves a usable repository",
          "[cli][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  const fs::path root = m.dir() + "/repo";
  const fs::path w = root / "work/current";
  REQUIRE(Agentenv(root, {"init"}).code == 0);
  fs::create_directories(w / "tmp");
  for (int i = 0; i < 300; ++i) WriteFile(w / ("f" + std::to_string(i)), "one " + std::to_string(i) + "\n");
  WriteFile(w / "a", "one\n");
  REQUIRE(AgentenvJson(root, {"snap", "-m", "one"}).value("created", false));
  const std::string n1 = HeadId(root);
  for (int i = 0; i < 300; ++i) WriteFile(w / ("f" + std::to_string(i)), "two\n");
  WriteFile(w / "a", "two\n");
  WriteFile(w / "tmp/scratch", "ignored\n");
  REQUIRE(AgentenvJson(root, {"snap", "-m", "two"}).value("created", false));
  const std::string n2 = HeadId(root);

  json r = AgentenvJson(root, {"restore", n1});
  INFO(r.dump());
  CHECK(r.value("swapped", false));
  CHECK(r.value("files_written", -1) == 0);
  CHECK(ReadFile(w / "a") == "one\n");
  CHECK(ReadFile(w / "tmp/scratch") == "ignored\n");  // /tmp is ignored: kept as it was
  CHECK_FALSE(AgentenvJson(root, {"status"}).value("dirty", true));
  json in_place = AgentenvJson(root, {"restore", "--in-place", n2});
  CHECK_FALSE(in_place.value("swapped", false));
  CHECK(in_place.value("files_written", 0) == 301);

  std::mt19937 rng(Catch::rngSeed() ? Catch::rngSeed() : 20261125);
  int killed = 0;
  for (int i = 0; i < 24; ++i) {
    const std::string& to = i % 2 ? n2 : n1;
    if (i % 3 == 0) WriteFile(w / "a", "unsaved " + std::to_string(i) + "\n");
    Child c;
    c.Start({AGENTENV_BIN, "restore", to, "--root", root.string()}, false, false);
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 60000));
    c.Signal(SIGKILL);
    if (c.Wait(60000) == 128 + SIGKILL) ++killed;
    INFO("attempt " << i);
    REQUIRE(fs::is_directory(w));
    CmdResult s = Agentenv(root, {"snap", "-m", "after kill"});
    INFO(s.Describe());
    REQUIRE(s.code == 0);
    CHECK(SwapLeftovers(root).empty());
    std::string a = ReadFile(w / "a");
    CHECK((a == "one\n" || a == "two\n" || a.rfind("unsaved", 0) == 0));
    CHECK(ReadFile(w / "tmp/scratch") == "ignored\n");
    CHECK_FALSE(AgentenvJson(root, {"status"}).value("dirty", true));
  }
  INFO("killed mid-restore: " << killed);
  // A swap again, to a node that surely has its snapshot (a swap killed
  // after the exchange costs HEAD its snapshot, so n1 or n2 may have none)
  // and differs from the live tree in 300 files (below 256 differing paths
  // a restore stays in place, which costs less).
  for (int i = 0; i < 300; ++i) WriteFile(w / ("f" + std::to_string(i)), "three\n");
  WriteFile(w / "a", "three\n");
  REQUIRE(AgentenvJson(root, {"snap", "-m", "three"}).value("created", false));
  const std::string n3 = HeadId(root);
  REQUIRE(Agentenv(root, {"restore", "--in-place", n1}).code == 0);
  json last = AgentenvJson(root, {"restore", n3});
  INFO(last.dump());
  CHECK(last.value("swapped", false));
  CHECK(ReadFile(w / "a") == "three\n");
  CmdResult fsck = Agentenv(root, {"fsck"});
  INFO(fsck.Describe());
  CHECK(fsck.code == 0);
}

TEST_CASE("cli btrfs: a daemon's rollback restores in place", "[cli][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  const fs::path root = m.dir() + "/repo";
  const fs::path w = root / "work/current";
  REQUIRE(Agentenv(root, {"init"}).code == 0);
  WriteFile(w / "a", "one\n");
  REQUIRE(AgentenvJson(root, {"snap", "-m", "one"}).value("created", false));
  const std::string n1 = HeadId(root);
  WriteFile(w / "a", "two\n");
  REQUIRE(AgentenvJson(root, {"snap", "-m", "two"}).value("created", false));
  struct stat before;
  REQUIRE(::stat(w.c_str(), &before) == 0);
  Daemon d(root, {"--quiet-ms", "100"});
  REQUIRE(d.WaitReady());
  json r = AgentenvJson(root, {"restore", n1});  // served by the daemon
  INFO(r.dump());
  CHECK_FALSE(r.value("swapped", false));
  CHECK(r.value("files_written", 0) == 1);
  CHECK(ReadFile(w / "a") == "one\n");
  struct stat after;
  REQUIRE(::stat(w.c_str(), &after) == 0);
  CHECK(after.st_dev == before.st_dev);  // the same subvolume
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
