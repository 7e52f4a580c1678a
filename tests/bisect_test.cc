// bisect (trials/bisect.h): a planted breakage found in a 1,000-node
// history, K nodes tested at a time in forked workspaces, the live tree
// untouched; skips and aborting exit codes as git bisect run has them.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "trials/bisect.h"
#include "control/ops.h"
#include "control/server.h"
#include "workspace/workspace.h"
#include "snap_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

namespace fs = std::filesystem;

// A busybox tree; node i (0-based) has etc/state = i, nodes from `broken`
// on have etc/broken, nodes in [skip_from, skip_to) have etc/untestable.
struct History {
  std::unique_ptr<snap::Repo> repo;
  std::vector<store::ObjectId> nodes;
};

History Make(const std::string& root, int n, int broken, int skip_from = -1, int skip_to = -1) {
  auto created = snap::Repo::Create(root);
  REQUIRE(created);
  History h{std::move(*created), {}};
  fs::path work = h.repo->work_dir();
  for (const char* d : {"bin", "proc", "dev", "sys", "etc", "tmp", "root", "run"}) fs::create_directories(work / d);
  fs::copy_file("/bin/busybox", work / "bin/busybox");
  for (const char* a : {"sh", "test", "[", "cat", "true"}) fs::create_symlink("busybox", work / "bin" / a);
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> paths = {"etc/state"};
    REQUIRE(WriteFileAt((work / "etc/state").string(), std::to_string(i) + "\n"));
    if (i == broken) {
      REQUIRE(WriteFileAt((work / "etc/broken").string(), "x\n"));
      paths.push_back("etc/broken");
    }
    if (i == skip_from || i == skip_to) {
      if (i == skip_from) REQUIRE(WriteFileAt((work / "etc/untestable").string(), "x\n"));
      else fs::remove(work / "etc/untestable");
      paths.push_back("etc/untestable");
    }
    snap::SnapOptions o;
    o.time_ns = int64_t(1700000000 + i) * 1000000000;
    if (i > 0) o.paths = paths;
    auto r = h.repo->Snapshot(o);
    REQUIRE(r);
    REQUIRE(r->node);
    h.nodes.push_back(*r->node);
  }
  return h;
}

const char* kTest = "test -e /etc/untestable && exit 125; test ! -e /etc/broken";

}  // namespace

TEST_CASE("bisect: a planted breakage in 1,000 nodes, 4 at a time, in at most 5 rounds", "[control][bisect]") {
  if (::geteuid() != 0) Skip("runs tests in workspaces (overlay mounts): needs root here");
  TempDir t;
  History h = Make(t.str() + "/repo", 1000, 637);
  const store::ObjectId head = h.nodes.back();
  const std::string state = ReadFileAt(h.repo->work_dir() + "/etc/state");
  control::Server server(std::move(h.repo));
  control::BisectRequest req;
  req.test = kTest;
  req.good = h.nodes.front().Hex();
  req.jobs = 4;
  auto b = server.Bisect(req);
  INFO((b ? "" : b.error().message));
  REQUIRE(b);
  CHECK(b->path == 1000);
  CHECK(b->found);
  REQUIRE(b->first_bad);
  CHECK(b->first_bad->id == h.nodes[637].Hex());
  REQUIRE(b->last_good);
  CHECK(*b->last_good == h.nodes[636].Hex());
  CHECK(b->rounds.size() <= 5);
  CHECK(b->rounds.front().tried.size() == 4);
  CHECK(b->added == 1);  // etc/broken
  // Nothing in the live tree moved, no workspace is left.
  CHECK(*server.repo().Head() == head);
  CHECK(ReadFileAt(server.repo().work_dir() + "/etc/state") == state);
  CHECK(workspace::ListWorkspaces(server.repo().root())->empty());

  // One at a time is a binary search: about log2(1000) rounds.
  req.jobs = 1;
  auto one = server.Bisect(req);
  REQUIRE(one);
  CHECK(one->first_bad->id == h.nodes[637].Hex());
  CHECK(one->rounds.size() >= 9);
  CHECK(one->rounds.size() <= 11);

  // Without --good the root is tested like any node; the MCP tool is the same op.
  std::set<std::string> keys;
  for (const auto& [k, v] : control::FindOp("bisect")->input_schema["properties"].items()) keys.insert(k);
  CHECK(keys == std::set<std::string>{"test", "good", "bad", "jobs", "timeout_s", "network"});
  auto j = control::CallJson(server, "bisect", {{"test", kTest}, {"jobs", 4}}, nullptr);
  REQUIRE(j);
  CHECK((*j)["found"] == true);
  CHECK((*j)["first_bad"]["id"] == h.nodes[637].Hex());
}

TEST_CASE("bisect: 125 skips a node, only skipped nodes left is ambiguous, 128 and above abort",
          "[control][bisect]") {
  if (::geteuid() != 0) Skip("runs tests in workspaces (overlay mounts): needs root here");
  TempDir t;
  // Nodes 20..24 cannot be tested; the breakage is at 23.
  History h = Make(t.str() + "/repo", 40, 23, 20, 25);
  control::Server server(std::move(h.repo));
  control::BisectRequest req;
  req.test = kTest;
  req.good = h.nodes.front().Hex();
  req.jobs = 2;
  auto b = server.Bisect(req);
  REQUIRE(b);
  CHECK_FALSE(b->found);
  // The first bad testable node is 25; 20..24 could each be the first.
  REQUIRE(b->candidates.size() == 6);
  CHECK(b->candidates.front() == h.nodes[20].Hex());
  CHECK(b->candidates.back() == h.nodes[25].Hex());
  CHECK(*b->last_good == h.nodes[19].Hex());

  req.test = "exit 129";
  auto aborted = server.Bisect(req);
  REQUIRE_FALSE(aborted);
  CHECK(aborted.error().message.find("exit code 129") != std::string::npos);
  CHECK(workspace::ListWorkspaces(server.repo().root())->empty());

  req.test = kTest;
  req.good = h.nodes[30].Hex();
  req.bad = h.nodes[10].Hex();
  auto backwards = server.Bisect(req);
  REQUIRE_FALSE(backwards);
  CHECK(backwards.error().message.find("is not an ancestor of bad") != std::string::npos);
}

}  // namespace agentenv::test
