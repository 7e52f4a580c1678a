// Everything that shares state, at once, for a bounded time: `serve
// --listen` capturing a stream of writes, tournaments (some applied), forks
// checked from inside, execs in workspaces removed at once, bisects,
// mounted views, workspace rm, retain, gc, ctl snapshot and an MCP client
// over HTTP, on a tree with hardlink groups, as root and as uid 65534. No
// command may fail for another's reason; afterwards fsck (with --lowers) is
// clean, no node is lost but those retain dropped, and every workspace
// showed exactly its node's tree.
// AGENTENV_STRESS_SECONDS sets the time per mode (default 30), longer when
// fewer than 11 kept nodes were made by then.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <random>

#include "tests/lifecycle_testutil.h"
#include "tests/mcp_http_testutil.h"

namespace agentenv::test {
namespace {

// What the worker threads saw, for the main thread to assert on.
class Findings {
 public:
  void Fail(const std::string& what) {
    std::lock_guard l(mu_);
    if (failures_.size() < 20) failures_.push_back(what);
    ++count_;
  }
  void Seen(const std::string& id) {
    std::lock_guard l(mu_);
    if (!id.empty()) seen_.insert(id);
  }
  void Dropped(const std::string& id) {
    std::lock_guard l(mu_);
    dropped_.insert(id);
  }
  std::vector<std::string> failures() {
    std::lock_guard l(mu_);
    return failures_;
  }
  size_t count() {
    std::lock_guard l(mu_);
    return count_;
  }
  std::set<std::string> KeptNodes() {
    std::lock_guard l(mu_);
    std::set<std::string> out;
    for (const auto& id : seen_)
      if (!dropped_.count(id)) out.insert(id);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> failures_;  // GUARDED_BY(mu_)
  size_t count_ = 0;                   // GUARDED_BY(mu_)
  std::set<std::string> seen_, dropped_;  // GUARDED_BY(mu_)
};

int StressSeconds() {
  const char* s = std::getenv("AGENTENV_STRESS_SECONDS");
  return s ? std::max(1, std::atoi(s)) : 30;
}

void Stress(As as) {
  INFO(ModeName(as));
  TempDir tmp;
  fs::path root = MakeRepoAs(as, tmp, 1500, /*hardlinks=*/true);
  const std::string first = JsonAs(as, root, {"head"})["node"]["id"];
  Child daemon;
  daemon.Start(AgentenvArgv(as, root, {"serve", "--listen", "127.0.0.1:0", "--quiet-ms", "50", "--max-delay-ms", "300"}),
               false, false, (tmp / "daemon.log").string());
  REQUIRE(WaitFor([&] { return fs::exists(root / "agentenv.sock") && RunAs(as, root, {"head"}).code == 0; }, 20000));
  const int port = ListenPort(tmp / "daemon.log");
  REQUIRE(port > 0);

  Findings f;
  std::atomic<bool> stop{false};
  // The reply, or an empty object (its failure recorded) that value() and
  // contains() read as having nothing.
  auto call = [&](const std::string& who, std::vector<std::string> args) -> json {
    args.insert(std::find(args.begin(), args.end(), "--"), "--json");
    CmdResult r = RunAs(as, root, args, 180000);
    json j = json::parse(r.out, nullptr, false);
    if (r.code != 0 || j.is_discarded()) {
      std::string line;
      for (const auto& a : args) line += " " + a;
      f.Fail(who + ":" + line + ": " + r.Describe());
      return json::object();  // an empty reply: value() on it cannot throw in a worker
    }
    return j;
  };

  // The agent: a steady stream of writes, captured by the daemon.
  std::thread writer([&] {
    std::mt19937 rng(1);
    fs::path dir = Work(root) / "data/live";
    fs::create_directories(dir);
    if (as == As::kNobody) ::lchown(dir.c_str(), 65534, 65534);
    for (int i = 0; !stop; ++i) {
      fs::path p = dir / ("f" + std::to_string(rng() % 200));
      std::error_code ec;
      if (rng() % 5 == 0) {
        fs::remove(p, ec);
      } else {
        std::ofstream(p) << "write " << i << "\n";
        if (as == As::kNobody) ::lchown(p.c_str(), 65534, 65534);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
  });
  // Forks of a pinned HEAD, checked from inside against the node's export.
  auto forker = [&](int id) {
    for (int i = 0; !stop; ++i) {
      std::string name = "f" + std::to_string(id) + "-" + std::to_string(i);
      json tag = call("forker", {"tag", name, "HEAD"});
      if (tag.empty()) continue;
      std::string base = tag.value("id", "");
      f.Seen(base);
      if (call("forker", {"fork", name, "--name", name}).empty()) continue;
      std::string err;
      std::string got = WorkspaceView(as, root, name, &err);
      std::string view_err;
      std::string want = TryNodeView(as, root, base, tmp / ("view-" + name), &view_err);
      if (!view_err.empty()) f.Fail("forker: node " + base + ": " + view_err);
      else if (got != want) f.Fail("workspace " + name + " does not show node " + base + ": " + err + ViewDiff(want, got));
      call("forker", {"workspace", "rm", name});
      call("forker", {"tag", "-d", name});
      // A command and its node in a workspace, removed the moment it returns.
      if (call("forker", {"fork", "HEAD", "--name", name + "-x"}).empty()) continue;
      call("forker", {"exec", "--workspace", name + "-x", "--", "/bin/sh", "-c", "echo x > /x; cat /bin/hl-c > /y"});
      call("forker", {"workspace", "rm", name + "-x"});
    }
  };
  std::thread fork1(forker, 1), fork2(forker, 2);
  // Bisects over the whole history: the first node where the writer's
  // directory exists. Their workspaces come and go beside everyone's.
  std::thread bisects([&] {
    while (!stop) {
      json b = call("bisect", {"bisect", "--good", first, "--test", "test ! -e /data/live", "--jobs", "2"});
      if (!b.empty() && !b.value("found", false)) f.Fail("bisect: no first bad node: " + b.dump().substr(0, 300));
    }
  });
  // Read-only views of HEAD, for one command each (rootless and as root).
  std::thread views([&] {
    while (!stop) {
      // The command's own output, not a reply: its exit code is the answer.
      CmdResult r = RunAs(as, root, {"mount", "HEAD", "--", "/bin/sh", "-c", "test -f \"$AGENTENV_VIEW/bin/hl-b\""}, 180000);
      if (r.code != 0) f.Fail("views: mount HEAD -- test -f bin/hl-b: " + r.Describe());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // An agent host over MCP on HTTP: reads, execs on the live tree, tags.
  std::thread mcp([&] {
    HttpMcp m(port);
    if (!m.Initialize()) return f.Fail("mcp: initialize failed");
    for (int i = 0; !stop; ++i) {
      for (const auto& [tool, args] : std::vector<std::pair<std::string, json>>{
               {"log", {{"limit", 5}}},
               {"exec", {{"command", "echo mcp " + std::to_string(i) + " > /data/mcp"}}},
               {"tag", {{"name", "mcp"}, {"ref", "HEAD"}, {"force", true}}}}) {
        json r = m.Request("tools/call", {{"name", tool}, {"arguments", args}});
        if (!r.contains("result") || r["result"].value("isError", true))
          f.Fail("mcp " + tool + ": " + r.dump().substr(0, 300));
        else if (tool == "exec" && r["result"]["structuredContent"]["node"].is_object())
          f.Seen(r["result"]["structuredContent"]["node"].value("id", ""));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  // Tournaments: candidates race, one in three applied to the live tree.
  std::thread tournaments([&] {
    for (int i = 0; !stop; ++i) {
      std::vector<std::string> args = {"tournament", "--test", "test -e /a || test -e /b", "--jobs", "2"};
      if (i % 3) args.push_back("--no-apply");
      args.insert(args.end(), {"--", "echo a > /a", "sleep 0.05; echo b > /b"});
      json t = call("tournament", args);
      for (const auto& c : t.value("candidates", json::array()))
        if (c.contains("node") && c["node"].is_object()) f.Seen(c["node"].value("id", ""));
      for (const auto& c : t.value("candidates", json::array()))
        if (c.contains("workspace") && c["workspace"].is_string() && c["workspace"] != "")
          call("tournament", {"workspace", "rm", c["workspace"].get<std::string>()});
    }
  });
  // Housekeeping: explicit snapshots, retention, gc, a look at history.
  std::thread keeper([&] {
    for (int i = 0; !stop; ++i) {
      json s = call("keeper", {"ctl", "snapshot", "message=stress " + std::to_string(i)});
      if (s.contains("node") && s["node"].is_object()) f.Seen(s["node"].value("id", ""));
      json r = call("keeper", {"retain", "--keep-last", "10", "--keep-within", "0"});
      for (const auto& n : r.value("dropped", json::array())) f.Dropped(n.value("id", ""));
      // Looked at after retain: what it kept must survive the gc that
      // follows. (Looked at before, nodes made in between pushed the seen
      // ones out of the last 10 on a slow machine, leaving few to check.)
      json log = call("keeper", {"log", "-n", "30"});
      for (const auto& n : log.value("nodes", json::array())) f.Seen(n.value("id", ""));
      call("keeper", {"gc"});
      call("keeper", {"status"});
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(StressSeconds()));
  // A slow machine (or a sanitizer build) does less in that time; the
  // assertions below need more than 10 nodes seen and not dropped to mean
  // anything, so the load goes on until there are (at most 9 times as long).
  WaitFor([&] { return f.KeptNodes().size() > 10; }, StressSeconds() * 9000);
  stop = true;
  for (std::thread* t : {&writer, &fork1, &fork2, &tournaments, &keeper, &bisects, &views, &mcp}) t->join();
  daemon.Signal(SIGTERM);
  CHECK(daemon.Wait(30000) == 0);

  for (const auto& failure : f.failures()) FAIL_CHECK(failure);
  CHECK(f.count() == 0);
  json log = JsonAs(as, root, {"log", "-n", "1000000"});
  std::set<std::string> present;
  for (const auto& n : log["nodes"]) present.insert(n.value("id", ""));
  size_t kept = 0;
  for (const auto& id : f.KeptNodes()) {
    INFO("node " + id + " was made and never dropped by retain");
    CHECK(present.count(id));
    ++kept;
  }
  CHECK(kept > 10);
  CmdResult fsck = RunAs(as, root, {"fsck", "--lowers"});
  INFO(fsck.Describe());
  CHECK(fsck.code == 0);
  json gc = JsonAs(as, root, {"gc"});
  CHECK(gc["scratch_removed"] == 0);  // the commands themselves left nothing behind
  CHECK(JsonAs(as, root, {"status"})["reclaimable"].empty());
}

}  // namespace

TEST_CASE("stress: capture with tournaments forks workspace-rm retain gc and ctl snapshot at once (root)", "[cli][lifecycle][stress][root][slow]") {
  if (!IsRoot()) Skip("needs root (runs the binary as root and as uid 65534)");
  Stress(As::kRoot);
}

TEST_CASE("stress: capture with tournaments forks workspace-rm retain gc and ctl snapshot at once (uid 65534)", "[cli][lifecycle][stress][root][slow]") {
  if (!IsRoot()) Skip("needs root to run the binary as uid 65534 on a repository it owns");
  Stress(As::kNobody);
}

}  // namespace agentenv::test
