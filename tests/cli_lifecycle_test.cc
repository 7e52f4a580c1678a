// Shared state under concurrency and kill -9 (docs/design.md, "Shared
// state"): gc never removes a lower a fork builds or uses, a killed gc never
// leaves a short lower under its ready name, killed commands leave only
// scratch that status reports and gc (or the retried command) removes, and
// fsck --lowers checks lowers against their trees. As root and as uid 65534.
#include <sys/xattr.h>

#include <catch2/catch.hpp>

#include "tests/lifecycle_testutil.h"

namespace agentenv::test {
namespace {

void NeedRoot() {
  if (!IsRoot()) Skip("needs root: runs the binary as root and as uid 65534 (setpriv)");
}

std::string HeadOf(As as, const fs::path& root) {
  json j = JsonAs(as, root, {"head"});
  return j.is_object() && j.contains("node") ? j["node"].value("id", "") : "";
}

void Must(As as, const fs::path& root, std::vector<std::string> args) {
  std::string line;
  for (const auto& a : args) line += " " + a;
  CmdResult r = RunAs(as, root, args);
  INFO(ModeName(as) + ":" + line + "\n" + r.Describe());
  REQUIRE(r.code == 0);
}

void CheckView(As as, const fs::path& root, const std::string& ws, const std::string& want) {
  std::string err;
  std::string got = WorkspaceView(as, root, ws, &err);
  INFO("workspace " + ws + ": " + err + ViewDiff(want, got));
  CHECK((got == want));
}

fs::path LowerOf(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root / "lowers"))
    if (e.path().filename().string().size() == 64) return e.path();
  return {};
}

}  // namespace

TEST_CASE("lifecycle: gc and forks running together never fail for each other's reason", "[cli][lifecycle][root][slow]") {
  NeedRoot();
  for (As as : {As::kRoot, As::kNobody}) {
    INFO(ModeName(as));
    TempDir tmp;
    fs::path root = MakeRepoAs(as, tmp, 2500);
    const std::string head = HeadOf(as, root);
    const std::string want = NodeView(as, root, head, tmp / "want");
    // A fork building its lower while gc runs, at several offsets: before,
    // during and after the build.
    for (int i = 0; i < 5; ++i) {
      std::string name = "x" + std::to_string(i);
      Child fork;
      fork.Start(AgentenvArgv(as, root, {"fork", "--name", name}), false, true, "", true);
      if (i > 0) WaitFor([&] { return HasEntry(root / "lowers", ".tmp-"); }, i * 40);
      CmdResult gc = RunAs(as, root, {"gc"});
      INFO(gc.Describe());
      CHECK(gc.code == 0);
      REQUIRE(fork.Wait(120000) == 0);
      std::string err;
      std::string got = WorkspaceView(as, root, name, &err);
      INFO(err + ViewDiff(want, got));
      CHECK((got == want));
      Must(as, root, {"workspace", "rm", name});
    }
    // The second reproduction: gc of an unused lower while a new
    // fork of the same node starts, then an exec in the new workspace.
    Must(as, root, {"fork", "--name", "a"});
    Must(as, root, {"workspace", "rm", "a"});
    for (int i = 0; i < 4; ++i) {
      std::string name = "b" + std::to_string(i);
      Child gc;
      gc.Start(AgentenvArgv(as, root, {"gc"}), false, false);
      Must(as, root, {"fork", "--name", name});
      CHECK(gc.Wait(120000) == 0);
      std::string got = WorkspaceView(as, root, name);
      INFO(ViewDiff(want, got));
      CHECK((got == want));
      Must(as, root, {"workspace", "rm", name});
    }
    Must(as, root, {"fsck", "--lowers"});
  }
}

TEST_CASE("lifecycle: a killed gc never leaves a short lower that a fork would use", "[cli][lifecycle][root][slow]") {
  NeedRoot();
  for (As as : {As::kRoot, As::kNobody}) {
    INFO(ModeName(as));
    TempDir tmp;
    fs::path root = MakeRepoAs(as, tmp, 2500);
    const std::string want = NodeView(as, root, HeadOf(as, root), tmp / "want");
    int killed_mid_removal = 0;
    for (int delay : {1, 5, 15, 40, 100}) {
      Must(as, root, {"fork", "--name", "a"});
      Must(as, root, {"workspace", "rm", "a"});  // the lower is unused now: gc removes it
      // Killed while it deletes: the lower was renamed away first.
      killed_mid_removal += KillAfter(AgentenvArgv(as, root, {"gc"}), delay,
                                      [&] { return HasEntry(root / "lowers", ".rm-"); });
      Must(as, root, {"fork", "--name", "b"});
      CheckView(as, root, "b", want);
      Must(as, root, {"workspace", "rm", "b"});
      Must(as, root, {"gc"});
      CHECK_FALSE(HasEntry(root / "lowers", ".rm-"));
    }
    CHECK(killed_mid_removal > 0);
  }
}

TEST_CASE("lifecycle: a lower without its completion mark is never used and fsck --lowers finds a damaged one", "[cli][lifecycle][root][slow]") {
  NeedRoot();
  for (As as : {As::kRoot, As::kNobody}) {
    INFO(ModeName(as));
    TempDir tmp;
    fs::path root = MakeRepoAs(as, tmp, 800);
    const std::string want = NodeView(as, root, HeadOf(as, root), tmp / "want");
    Must(as, root, {"fork", "--name", "a"});
    Must(as, root, {"workspace", "rm", "a"});
    // What a killed gc of an older version left: the ready name, no mark,
    // half its files.
    fs::path lower = LowerOf(root);
    REQUIRE(!lower.empty());
    REQUIRE(::removexattr(lower.c_str(), "user.agentenv.lower") == 0);
    fs::remove_all(lower / "data/d3");
    fs::remove_all(lower / "bin");
    Must(as, root, {"fork", "--name", "b"});
    CheckView(as, root, "b", want);
    char mark[80];
    CHECK(::getxattr(LowerOf(root).c_str(), "user.agentenv.lower", mark, sizeof mark) == 64);

    // Damage to a ready lower: fsck --lowers says which paths, --repair
    // removes it, and the workspace's next command builds it again.
    Must(as, root, {"fsck", "--lowers"});
    fs::remove(LowerOf(root) / "data/d5/e0/f5");
    CmdResult f = RunAs(as, root, {"fsck", "--lowers"});
    INFO(f.Describe());
    CHECK(f.code == 4);
    CHECK(f.err.find("data/d5/e0/f5") != std::string::npos);
    CHECK(f.err.find("fsck --lowers --repair") != std::string::npos);
    Must(as, root, {"fsck", "--lowers", "--repair"});
    CHECK(LowerOf(root).empty());
    CheckView(as, root, "b", want);
    Must(as, root, {"fsck", "--lowers"});
  }
}

TEST_CASE("lifecycle: killed commands leave scratch that status reports and gc removes, and a retried workspace rm finishes", "[cli][lifecycle][root][slow]") {
  NeedRoot();
  for (As as : {As::kRoot, As::kNobody}) {
    INFO(ModeName(as));
    TempDir tmp;
    fs::path root = MakeRepoAs(as, tmp, 2500);
    // What the repository holds after a fork, its removal and a gc.
    Must(as, root, {"fork", "--name", "k"});
    Must(as, root, {"workspace", "rm", "k"});
    Must(as, root, {"gc"});
    const auto clean = RepoListing(root);

    // A first fork killed while it builds its lower.
    REQUIRE(KillAfter(AgentenvArgv(as, root, {"fork", "--name", "k"}), 60000,
                      [&] { return HasEntry(root / "lowers", ".tmp-"); }));
    json st = JsonAs(as, root, {"status"});
    REQUIRE(st["reclaimable"].size() == 1);
    CHECK(st["reclaimable"][0]["path"].get<std::string>().find("/lowers/.tmp-") != std::string::npos);
    CHECK(st["reclaimable_bytes"].get<uint64_t>() > 0);
    json gc = JsonAs(as, root, {"gc"});
    CHECK(gc["scratch_removed"] == 1);
    CHECK(gc["scratch_bytes"].get<uint64_t>() > 0);
    CHECK(RepoListing(root) == clean);
    CHECK(JsonAs(as, root, {"status"})["reclaimable"].empty());

    // A workspace rm killed while it deletes: the retry finishes it.
    Must(as, root, {"fork", "--name", "k"});
    Must(as, root, {"exec", "--workspace", "k", "--", "/bin/sh", "-c",
                    "mkdir -p /big && cd /big && seq 1 3000 | xargs -n 50 sh -c 'for f; do echo $f > $f; done' _"});
    REQUIRE(KillAfter(AgentenvArgv(as, root, {"workspace", "rm", "k"}), 60000,
                      [&] { return HasEntry(root / "workspaces", ".rm-k-"); }));
    CHECK_FALSE(fs::exists(root / "workspaces/k"));
    json rm = JsonAs(as, root, {"workspace", "rm", "k"});
    CHECK(rm.value("ok", false));
    CHECK_FALSE(HasEntry(root / "workspaces", ".rm-"));
    json again = JsonAs(as, root, {"workspace", "rm", "k"});
    CHECK(again.value("existed", true) == false);  // nothing left: done, not an error
    Must(as, root, {"gc"});
    CHECK(RepoListing(root) == clean);
  }
}

TEST_CASE("lifecycle: retain keeps the node a workspace was forked from until the workspace is removed", "[cli][lifecycle]") {
  NeedRoot();
  const As as = As::kRoot;
  TempDir tmp;
  fs::path root = MakeRepoAs(as, tmp, 50);
  auto change = [&](const std::string& text) {
    WriteFile(Work(root) / "data.txt", text);
    Must(as, root, {"snap", "-m", text});
  };
  change("base");
  const std::string base = HeadOf(as, root);
  Must(as, root, {"fork", "--name", "a"});
  for (int i = 0; i < 12; ++i) change("later " + std::to_string(i));
  // The base has one child and is old: only the workspace's lease keeps it.
  json kept = JsonAs(as, root, {"retain", "--keep-last", "2", "--keep-within", "0"});
  INFO(kept.dump());
  json log = JsonAs(as, root, {"log", "-n", "100"});
  auto in_log = [&](const json& l) {
    for (const auto& n : l["nodes"])
      if (n.value("id", "") == base) return true;
    return false;
  };
  CHECK(in_log(log));
  Must(as, root, {"exec", "--workspace", "a", "--no-snap", "--", "/bin/sh", "-c", "echo mine > /mine"});
  json snap = JsonAs(as, root, {"snap", "--workspace", "a", "-m", "in a"});
  INFO(snap.dump());
  REQUIRE(snap.contains("node"));
  CHECK(snap["node"].value("parent", "") == base);

  // Removed: the lease goes with it.
  Must(as, root, {"workspace", "rm", "a"});
  json gc = JsonAs(as, root, {"gc"});
  CHECK(gc["leases_released"] == 0);  // workspace rm released it itself

  // A workspace that vanished without `workspace rm` (its removal killed
  // after the rename): gc releases its lease, and the retried rm succeeds.
  Must(as, root, {"fork", "--name", "b"});
  fs::path gone = root / "workspaces/.rm-b-killed";
  fs::rename(root / "workspaces/b", gone);
  CHECK(RunAs(as, root, {"workspace", "rm", "b"}).code == 0);
  CHECK_FALSE(fs::exists(gone));
  Must(as, root, {"fork", "--name", "c"});
  fs::remove_all(root / "workspaces/c");
  json gc2 = JsonAs(as, root, {"gc"});
  CHECK(gc2["leases_released"] == 1);
}

}  // namespace agentenv::test
