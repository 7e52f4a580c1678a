// kill -9 swept over every command that makes or removes shared state
// (fork, tournament, workspace rm, exec, snap and restore in a workspace,
// push, pull, gc), as root and as uid 65534. After each kill: the retried command
// succeeds, nothing is left behind (the repository's listing equals the one
// after an uninterrupted run), fsck (with --lowers) is clean, and every
// workspace shows exactly its node's tree.
#include <catch2/catch.hpp>

#include "tests/lifecycle_testutil.h"

namespace agentenv::test {
namespace {

struct Step {
  std::string name;
  std::function<void()> setup;    // from the base state to the command's start
  std::vector<std::string> args;  // the command killed, then retried
  std::function<void()> cleanup;  // from the command's end back to the base state
  // After the kill: whether the killed command had already finished its
  // work; the retry may then refuse with done_code (3: no such workspace
  // to remove, 6: the workspace exists).
  std::function<bool()> finished = [] { return false; };
  int done_code = -1;
};

std::string Line(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

void Must(As as, const fs::path& root, const std::vector<std::string>& args) {
  CmdResult r = RunAs(as, root, args);
  INFO(ModeName(as) + ": " + Line(args) + "\n" + r.Describe());
  REQUIRE(r.code == 0);
}

// Every workspace shows its last node's tree.
void CheckWorkspaces(As as, const fs::path& root, const fs::path& scratch) {
  json ls = JsonAs(as, root, {"workspace", "ls"});
  for (const auto& w : ls["workspaces"]) {
    std::string name = w["name"], head = w["head"];
    INFO("workspace " + name + " at " + head);
    std::string err;
    std::string got = WorkspaceView(as, root, name, &err);
    std::string want = NodeView(as, root, head, scratch);
    INFO(err + ViewDiff(want, got));
    CHECK((got == want));
  }
}

void Sweep(As as) {
  INFO(ModeName(as));
  // On tmpfs: a kill -9 leaves the page cache as it was, so the disk's
  // flushes test nothing here (power cuts are fault_injection_test.cc's)
  // and on a VM's disk they were most of the sweep's time (60 s against
  // 10 s, nearly all of it system time).
  TempDir tmp(fs::is_directory("/dev/shm") ? "/dev/shm" : "/tmp");
  fs::path root = MakeRepoAs(as, tmp, 1200);
  auto run = [&](std::vector<std::string> args) { Must(as, root, std::move(args)); };
  std::optional<Registry> registry;
  if (HaveRegistry()) registry.emplace(tmp / "registry");
  else WARN("no " << kRegistryBin << ": push and pull are left out of the sweep");
  const std::string image = registry ? registry->address() + "/sweep:t" : "";
  const std::string fill = "mkdir -p /w && cd /w && seq 1 800 | xargs -n 50 sh -c 'for f; do echo $f > $f; done' _";
  // The node forks start from: a workspace's restore goes back to it (an
  // id, so that the retry of a restore that finished changes nothing).
  const std::string base = JsonAs(as, root, {"head"})["node"]["id"];

  std::vector<Step> steps = {
      {"fork", [] {}, {"fork", "HEAD", "--name", "k"}, [&] { run({"workspace", "rm", "k"}); },
       [&] { return fs::exists(root / "workspaces/k"); }, 6},
      {"tournament", [] {},
       {"tournament", "--test", "true", "--jobs", "2", "--no-apply", "--", "echo a > /a", "echo b > /b"},
       [&] {
         const json ls = JsonAs(as, root, {"workspace", "ls"});
         for (const auto& w : ls["workspaces"]) run({"workspace", "rm", w["name"].get<std::string>()});
       }},
      {"workspace rm", [&] { run({"fork", "--name", "k"}); run({"exec", "--workspace", "k", "--", "/bin/sh", "-c", fill}); },
       {"workspace", "rm", "k"}, [] {},
       [&] { return !fs::exists(root / "workspaces/k") && !HasEntry(root / "workspaces", ".rm-k-"); }, 3},
      {"exec --workspace", [&] { run({"fork", "--name", "k"}); },
       {"exec", "--workspace", "k", "--", "/bin/sh", "-c", fill}, [&] { run({"workspace", "rm", "k"}); }},
      {"snap --workspace",
       [&] { run({"fork", "--name", "k"}); run({"exec", "--workspace", "k", "--no-snap", "--", "/bin/sh", "-c", fill}); },
       {"snap", "--workspace", "k", "-m", "swept"}, [&] { run({"workspace", "rm", "k"}); }},
      {"restore --workspace",
       [&] { run({"fork", "--name", "k"}); run({"exec", "--workspace", "k", "--", "/bin/sh", "-c", fill}); },
       {"restore", "--workspace", "k", base}, [&] { run({"workspace", "rm", "k"}); }},
      {"gc", [&] { run({"fork", "--name", "k"}); run({"workspace", "rm", "k"}); }, {"gc"}, [] {}},
  };
  if (registry) {
    steps.push_back({"push", [] {}, {"push", "HEAD", image, "--insecure"}, [] {}});
    steps.push_back({"pull", [] {}, {"pull", image, "--insecure"}, [] {}});
  }
  for (const Step& s : steps) {
    INFO("step: " + s.name);
    // The reference: the same command, uninterrupted; and its duration,
    // over which the kills are spread.
    s.setup();
    auto began = Clock::now();
    run(s.args);
    const int took_ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began).count());
    const auto want = RepoListing(root);
    s.cleanup();
    run({"gc"});
    for (double at : {0.1, 0.45, 0.8}) {
      int delay = std::max(1, int(at * took_ms));
      INFO("killed after " << delay << " ms of " << took_ms);
      s.setup();
      KillAfter(AgentenvArgv(as, root, s.args), delay);
      const bool finished = s.finished();
      CmdResult again = RunAs(as, root, s.args);
      INFO(again.Describe());
      REQUIRE((again.code == 0 || (finished && again.code == s.done_code)));
      auto got = RepoListing(root);
      INFO("want:\n" + Join(want) + "got:\n" + Join(got));
      CHECK(got == want);
      CheckWorkspaces(as, root, tmp / "view");
      CmdResult fsck = RunAs(as, root, {"fsck", "--lowers"});
      INFO(fsck.Describe());
      CHECK(fsck.code == 0);
      s.cleanup();
      run({"gc"});
    }
  }
}

}  // namespace

TEST_CASE("kill -9 sweep over fork tournament workspace-rm exec snap restore push pull gc (root)", "[cli][lifecycle][kill][root][slow]") {
  if (!IsRoot()) Skip("needs root (the sweep also runs as uid 65534 through setpriv)");
  Sweep(As::kRoot);
}

TEST_CASE("kill -9 sweep over fork tournament workspace-rm exec snap restore push pull gc (uid 65534)", "[cli][lifecycle][kill][root][slow]") {
  if (!IsRoot()) Skip("needs root to run the binary as uid 65534 on a repository it owns");
  Sweep(As::kNobody);
}

}  // namespace agentenv::test
