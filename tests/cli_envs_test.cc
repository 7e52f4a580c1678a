// Environments over HTTP: the live tree at /mcp and each workspace at
// /w/NAME/mcp, each its own agent's, reached at once, on a busybox tree.
// Each test case runs once per user (Users(); the user is named in a
// failure's messages): the daemon, supervise and every command as root on a
// repository root owns (an env's user namespace maps every id), then as
// uid 65534 on one it owns (rootless: an env maps that one id to its root).
// The workspaces' overlays are userxattr overlays either way. When the
// tests do not run as root, only the second runs, as the caller.
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/cli_exec_testutil.h"
#include "tests/mcp_http_testutil.h"
#include "common/sha256.h"
#include "common/unique_fd.h"

namespace agentenv::test {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

bool IsError(const json& reply) { return reply.contains("result") && reply["result"].value("isError", false); }
std::string Text(const json& reply) {
  return reply.contains("result") ? reply["result"]["content"][0].value("text", "") : reply.dump();
}

// A repository owned by `as` and its daemon, run as `as`, serving --listen
// 127.0.0.1:0; Fork(name) forks HEAD over the live tree's endpoint, checked
// to announce the workspace's. With `token`, the listener requires one
// (--token-file <root>/http-token).
struct Served {
  explicit Served(As as, bool token = false, std::vector<std::string> extra = {})
      : as(as), root(BusyboxRepo(tmp, {}, as)), d(as, root, Args(token, std::move(extra))), port(ListenPort(d.LogPath())) {
    struct stat st {};  // /proc/PID is owned by the process's uid
    REQUIRE(::stat(("/proc/" + std::to_string(d.child().pid())).c_str(), &st) == 0);
    REQUIRE(st.st_uid == (as == As::kNobody && IsRoot() ? 65534u : ::geteuid()));
    if (!token) return;
    std::string t = ReadFile(root / "http-token");
    while (!t.empty() && t.back() == '\n') t.pop_back();
    op = {{"Authorization", "Bearer " + t}};
  }
  std::vector<std::string> Args(bool token, std::vector<std::string> extra) {
    std::vector<std::string> a = {"--listen", "127.0.0.1:0"};
    if (token) a.insert(a.end(), {"--token-file", (root / "http-token").string()});
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  As as;
  TempDir tmp;
  fs::path root;
  DaemonAs d;
  int port;
  httplib::Headers op;  // the operator's Authorization, when the listener requires a token
  void Fork(const std::string& name) {
    REQUIRE(port > 0);
    HttpMcp live(port, op);
    REQUIRE(live.Initialize());
    json forked = live.Tool("fork", {{"name", name}});
    INFO(forked.dump());
    REQUIRE(forked.value("endpoint", "") == "/w/" + name + "/mcp");
  }
  fs::path Upper(const std::string& name) const { return root / "workspaces" / name / "upper"; }
};

}  // namespace

TEST_CASE("cli serve --listen: two clients on two workspace endpoints run their execs at the same time", "[cli][serve][mcp][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  s.Fork("a");
  s.Fork("b");
  HttpMcp a(s.port, {}, "/w/a/mcp"), b(s.port, {}, "/w/b/mcp");
  REQUIRE(a.Initialize());
  REQUIRE(b.Initialize());
  json ra, rb;
  double ms_a = 0, ms_b = 0;
  const auto t0 = Clock::now();
  std::thread ta([&] {
    ra = a.Tool("exec", {{"command", "sleep 2; echo a > /root/mine"}});
    ms_a = MsSince(t0);
  });
  std::thread tb([&] {
    rb = b.Tool("exec", {{"command", "sleep 2; echo b > /root/mine"}});
    ms_b = MsSince(t0);
  });
  ta.join();
  tb.join();
  const double wall = MsSince(t0);
  WARN("two execs of sleep 2 on two workspace endpoints: " << ms_a << " ms and " << ms_b << " ms, " << wall << " ms for both");
  INFO(ra.dump() << "\n" << rb.dump());
  REQUIRE(ra.value("exit_code", -1) == 0);
  REQUIRE(rb.value("exit_code", -1) == 0);
  CHECK(wall >= 2000);
  CHECK(wall < 3500);  // one after the other would be 4 s and more
  // Each acted on its own workspace, none on the live tree.
  CHECK(ReadFile(s.Upper("a") / "root/mine") == "a\n");
  CHECK(ReadFile(s.Upper("b") / "root/mine") == "b\n");
  CHECK(!fs::exists(Work(s.root) / "root/mine"));
  // Its node is on its own lane: log there starts with it and ends at the
  // live tree's history it was forked from.
  json lane = a.Tool("log", {{"limit", 5}});
  INFO(lane.dump());
  REQUIRE(lane["nodes"].size() >= 2);
  CHECK(lane["nodes"][0]["id"] == ra["node"]["id"]);
  for (const auto& n : lane["nodes"]) CHECK(n["id"] != rb["node"]["id"]);
}

TEST_CASE("cli serve --listen: a workspace endpoint's tools act on it: snapshot, diff, log, and its session is its own", "[cli][serve][mcp][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  s.Fork("a");
  HttpMcp a(s.port, {}, "/w/a/mcp");
  REQUIRE(a.Initialize());
  REQUIRE(a.Tool("exec", {{"command", "echo x > /etc/new"}, {"snapshot", false}}).value("exit_code", -1) == 0);
  json diff = a.Tool("diff", json::object());
  INFO(diff.dump());
  bool added = false;
  for (const auto& c : diff["changes"]) added |= c["path"] == "etc/new" && c["op"] == "+";
  CHECK(added);
  json snap = a.Tool("snapshot", {{"message", "in a"}});
  INFO(snap.dump());
  REQUIRE(snap.value("created", false));
  CHECK(a.Tool("log", {{"limit", 1}})["nodes"][0]["id"] == snap["node"]["id"]);
  CHECK(a.Tool("diff", json::object())["changes"].empty());  // recorded: nothing left to diff
  // HEAD~N counts along the workspace's lane, not the live tree's.
  json step = a.Tool("diff", {{"from", "HEAD~1"}, {"to", "HEAD"}});
  INFO(step.dump());
  bool in_step = false;
  for (const auto& c : step["changes"]) in_step |= c["path"] == "etc/new";
  CHECK(in_step);
  // The live tree saw none of it; its HEAD did not move.
  CHECK(!fs::exists(Work(s.root) / "etc/new"));
  HttpMcp live(s.port);
  REQUIRE(live.Initialize());
  CHECK(live.Tool("head", json::object())["node"]["id"] != snap["node"]["id"]);

  // Another environment is not reachable from here, the live tree's
  // actions are refused, and nothing happened for either.
  json other = a.Request("tools/call", {{"name", "exec"}, {"arguments", {{"command", "echo > /x"}, {"workspace", "b"}}}});
  CHECK(IsError(other));
  CHECK(Text(other).find("workspace 'a' only") != std::string::npos);
  json status = a.Request("tools/call", {{"name", "status"}, {"arguments", json::object()}});
  CHECK(IsError(status));
  CHECK(Text(status).find("/mcp") != std::string::npos);
  CHECK(ReadFile(s.Upper("a") / "etc/new") == "x\n");

  // rollback puts the workspace back along its lane, unsaved changes saved
  // first; the saved node brings them back.
  REQUIRE(a.Tool("exec", {{"command", "echo y > /etc/unsaved"}, {"snapshot", false}}).value("exit_code", -1) == 0);
  json back = a.Tool("rollback", {{"ref", "HEAD~1"}});
  INFO(back.dump());
  REQUIRE(back["saved"].is_string());
  CHECK(!fs::exists(s.Upper("a") / "etc/new"));
  CHECK(!fs::exists(s.Upper("a") / "etc/unsaved"));
  CHECK(a.Tool("exec", {{"command", "cat /etc/new 2>&1; true"}, {"snapshot", false}}).value("stdout", "").find("x") == std::string::npos);
  json again = a.Tool("rollback", {{"ref", back["saved"]}});
  INFO(again.dump());
  CHECK(again["saved"].is_null());
  CHECK(a.Tool("exec", {{"command", "cat /etc/unsaved /etc/new"}, {"snapshot", false}}).value("stdout", "") == "y\nx\n");
  CHECK(!fs::exists(Work(s.root) / "etc/unsaved"));

  // A session is answered on the endpoint that made it only.
  httplib::Client c("127.0.0.1", s.port);
  httplib::Headers h = {{"Mcp-Session-Id", a.session()}, {"Accept", "application/json, text/event-stream"}};
  json ping = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "ping"}};
  auto on_live = c.Post("/mcp", h, ping.dump(), "application/json");
  REQUIRE(on_live);
  CHECK(on_live->status == 404);
  auto on_own = c.Post("/w/a/mcp", h, ping.dump(), "application/json");
  REQUIRE(on_own);
  CHECK(on_own->status == 200);
  // A workspace that does not exist has no endpoint.
  HttpMcp none(s.port, {}, "/w/nope/mcp");
  CHECK(!none.Initialize());
  auto r = none.Post({{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", json::object()}});
  REQUIRE(r);
  CHECK(r->status == 404);
}

namespace {

json InitializeMessage() {
  return {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"},
          {"params", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
}

// A new token's secret: `token create args...`, by the repository's owner.
std::string Secret(const Served& s, std::vector<std::string> args) {
  args.insert(args.begin(), "token");
  args.insert(args.begin() + 1, "create");
  args.push_back("--json");
  CmdResult r = RunAs(s.as, s.root, args);
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return r.Json()["secret"].get<std::string>();
}

httplib::Headers Bearer(const std::string& secret) { return {{"Authorization", "Bearer " + secret}}; }

int Status(int port, const std::string& path, const httplib::Headers& h, const std::string& method = "POST") {
  httplib::Client c("127.0.0.1", port);
  auto r = method == "GET" ? c.Get(path.c_str(), h) : c.Post(path.c_str(), h, InitializeMessage().dump(), "application/json");
  return r ? r->status : -1;
}

}  // namespace

TEST_CASE("cli token: a scoped token reaches its own environment only, the operator's all, unknown ones none", "[cli][serve][mcp][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  s.Fork("a");
  s.Fork("b");
  const std::string to_a = Secret(s, {"--env", "a"});
  const std::string to_live = Secret(s, {});

  HttpMcp a(s.port, Bearer(to_a), "/w/a/mcp");
  REQUIRE(a.Initialize());
  CHECK(a.Tool("exec", {{"command", "echo a > /root/a"}}).value("exit_code", -1) == 0);
  HttpMcp live(s.port, Bearer(to_live));
  REQUIRE(live.Initialize());
  CHECK(live.Tool("log", {{"limit", 1}}).contains("nodes"));

  // Another workspace, one that does not exist, the live tree, the web
  // DVR: 403, the same answer whether the name exists or not.
  httplib::Client c("127.0.0.1", s.port);
  auto b = c.Post("/w/b/mcp", Bearer(to_a), InitializeMessage().dump(), "application/json");
  auto nope = c.Post("/w/nope/mcp", Bearer(to_a), InitializeMessage().dump(), "application/json");
  REQUIRE(b);
  REQUIRE(nope);
  CHECK(b->status == 403);
  CHECK(nope->status == 403);
  CHECK(b->body == nope->body);
  CHECK(b->body.find("b") == nope->body.find("b"));  // no name in it
  CHECK(Status(s.port, "/mcp", Bearer(to_a)) == 403);
  // The live tree's token cannot name a workspace from its endpoint either.
  json reach = live.Request("tools/call", {{"name", "exec"}, {"arguments", {{"command", "echo > /root/sneak"}, {"workspace", "b"}}}});
  CHECK(IsError(reach));
  CHECK(!fs::exists(s.Upper("b") / "root/sneak"));
  CHECK(Status(s.port, "/w/a/mcp", Bearer(to_live)) == 403);
  // The DVR's page holds no data and is served to anyone; its data is the
  // operator's.
  CHECK(Status(s.port, "/", Bearer(to_a), "GET") == 200);
  CHECK(Status(s.port, "/api/timeline", Bearer(to_a), "GET") == 403);
  CHECK(Status(s.port, "/api/session", Bearer(to_a), "POST") == 403);
  // Its session is its own: the operator's token does not continue it.
  httplib::Headers with_session = s.op;
  with_session.emplace("Mcp-Session-Id", a.session());
  json ping = {{"jsonrpc", "2.0"}, {"id", 9}, {"method", "ping"}};
  CHECK(c.Post("/w/a/mcp", with_session, ping.dump(), "application/json")->status == 404);
  // The operator's maintenance is not a scoped token's, and nothing happens.
  json rm = a.Request("tools/call", {{"name", "workspace_rm"}, {"arguments", {{"name", "b"}}}});
  CHECK(IsError(rm));
  CHECK(Text(rm).find("operator") != std::string::npos);
  CHECK(fs::exists(s.root / "workspaces/b"));
  // The file tools there read nodes only and write nothing: without a ref
  // they would reach the live tree.
  json write = a.Request("tools/call", {{"name", "write_file"}, {"arguments", {{"path", "root/escape"}, {"content", "x"}}}});
  CHECK(IsError(write));
  CHECK(Text(write).find("/mcp") != std::string::npos);
  CHECK(!fs::exists(s.root / "work/current/root/escape"));
  CHECK(IsError(a.Request("tools/call", {{"name", "read_file"}, {"arguments", {{"path", "etc/hosts"}}}})));
  CHECK(!IsError(a.Request("tools/call", {{"name", "read_file"}, {"arguments", {{"path", "etc/hosts"}, {"ref", "HEAD"}}}})));
  // A token that is none of ours: 401.
  CHECK(Status(s.port, "/w/a/mcp", Bearer("aet_" + std::string(64, '0'))) == 401);
  // The operator's reaches everything.
  CHECK(Status(s.port, "/w/b/mcp", s.op) == 200);
  CHECK(Status(s.port, "/mcp", s.op) == 200);
  CHECK(Status(s.port, "/api/timeline", s.op, "GET") == 200);
}

TEST_CASE("cli token: a scoped token sees its environment's history only: another's nodes, tips, tags and names stay hidden", "[cli][serve][mcp][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  s.Fork("agent-one");
  s.Fork("agent-two");
  // The other agent's work: a node, tagged, that holds a secret.
  HttpMcp two(s.port, s.op, "/w/agent-two/mcp");
  REQUIRE(two.Initialize());
  json made = two.Tool("exec", {{"command", "echo s3cret > /root/theirs"}});
  INFO(made.dump());
  REQUIRE(made["node"].is_object());
  const std::string theirs = made["node"]["id"];
  CHECK(!IsError(two.Request("tools/call", {{"name", "tag"}, {"arguments", {{"name", "their-tag"}}}})));
  // Ours, through our token.
  HttpMcp one(s.port, Bearer(Secret(s, {"--env", "agent-one"})), "/w/agent-one/mcp");
  REQUIRE(one.Initialize());
  json mine = one.Tool("exec", {{"command", "echo ours > /root/mine"}});
  REQUIRE(mine["node"].is_object());
  const std::string ours = mine["node"]["id"];

  // Their node is not found, in the words used for one that does not exist.
  const std::string made_up = "0123456789ab";
  for (const auto& [tool, key] : std::vector<std::pair<std::string, std::string>>{
           {"show", "ref"}, {"read_file", "ref"}, {"list_dir", "ref"}, {"diff", "from"}, {"file_history", "ref"},
           {"rollback", "ref"}, {"tag", "ref"}}) {
    json args = {{key, theirs.substr(0, 12)}};
    if (tool == "read_file" || tool == "file_history") args["path"] = "root/theirs";
    if (tool == "list_dir") args["path"] = "root";
    if (tool == "tag") args["name"] = "mine-now";
    json hidden = one.Request("tools/call", {{"name", tool}, {"arguments", args}});
    args[key] = made_up;
    json missing = one.Request("tools/call", {{"name", tool}, {"arguments", args}});
    INFO(tool << ": " << hidden.dump() << " vs " << missing.dump());
    CHECK(IsError(hidden));
    std::string a = Text(hidden);
    if (size_t at = a.find(theirs.substr(0, 12)); at != std::string::npos) a.replace(at, 12, made_up);
    CHECK(a == Text(missing));
  }
  CHECK(one.Request("resources/read", {{"uri", "agentenv://node/" + theirs.substr(0, 12) + "/root/theirs"}})
            .contains("error"));
  // Listings leave them out: log, tips, tags, workspaces, resources.
  const std::string everything = one.Tool("log", {{"limit", 100}}).dump() + one.Tool("branches", json::object()).dump() +
                                 one.Tool("tag", json::object()).dump() + one.Tool("workspaces", json::object()).dump() +
                                 one.Request("resources/list", json::object()).dump();
  CHECK(everything.find(theirs.substr(0, 12)) == std::string::npos);
  CHECK(everything.find("agent-two") == std::string::npos);
  CHECK(everything.find("their-tag") == std::string::npos);
  CHECK(everything.find(ours.substr(0, 12)) != std::string::npos);
  // Their tag is neither moved nor deleted from here; fork is the operator's.
  CHECK(Text(one.Request("tools/call", {{"name", "tag"}, {"arguments", {{"name", "their-tag"}, {"force", true}}}}))
            .find("taken") != std::string::npos);
  CHECK(IsError(one.Request("tools/call", {{"name", "tag"}, {"arguments", {{"name", "their-tag"}, {"delete", true}}}})));
  CHECK(IsError(one.Request("tools/call", {{"name", "fork"}, {"arguments", {{"name", "agent-three"}}}})));
  CHECK(!fs::exists(s.root / "workspaces/agent-three"));
  CHECK(two.Tool("tag", json::object()).dump().find(theirs) != std::string::npos);
  // Its own: head is the workspace's last node, HEAD~1 its base (the shared
  // past, visible), and the digest is the live tree's, not a workspace's.
  CHECK(one.Tool("head", json::object())["node"]["id"] == ours);
  CHECK(!IsError(one.Request("tools/call", {{"name", "show"}, {"arguments", {{"ref", "HEAD~1"}}}})));
  CHECK(IsError(one.Request("tools/call", {{"name", "digest"}, {"arguments", json::object()}})));
  // The live tree's token sees the live tree's nodes, none of a workspace's.
  HttpMcp live(s.port, Bearer(Secret(s, {})));
  REQUIRE(live.Initialize());
  const std::string seen_live = live.Tool("log", {{"limit", 100}}).dump() + live.Tool("digest", json::object()).dump();
  CHECK(seen_live.find(theirs.substr(0, 12)) == std::string::npos);
  CHECK(seen_live.find(ours.substr(0, 12)) == std::string::npos);
  CHECK(seen_live.find("agent-") == std::string::npos);
  CHECK(live.Tool("log", {{"limit", 100}})["nodes"].size() >= 1);
  // The operator's token sees all.
  HttpMcp op(s.port, s.op);
  REQUIRE(op.Initialize());
  CHECK(op.Tool("show", {{"ref", theirs.substr(0, 12)}})["node"]["id"] == theirs);
}

TEST_CASE("cli token: a read-only token reads history and files but runs and changes nothing", "[cli][serve][mcp][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  s.Fork("a");
  HttpMcp ro(s.port, Bearer(Secret(s, {"--env", "a", "--read-only"})), "/w/a/mcp");
  REQUIRE(ro.Initialize());
  CHECK(ro.Tool("log", {{"limit", 3}})["nodes"].size() >= 1);
  CHECK(ro.Tool("diff", json::object()).contains("changes"));
  json read = ro.Request("resources/read", {{"uri", "agentenv://node/HEAD/etc/hosts"}});
  CHECK(read.contains("result"));
  for (const auto& [tool, args] : std::vector<std::pair<std::string, json>>{
           {"exec", {{"command", "echo x > /root/ro"}}},
           {"snapshot", {{"allow_empty", true}}},
           {"fork", {{"name", "c"}}},
           {"tag", {{"name", "t1"}}}}) {
    json r = ro.Request("tools/call", {{"name", tool}, {"arguments", args}});
    INFO(tool << ": " << r.dump());
    CHECK(IsError(r));
    CHECK(Text(r).find("read-only") != std::string::npos);
  }
  CHECK(!fs::exists(s.Upper("a") / "root/ro"));
  CHECK(!fs::exists(s.root / "workspaces/c"));
}

TEST_CASE("cli token: stored hashed and listed without the secret, revoked and expired tokens are refused", "[cli][serve][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  s.Fork("a");
  const std::string secret = Secret(s, {"--env", "a"});
  REQUIRE(secret.starts_with("aet_"));
  // On disk: the hash, never the secret, readable by the owner only.
  const fs::path file = s.root / "tokens";
  const std::string stored = ReadFile(file);
  CHECK(stored.find(secret) == std::string::npos);
  CHECK(stored.find(secret.substr(4)) == std::string::npos);
  CHECK(stored.find(HexEncode(Sha256::Of({reinterpret_cast<const uint8_t*>(secret.data()), secret.size()}))) != std::string::npos);
  CHECK((fs::status(file).permissions() & (fs::perms::group_all | fs::perms::others_all)) == fs::perms::none);
  CmdResult ls = RunAs(s.as, s.root, {"token", "ls", "--json"});
  INFO(ls.Describe());
  REQUIRE(ls.code == 0);
  CHECK(ls.out.find(secret.substr(4, 16)) == std::string::npos);
  json listed = ls.Json();
  REQUIRE(listed["tokens"].size() == 1);
  CHECK(!listed["tokens"][0].contains("hash"));
  CHECK(listed["tokens"][0]["env"] == "a");
  const std::string id = listed["tokens"][0]["id"];

  CHECK(Status(s.port, "/w/a/mcp", Bearer(secret)) == 200);
  CHECK(RunAs(s.as, s.root, {"token", "revoke", id}).code == 0);
  CHECK(Status(s.port, "/w/a/mcp", Bearer(secret)) == 401);
  // Bad input changes nothing.
  CHECK(RunAs(s.as, s.root, {"token", "create", "--env", "nope"}).code != 0);
  CHECK(RunAs(s.as, s.root, {"token", "create", "--expires", "soon"}).code != 0);
  CHECK(RunAs(s.as, s.root, {"token", "ls", "--json"}).Json()["tokens"].empty());
}

TEST_CASE("cli serve --listen: execs of one environment queue, the wait is reported and counts against the timeout", "[cli][serve][mcp][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  s.Fork("a");
  HttpMcp first(s.port, {}, "/w/a/mcp"), second(s.port, {}, "/w/a/mcp");
  REQUIRE(first.Initialize());
  REQUIRE(second.Initialize());
  json r1, r2;
  const auto t0 = Clock::now();
  std::thread t1([&] { r1 = first.Tool("exec", {{"command", "echo > /root/one; sleep 2"}}); });
  REQUIRE(WaitFor([&] { return fs::exists(s.Upper("a") / "root/one"); }, 10000));
  // Queued about 2 s behind the first, then given what is left of 3 s.
  r2 = second.Tool("exec", {{"command", "sleep 2; echo > /root/two"}, {"timeout_s", 3}});
  t1.join();
  INFO(r1.dump() << "\n" << r2.dump());
  REQUIRE(r1.value("exit_code", -1) == 0);
  CHECK(r1.value("queued_ms", 99999) < 500);
  CHECK(r2.value("queued_ms", 0) >= 1000);
  CHECK(r2.value("timed_out", false));
  CHECK(r2.value("duration_ms", 99999) < 2000);
  CHECK(!fs::exists(s.Upper("a") / "root/two"));
  WARN("second exec queued " << r2.value("queued_ms", 0) << " ms, then ran " << r2.value("duration_ms", 0) << " ms; "
       << MsSince(t0) << " ms in all");

  // One that stays queued for its whole timeout never runs.
  std::thread t3([&] { r1 = first.Tool("exec", {{"command", "sleep 2"}}); });
  HttpMcp probe(s.port, {}, "/w/a/mcp");
  REQUIRE(probe.Initialize());
  REQUIRE(WaitFor([&] {
    json l = probe.Tool("workspaces", json::object());
    return l.contains("workspaces") && l["workspaces"].size() == 1 && l["workspaces"][0].value("busy", false);
  }, 10000));
  json never = second.Request("tools/call", {{"name", "exec"}, {"arguments", {{"command", "echo > /root/never"}, {"timeout_s", 0.5}}}});
  t3.join();
  INFO(never.dump());
  CHECK(IsError(never));
  CHECK(Text(never).find("did not run") != std::string::npos);
  CHECK(!fs::exists(s.Upper("a") / "root/never"));
}

TEST_CASE("cli serve --listen: a snapshot: false exec on the live tree does not queue behind another exec", "[cli][serve][mcp][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  HttpMcp a(s.port), b(s.port);
  REQUIRE(a.Initialize());
  REQUIRE(b.Initialize());
  json ra, rb;
  const auto t0 = Clock::now();
  std::thread ta([&] { ra = a.Tool("exec", {{"command", "echo > /root/running; sleep 2"}}); });
  REQUIRE(WaitFor([&] { return fs::exists(Work(s.root) / "root/running"); }, 10000));
  rb = b.Tool("exec", {{"command", "sleep 1"}, {"snapshot", false}});
  const double b_done = MsSince(t0);
  ta.join();
  INFO(ra.dump() << "\n" << rb.dump());
  REQUIRE(rb.value("exit_code", -1) == 0);
  CHECK(rb.value("queued_ms", 99999) < 300);
  CHECK(b_done < 1900);  // done before the first exec's 2 s
  CHECK(ra.value("exit_code", -1) == 0);
}

namespace {

// POSTs `msg` on a connection of its own and returns it: closing it is
// a client that went away mid-request.
UniqueFd RawPost(int port, const std::string& path, const std::string& session, const json& msg) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(fd);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  const std::string body = msg.dump();
  const std::string req = "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Accept: application/json, text/event-stream\r\nMcp-Session-Id: " + session +
                          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(::write(fd.get(), req.data(), req.size()) == ssize_t(req.size()));
  return fd;
}

// Whether the newest nodes hold one labelled as the cancelled exec of `command`.
bool CancelledNode(HttpMcp& m, const std::string& command) {
  const json log = m.Tool("log", {{"limit", 5}});  // kept: a range over a temporary's member dangles
  for (const auto& n : log["nodes"])
    if (n.value("title", "").find("cancelled") != std::string::npos && n.value("title", "").find(command) != std::string::npos)
      return true;
  return false;
}

}  // namespace

TEST_CASE("cli serve --listen: a client whose connection drops, or that DELETEs its session, has its exec killed and recorded as cancelled", "[cli][serve][mcp][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  HttpMcp m(s.port), watcher(s.port);
  REQUIRE(m.Initialize());
  REQUIRE(watcher.Initialize());
  {
    UniqueFd conn = RawPost(s.port, "/mcp", m.session(),
                            {{"jsonrpc", "2.0"}, {"id", 7}, {"method", "tools/call"},
                             {"params", {{"name", "exec"}, {"arguments", {{"command", "echo > /root/started; sleep 30; echo > /root/after"}}}}}});
    REQUIRE(WaitFor([&] { return fs::exists(Work(s.root) / "root/started"); }, 10000));
  }  // the client is gone
  const auto t0 = Clock::now();
  CHECK(WaitFor([&] { return CancelledNode(watcher, "sleep 30; echo > /root/after"); }, 10000));
  WARN("dropped client's exec recorded as cancelled after " << MsSince(t0) << " ms");
  CHECK(!fs::exists(Work(s.root) / "root/after"));

  json reply;
  std::thread t([&] { reply = m.Request("tools/call", {{"name", "exec"}, {"arguments", {{"command", "echo > /root/started2; sleep 30; echo > /root/after2"}}}}); });
  REQUIRE(WaitFor([&] { return fs::exists(Work(s.root) / "root/started2"); }, 10000));
  httplib::Client c("127.0.0.1", s.port);
  auto del = c.Delete("/mcp", {{"Mcp-Session-Id", m.session()}});
  REQUIRE(del);
  CHECK(del->status == 200);
  t.join();
  CHECK(!reply.contains("result"));  // cancelled: no reply
  CHECK(WaitFor([&] { return CancelledNode(watcher, "sleep 30; echo > /root/after2"); }, 10000));
  CHECK(!fs::exists(Work(s.root) / "root/after2"));
}

TEST_CASE("cli serve --listen: exec sessions, jobs, ps and kill are each MCP session's own, the operator's token sees all", "[cli][serve][mcp][exec][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  const std::string live = Secret(s, {});
  HttpMcp a(s.port, Bearer(live)), b(s.port, Bearer(live)), op(s.port, s.op);
  REQUIRE(a.Initialize());
  REQUIRE(b.Initialize());
  REQUIRE(op.Initialize());
  REQUIRE(a.Tool("exec", {{"command", "cd /etc"}, {"session", "t"}, {"snapshot", false}}).value("exit_code", -1) == 0);
  json other = b.Tool("exec", {{"command", "pwd"}, {"session", "t"}, {"snapshot", false}});
  CHECK(other.value("stdout", "") == "/\n");
  json own = a.Tool("exec", {{"command", "pwd"}, {"session", "t"}, {"snapshot", false}});
  CHECK(own.value("stdout", "") == "/etc\n");
  CHECK(own["session"].value("id", "") == "t");

  json spawned = a.Tool("spawn", {{"command", "sleep 60"}});
  INFO(spawned.dump());
  const uint64_t job = spawned.value("job", 0);
  REQUIRE(job > 0);
  auto lists = [&](HttpMcp& m) {
    const json ps = m.Tool("ps", json::object());
    for (const auto& j : ps["jobs"])
      if (j.value("job", uint64_t{0}) == job) return true;
    return false;
  };
  CHECK(lists(a));
  CHECK(!lists(b));
  CHECK(b.Tool("kill", {{"all", true}})["killed"].empty());
  CHECK(IsError(b.Request("tools/call", {{"name", "kill"}, {"arguments", {{"job", job}}}})));
  // Nor does another session read its output; its own does.
  CHECK(IsError(b.Request("tools/call", {{"name", "job_output"}, {"arguments", {{"job", job}}}})));
  CHECK(!IsError(a.Request("tools/call", {{"name", "job_output"}, {"arguments", {{"job", job}}}})));
  bool running = false;
  const json ps = a.Tool("ps", json::object());
  for (const auto& j : ps["jobs"])
    if (j.value("job", uint64_t{0}) == job) running = j.value("running", false);
  CHECK(running);
  // The operator sees and stops it.
  CHECK(lists(op));
  json killed = op.Tool("kill", {{"job", job}});
  INFO(killed.dump());
  REQUIRE(killed["killed"].size() == 1);
  CHECK(killed["killed"][0] == job);
}

TEST_CASE("cli supervise --workspace: the agent runs in the workspace, which is captured automatically, debounced, the live tree untouched", "[cli][supervise][workspace][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp, {}, as);
  CmdResult forked = RunAs(as, root, {"fork", "--name", "a", "--json"});
  INFO(forked.Describe());
  REQUIRE(forked.code == 0);
  const std::string base = forked.Json()["workspace"]["base"];
  // Two bursts far apart (two nodes), then one write just before the
  // agent ends (delivered when supervise stops).
  CmdResult sup = RunAs(as, root,
                        {"supervise", "--workspace", "a", "--quiet-ms", "100", "--max-delay-ms", "1000", "--",
                         "/bin/sh", "-c",
                         "echo 1 > /root/x; echo 1 > /root/x2; sleep 1.5; echo 2 > /root/y; sleep 1.5; echo 3 > /root/z"},
                        60000);
  INFO(sup.Describe());
  REQUIRE(sup.code == 0);
  CHECK(!fs::exists(Work(root) / "root/x"));
  const std::string head = RunAs(as, root, {"workspace", "ls", "--json"}).Json()["workspaces"][0]["head"];
  REQUIRE(head != base);
  // The lane: z's node, y's, x's, then the base.
  std::vector<std::string> lane;
  for (std::string at = head; at != base && lane.size() < 6;) {
    lane.push_back(at);
    json shown = RunAs(as, root, {"show", at, "--json"}).Json();
    at = shown["node"]["parent"].is_string() ? shown["node"]["parent"].get<std::string>() : base;
  }
  INFO("lane of " << lane.size() << " nodes");
  REQUIRE(lane.size() == 3);
  CHECK(RunAs(as, root, {"cat", lane[0], "root/z"}).out == "3\n");
  CHECK(RunAs(as, root, {"cat", lane[1], "root/y"}).out == "2\n");
  CHECK(RunAs(as, root, {"cat", lane[1], "root/z"}).code != 0);
  CHECK(RunAs(as, root, {"cat", lane[2], "root/x2"}).out == "1\n");
  CHECK(RunAs(as, root, {"cat", lane[2], "root/y"}).code != 0);
}

TEST_CASE("cli env ls: every environment with its endpoint, last node, running commands, disk use and tokens", "[cli][serve][token][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, true);
  REQUIRE(s.port > 0);
  s.Fork("a");
  const std::string to_a = Secret(s, {"--env", "a", "--read-only"});
  HttpMcp a(s.port, s.op, "/w/a/mcp");
  REQUIRE(a.Initialize());
  REQUIRE(a.Tool("exec", {{"command", "head -c 200000 /bin/busybox > /root/big"}}).value("exit_code", -1) == 0);
  std::thread running([&] { a.Tool("exec", {{"command", "echo > /root/started; sleep 3"}, {"snapshot", false}}); });
  REQUIRE(WaitFor([&] { return fs::exists(s.Upper("a") / "root/started"); }, 10000));
  CmdResult ls = RunAs(s.as, s.root, {"env", "ls", "--json"});
  INFO(ls.Describe());
  REQUIRE(ls.code == 0);
  json envs = ls.Json()["environments"];
  REQUIRE(envs.size() == 2);
  CHECK(envs[0]["name"] == "");
  CHECK(envs[0]["endpoint"] == "/mcp");
  CHECK(envs[0]["running"] == 0);
  CHECK(envs[1]["name"] == "a");
  CHECK(envs[1]["endpoint"] == "/w/a/mcp");
  CHECK(envs[1]["running"] == 1);
  CHECK(envs[1]["disk_bytes"].get<uint64_t>() >= 200000);
  CHECK(envs[1]["last"] != envs[1]["base"]);
  REQUIRE(envs[1]["tokens"].size() == 1);
  CHECK(envs[1]["tokens"][0]["read_only"] == true);
  CHECK(envs[0]["tokens"].empty());
  CHECK(RunAs(s.as, s.root, {"env", "ls"}).out.find("/w/a/mcp") != std::string::npos);
  // The operator's over MCP; not a scoped token's.
  HttpMcp op(s.port, s.op);
  REQUIRE(op.Initialize());
  CHECK(op.Tool("env_ls", json::object())["environments"].size() == 2);
  HttpMcp scoped(s.port, Bearer(to_a), "/w/a/mcp");
  REQUIRE(scoped.Initialize());
  CHECK(IsError(scoped.Request("tools/call", {{"name", "env_ls"}, {"arguments", json::object()}})));
  running.join();
}

TEST_CASE("cli serve --listen: kill -9 while two workspaces run execs leaves every environment consistent", "[cli][serve][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as);
  s.Fork("a");
  s.Fork("b");
  std::vector<std::thread> clients;
  for (const char* name : {"a", "b"})
    clients.emplace_back([&s, name] {
      HttpMcp m(s.port, {}, std::string("/w/") + name + "/mcp");
      if (m.Initialize()) m.Tool("exec", {{"command", "echo > /root/started; head -c 100000 /bin/busybox > /root/half; sleep 30"}});
    });
  REQUIRE(WaitFor([&] { return fs::exists(s.Upper("a") / "root/started") && fs::exists(s.Upper("b") / "root/started"); }, 10000));
  s.d.child().Kill();  // SIGKILL mid-exec, mid-everything
  for (auto& t : clients) t.join();
  for (const char* name : {"a", "b"})
    CHECK(WaitFor([&] {
      json l = RunAs(s.as, s.root, {"workspace", "ls", "--json"}).Json();
      for (const auto& w : l["workspaces"])
        if (w["name"] == name) return !w.value("busy", true);
      return false;
    }, 10000));
  CmdResult fsck = RunAs(s.as, s.root, {"fsck"});
  INFO(fsck.Describe());
  CHECK(fsck.code == 0);
  CmdResult lowers = RunAs(s.as, s.root, {"fsck", "--lowers"});
  INFO(lowers.Describe());
  CHECK(lowers.code == 0);
  // Each environment is usable again, with what its killed command wrote.
  CmdResult again = RunAs(s.as, s.root, {"exec", "--workspace", "a", "--", "/bin/sh", "-c", "cat /root/started && echo ok"});
  INFO(again.Describe());
  CHECK(again.code == 0);
  CHECK(again.out.find("ok") != std::string::npos);
  CHECK(RunAs(s.as, s.root, {"snap", "--workspace", "b", "-m", "after the kill"}).code == 0);
}

namespace {

// The nice value in a /proc/.../stat file (field 19; the command name in
// parentheses comes before, and may hold spaces).
int NiceIn(const fs::path& stat) {
  std::string line = ReadFile(stat);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return -100;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 19 && rest >> field; ++i) {
    if (i == 19) return std::stoi(field);
  }
  return -100;
}

}  // namespace

TEST_CASE("cli serve --listen: writers' work runs below reads: commands 10 + 5 nicer, and no thread is left below the server's priority", "[cli][serve][mcp][exec][envs]") {
  const As as = GENERATE(from_range(Users()));
  INFO(ModeName(as));
  Served s(as, false, {"--writer-nice", "10"});
  s.Fork("a");
  HttpMcp a(s.port, {}, "/w/a/mcp");
  REQUIRE(a.Initialize());
  const fs::path proc = "/proc/" + std::to_string(s.d.child().pid());
  const int base = NiceIn(proc / "stat");
  REQUIRE(base > -100);
  // The exec's thread runs 10 below (--writer-nice), the command 5 below that (--command-nice).
  json r = a.Tool("exec", {{"command", "read -r a b c d e f g h i j k l m n o p q r nice rest < /proc/self/stat; echo $nice"}});
  INFO(r.dump());
  CHECK(r.value("stdout", "") == std::to_string(std::min(base + 15, 19)) + "\n");
  // Once it answered, no thread of the server is below its priority: root
  // set it back, uid 65534 (which cannot raise a priority) ended the thread.
  auto all_at_base = [&] {
    for (const auto& t : fs::directory_iterator(proc / "task"))
      if (NiceIn(t.path() / "stat") != base) return false;
    return true;
  };
  CHECK(WaitFor(all_at_base, 5000));
  json log = a.Tool("log", {});
  CHECK(!IsError(log));
}

}  // namespace agentenv::test
