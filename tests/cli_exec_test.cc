// End-to-end tests of the process ops (exec, spawn, ps, kill) through the
// daemon socket, `agentenv ctl exec` and MCP, on a busybox tree. Everything
// runs as uid 65534 (the ops are rootless); as a non-root caller the tests
// run as that caller.
#include <catch2/catch.hpp>

#include <variant>

#include "tests/cli_exec_testutil.h"

namespace agentenv::test {
namespace {

std::string Base64Decode(const std::string& s) {
  const std::string a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t v = 0;
  int bits = 0;
  for (char c : s) {
    if (c == '=') break;
    v = v << 6 | uint32_t(a.find(c));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += char((v >> bits) & 0xFF);
    }
  }
  return out;
}

// The frames and the final response of one streamed request.
struct Streamed {
  std::vector<json> frames;
  json response;
  std::string Bytes(const std::string& stream) const {
    std::string s;
    for (const auto& f : frames) {
      if (f.value("frame", "") != stream) continue;
      s += f.contains("data") ? f["data"].get<std::string>() : Base64Decode(f.value("data_b64", ""));
    }
    return s;
  }
};

// The exec's frames and response, or the first thing that went wrong.
// No Catch2 assertion: it may run on a thread other than the test's.
std::variant<Streamed, std::string> TryExec(const fs::path& root, const json& args, int timeout_ms = 30000) {
  SocketClient c;
  if (!c.Connect(root / "agentenv.sock")) return "connect: " + std::string(std::strerror(errno));
  if (!c.Send(json{{"id", "x1"}, {"op", "exec"}, {"args", args}}.dump())) return "send: " + std::string(std::strerror(errno));
  Streamed s;
  for (;;) {
    json m = c.Receive(timeout_ms);
    if (!m.is_object()) return "no answer within " + std::to_string(timeout_ms) + " ms";
    if (m["id"] != "x1") return "a message for another request: " + m.dump();
    if (!m.contains("frame")) {
      s.response = m;
      return s;
    }
    s.frames.push_back(m);
  }
}

Streamed Exec(const fs::path& root, const json& args, int timeout_ms = 30000) {
  auto r = TryExec(root, args, timeout_ms);
  if (auto* error = std::get_if<std::string>(&r)) FAIL(*error);
  return std::get<Streamed>(std::move(r));
}

// An initialized `agentenv mcp` process as 65534; Call returns the tool
// call's result (content, structuredContent, isError).
class NobodyMcp : public Mcp {
 public:
  explicit NobodyMcp(const fs::path& root) : Mcp(root, AsNobody({})) {
    REQUIRE(Request("initialize", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                                   {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
                .contains("result"));
  }
  json Call(const std::string& tool, const json& args) {
    json r = Mcp::Call(tool, args);
    INFO(tool << " " << args.dump() << " -> " << r.dump().substr(0, 800));
    REQUIRE(r.contains("result"));
    return r["result"];
  }
};

}  // namespace

TEST_CASE("cli exec: the daemon streams output frames, passes the exit code and snapshots with the command", "[cli][exec]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);

  // Text, stderr, a character split across two writes, and bytes that are not UTF-8.
  Streamed s = Exec(root, {{"argv", {"/bin/sh", "-c",
                                      "echo out1; echo err1 >&2; printf '\\303'; sleep 0.2; printf '\\251\\n';"
                                      "printf '\\377\\376bin\\n'; echo made > /made.txt; exit 3"}}});
  INFO(s.response.dump());
  REQUIRE(s.response.value("ok", false));
  REQUIRE_FALSE(s.frames.empty());
  CHECK(s.frames[0].value("frame", "") == "started");
  CHECK(s.frames[0].value("pid", 0) > 0);
  CHECK(s.Bytes("stdout") == "out1\n\xc3\xa9\n\xff\xfe" "bin\n");
  CHECK(s.Bytes("stderr") == "err1\n");
  bool text_split_joined = false, binary_b64 = false;
  for (const auto& f : s.frames) {
    if (f.contains("data") && f["data"].get<std::string>().find("\xc3\xa9") != std::string::npos) text_split_joined = true;
    if (f.contains("data_b64")) binary_b64 = true;
  }
  CHECK(text_split_joined);
  CHECK(binary_b64);
  const json& r = s.response["result"];
  CHECK(r["exit_code"] == 3);
  CHECK(r["signal"] == 0);
  CHECK(r["stdout_bytes"] == 14);
  CHECK_FALSE(r.contains("stdout"));  // streamed, not collected
  REQUIRE(r["node"].is_object());
  CHECK(r["node"].value("title", "").rfind("exec: echo out1", 0) == 0);
  CHECK(ReadFile(Work(root) / "made.txt") == "made\n");
  json head = Request(root, "head", json::object());
  CHECK(head["result"]["node"]["id"] == r["node"]["id"]);

  // ctl exec prints the output live and exits with the command's code.
  CmdResult c = Run(root, {"ctl", "exec", "--", "/bin/sh", "-c", "echo via ctl; echo oops >&2; exit 7"});
  INFO(c.Describe());
  CHECK(c.code == 7);
  CHECK(c.out == "via ctl\n");
  CHECK(c.err.find("oops\n") == 0);
  c = Run(root, {"ctl", "exec", "--json", "--", "/bin/sh", "-c", "printf '\\377'; kill -9 $$"});
  INFO(c.Describe());
  CHECK(c.code == 128 + 9);
  json j = json::parse(c.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["signal"] == 9);
  CHECK(j["exit_code"].is_null());
  CHECK_FALSE(j.contains("stdout"));  // not UTF-8: base64
  CHECK(j["stdout_b64"] == "/w==");
  // -c takes a shell line; with --session its cd and export persist.
  CHECK(Run(root, {"ctl", "exec", "--session", "t", "-c", "cd /etc && export X=1"}).code == 0);
  c = Run(root, {"ctl", "exec", "--session", "t", "-c", "echo $X; pwd"});
  CHECK(c.out == "1\n/etc\n");
  CHECK(Run(root, {"ctl", "exec", "-c", "echo $X; pwd"}).out == "\n/\n");
  CHECK(Run(root, {"ctl", "exec", "-c", "true", "--", "true"}).code == 2);
}

TEST_CASE("cli exec: as root, memory and pids limits are enforced", "[cli][exec]") {
  if (::geteuid() != 0)
    Skip("cgroup limits need root on this host (as another user they fail plainly, tested above)");
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  Daemon d(root, {"--no-capture"});  // as root, unlike the other tests
  REQUIRE(d.WaitReady());
  // A shell variable of 200 MB in a 32 MiB env.
  Streamed s = Exec(root, {{"command", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo survived"},
                           {"memory_bytes", 32 << 20}, {"snapshot", false}});
  INFO(s.response.dump());
  REQUIRE(s.response.value("ok", false));
  CHECK(s.response["result"]["oom_killed"] == true);
  CHECK(s.Bytes("stdout").find("survived") == std::string::npos);
  // Forks beyond the pids limit fail.
  s = Exec(root, {{"command", "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; wait; echo done"}, {"pids", 4},
                  {"timeout_s", 20}, {"snapshot", false}});
  INFO(s.response.dump());
  REQUIRE(s.response.value("ok", false));
  CHECK(s.Bytes("stderr").find("fork") != std::string::npos);
}

TEST_CASE("cli exec: timeout kills the whole tree, output is capped, network deny, unenforceable limits fail plainly", "[cli][exec]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);

  auto start = Clock::now();
  Streamed s = Exec(root, {{"argv", {"/bin/sh", "-c", "sleep 60 & sleep 61; echo never"}}, {"timeout_s", 0.5}});
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  INFO(s.response.dump());
  REQUIRE(s.response.value("ok", false));
  CHECK(s.response["result"]["timed_out"] == true);
  CHECK(s.response["result"]["signal"] == 9);
  CHECK(took < 5000);
  CHECK(s.Bytes("stdout").empty());

  s = Exec(root, {{"argv", {"/bin/sh", "-c", "yes | head -c 100000"}}, {"output_cap", 1000}});
  REQUIRE(s.response.value("ok", false));
  CHECK(s.Bytes("stdout").size() == 1000);
  CHECK(s.response["result"]["stdout_truncated"] == true);
  CHECK(s.response["result"]["stdout_bytes"] == 100000);

  // deny: a net namespace with loopback only.
  s = Exec(root, {{"argv", {"/bin/cat", "/proc/net/dev"}}, {"network", "deny"}, {"snapshot", false}});
  REQUIRE(s.response.value("ok", false));
  std::string dev = s.Bytes("stdout");
  INFO(dev);
  CHECK(dev.find("lo:") != std::string::npos);
  CHECK(std::count(dev.begin(), dev.end(), '\n') == 3);  // two header lines + lo
  CHECK(s.response["result"]["node"].is_null());

  // A memory limit this host cannot enforce for this user is an error, not a silent no-op.
  s = Exec(root, {{"argv", {"/bin/true"}}, {"memory_bytes", 64 << 20}});
  INFO(s.response.dump());
  bool enforced = s.response.value("ok", false);
  if (!enforced) {
    CHECK(s.response["error"]["code"] == "unsupported");
    CHECK(s.response["error"].value("message", "").find("memory limit") != std::string::npos);
  }

  // Bad arguments are refused before anything runs.
  json bad = Request(root, "exec", {{"command", "true"}, {"argv", {"true"}}});
  CHECK(bad["error"]["code"] == "invalid");
  bad = Request(root, "exec", {{"command", "true"}, {"timeout_s", "soon"}});
  CHECK(bad["error"]["code"] == "invalid");
}

TEST_CASE("cli exec: an exec's changes land in its own node although capture runs, and a rollback waits for it", "[cli][exec]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);  // capture after 100 ms of quiet
  std::string before = json::parse(Run(root, {"head", "--json"}).out)["node"]["id"];

  std::variant<Streamed, std::string> ran;
  std::thread t([&] { ran = TryExec(root, {{"command", "echo a > /early; sleep 0.8; echo b > /late"}}); });
  // Give the command time to write /early and the capture time to want it.
  REQUIRE(WaitFor([&] { return fs::exists(Work(root) / "early"); }, 5000));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto start = Clock::now();
  json rb = Request(root, "rollback", {{"ref", before}});
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  t.join();
  if (auto* error = std::get_if<std::string>(&ran)) FAIL("exec: " << *error);
  const Streamed& s = std::get<Streamed>(ran);
  INFO(s.response.dump() << "\n" << rb.dump());
  REQUIRE(s.response.value("ok", false));
  REQUIRE(rb.value("ok", false));
  CHECK(waited >= 200);  // it ran only after the exec's snapshot
  const json& node = s.response["result"]["node"];
  REQUIRE(node.is_object());
  CHECK(node["parent"] == before);  // no automatic node took /early in between
  CHECK(node["changes"] == 2);
  // The rollback came after: the tree is back to before, the exec's node still in history.
  CHECK_FALSE(fs::exists(Work(root) / "early"));
  CHECK_FALSE(fs::exists(Work(root) / "late"));
  json diff = json::parse(Run(root, {"diff", before, node["id"].get<std::string>(), "--json"}).out, nullptr, false);
  std::set<std::string> paths;
  for (const auto& c : diff["changes"]) paths.insert(c.value("path", ""));
  CHECK(paths == std::set<std::string>{"early", "late"});
}

TEST_CASE("cli exec: spawn runs in the background, ps lists it, kill ends every process of it", "[cli][exec]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);

  json sp = Request(root, "spawn", {{"command", "echo up; sleep 987 & sleep 988"}});
  INFO(sp.dump());
  REQUIRE(sp.value("ok", false));
  uint64_t job = sp["result"]["job"].get<uint64_t>();
  fs::path log = sp["result"]["log"].get<std::string>();
  CHECK(WaitFor([&] { return ReadFile(log) == "up\n"; }, 10000));

  json ps;
  CHECK(WaitFor([&] {
    ps = Request(root, "ps", json::object());
    if (!ps.value("ok", false) || ps["result"]["jobs"].size() != 1) return false;
    std::set<std::string> cmds;
    for (const auto& p : ps["result"]["jobs"][0]["processes"]) cmds.insert(p.value("cmdline", ""));
    return cmds.count("sleep 987") && cmds.count("sleep 988");
  }, 10000));
  INFO(ps.dump());
  CHECK(ps["result"]["jobs"][0]["running"] == true);
  CHECK(ps["result"]["jobs"][0]["kind"] == "spawn");

  json k = Request(root, "kill", {{"job", job}});
  REQUIRE(k.value("ok", false));
  CHECK(k["result"]["killed"] == json::array({job}));
  ps = Request(root, "ps", json::object());
  CHECK(ps["result"]["jobs"][0]["running"] == false);
  CHECK(ps["result"]["jobs"][0]["killed"] == true);
  CHECK(ps["result"]["jobs"][0]["processes"].empty());
  CHECK(Request(root, "kill", {{"job", 4242}})["error"]["code"] == "not_found");

  // A running exec is a job too; a client that goes away takes its command with it, also a silent one.
  {
    SocketClient c;
    REQUIRE(c.Connect(root / "agentenv.sock"));
    REQUIRE(c.Send(json{{"op", "exec"}, {"args", {{"argv", {"sleep", "989"}}}}}.dump()));
    json started = c.Receive();
    CHECK(started.value("frame", "") == "started");
    CHECK(WaitFor([&] {
      auto jobs = Request(root, "ps", json::object())["result"]["jobs"];
      return std::any_of(jobs.begin(), jobs.end(), [](const json& j) { return j["kind"] == "exec"; });
    }, 5000));
  }
  CHECK(WaitFor([&] {
    auto jobs = Request(root, "ps", json::object())["result"]["jobs"];
    return std::none_of(jobs.begin(), jobs.end(), [](const json& j) { return j["kind"] == "exec"; });
  }, 10000));
}

TEST_CASE("cli mcp exec: output collected and capped, a session carries cwd and exports, failures are isError", "[cli][mcp][exec]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyMcp m(root);

  json list = m.Request("tools/list", json::object());
  json exec_tool;
  for (const auto& t : list["result"]["tools"]) if (t["name"] == "exec") exec_tool = t;
  REQUIRE(exec_tool.is_object());
  CHECK(exec_tool["inputSchema"]["properties"].contains("session"));
  CHECK(exec_tool["outputSchema"]["properties"].contains("exit_code"));
  CHECK(exec_tool.value("description", "").find("session") != std::string::npos);

  json r = m.Call("exec", {{"command", "mkdir -p /w/sub && cd /w/sub && export GREETING='hi there' && echo set"},
                           {"session", "s1"}});
  CHECK(r["isError"] == false);
  json sc = r["structuredContent"];
  CHECK(sc["exit_code"] == 0);
  CHECK(sc["stdout"] == "set\n");
  CHECK(sc["session"]["cwd"] == "/w/sub");
  CHECK(sc["session"]["env"]["GREETING"] == "hi there");
  REQUIRE(sc["node"].is_object());
  CHECK(sc["node"].value("title", "").rfind("exec: mkdir -p /w/sub", 0) == 0);
  CHECK(fs::is_directory(Work(root) / "w/sub"));
  // The text is a summary a model reads: how it ended, its node, its output.
  const std::string text = r["content"][0].value("text", "");
  INFO(text);
  CHECK(text.rfind("exit 0 in ", 0) == 0);
  CHECK(text.find("node " + sc["node"].value("short", "")) != std::string::npos);
  CHECK(text.find("--- stdout\nset") != std::string::npos);
  // structuredContent has the types outputSchema declares.
  for (const auto& [k, prop] : exec_tool["outputSchema"]["properties"].items()) {
    INFO(k << ": " << sc[k].dump() << " vs " << prop.dump());
    REQUIRE(sc.contains(k));
    std::set<std::string> types;
    if (prop["type"].is_string()) types.insert(prop["type"].get<std::string>());
    else for (const auto& t : prop["type"]) types.insert(t.get<std::string>());
    std::string got = sc[k].is_null() ? "null" : sc[k].is_boolean() ? "boolean" : sc[k].is_number_integer() ? "integer"
                    : sc[k].is_string() ? "string" : sc[k].is_object() ? "object" : "other";
    CHECK(types.count(got));
  }

  // The next call in the session starts where the last one ended...
  sc = m.Call("exec", {{"command", "pwd; echo \"$GREETING\"; cd ..; exit 4"}, {"session", "s1"}})["structuredContent"];
  CHECK(sc["stdout"] == "/w/sub\nhi there\n");
  CHECK(sc["exit_code"] == 4);  // a failing command is a result, not a tool error
  CHECK(sc["session"]["cwd"] == "/w");  // `exit` still saves the state
  CHECK(sc["node"].is_null());          // nothing changed
  // ...another session or no session does not.
  sc = m.Call("exec", {{"command", "pwd; echo \"[$GREETING]\""}})["structuredContent"];
  CHECK(sc["stdout"] == "/\n[]\n");
  CHECK(sc["session"].is_null());
  sc = m.Call("exec", {{"command", "pwd"}, {"session", "other"}})["structuredContent"];
  CHECK(sc["stdout"] == "/\n");
  // A session whose directory was rolled away falls back to / and says so.
  json gone = m.Call("rollback", {{"ref", "HEAD~1"}});
  CHECK(gone["isError"] == false);
  CHECK_FALSE(fs::exists(Work(root) / "w"));
  sc = m.Call("exec", {{"command", "pwd"}, {"session", "s1"}})["structuredContent"];
  CHECK(sc["stdout"] == "/\n");
  CHECK(sc["stderr"].get<std::string>().find("is gone") != std::string::npos);

  // Output is capped by default for a model (64 KiB per stream).
  sc = m.Call("exec", {{"command", "yes | head -c 200000"}, {"snapshot", false}})["structuredContent"];
  CHECK(sc["stdout"].get<std::string>().size() == 65536);
  CHECK(sc["stdout_truncated"] == true);
  CHECK(sc["stdout_bytes"] == 200000);

  // Failures: plainly did not happen.
  for (const json& args : {json{{"argv", {"/no/such/program"}}}, json{{"command", "true"}, {"session", "../x"}},
                           json{{"command", 5}}}) {
    json e = m.Call("exec", args);
    INFO(args.dump() << " -> " << e.dump());
    CHECK(e["isError"] == true);
    CHECK(e["content"][0].value("text", "").find("did not happen") != std::string::npos);
  }
  // The server is still fine.
  CHECK(m.Call("exec", {{"command", "echo ok"}, {"snapshot", false}})["structuredContent"]["stdout"] == "ok\n");
}

}  // namespace agentenv::test

namespace agentenv::test {

// `agentenv exec` under a running daemon runs at the daemon (its terminal
// passed along), so its writer lock holds from the command's start to its
// node: the capture cannot split the command's changes.
TEST_CASE("cli exec: under a daemon one command is one node, and the command still uses this terminal", "[cli][exec][daemon]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);  // capture after 100 ms of quiet
  std::string before = json::parse(Run(root, {"head", "--json"}).out)["node"]["id"];
  // stdin reaches the command, its output reaches our stdout and stderr.
  CmdResult r = RunCmd(AsNobody({AGENTENV_BIN, "exec", "--root", root.string(), "--", "/bin/sh", "-c",
                                 "echo a > /etc/a; read line; echo got $line; echo err >&2; sleep 1.5; "
                                 "echo b > /etc/b; exit 3"}),
                       "hello\n");
  INFO(r.Describe() << "\ndaemon log:\n" << d.Log());
  CHECK(r.code == 3);
  CHECK(r.out == "got hello\n");
  CHECK(r.err.find("err\n") != std::string::npos);
  CHECK(r.err.find("agentenv: node ") != std::string::npos);
  json log = json::parse(Run(root, {"log", "--json"}).out);
  REQUIRE(log["nodes"].size() >= 2);
  const json& node = log["nodes"][0];
  CHECK(node["title"].get<std::string>().rfind("exec: echo a", 0) == 0);
  CHECK(node["parent"] == before);  // no automatic node took etc/a in between
  json diff = json::parse(Run(root, {"diff", before, node["id"].get<std::string>(), "--json"}).out);
  std::set<std::string> paths;
  for (const auto& c : diff["changes"]) paths.insert(c.value("path", ""));
  CHECK(paths.count("etc/a"));
  CHECK(paths.count("etc/b"));
  // ps at the daemon saw it as an exec job while it ran; now none is left.
  CHECK(Request(root, "ps", json::object())["result"]["jobs"].empty());
  // A command that does not exist: 127, nothing recorded.
  CmdResult missing = Run(root, {"exec", "--", "/no/such/program"});
  CHECK(missing.code == 127);
  CHECK(missing.err.find("/no/such/program") != std::string::npos);
  CHECK(json::parse(Run(root, {"log", "--json"}).out)["nodes"][0]["id"] == node["id"]);
}

// The README promises global options before or after the command, also for
// ctl and ctl exec.
TEST_CASE("cli ctl: global options before ctl or before its op reach ctl exec", "[cli][exec][daemon]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  NobodyDaemon d(root);
  const std::string r = root.string();
  for (std::vector<std::string> argv : std::vector<std::vector<std::string>>{
           {"--root", r, "ctl", "exec", "-c", "echo x"},
           {"--root", r, "-q", "ctl", "exec", "-c", "echo x"},
           {"ctl", "--root", r, "exec", "-c", "echo x"},
           {"--root=" + r, "ctl", "exec", "--no-snap", "--", "echo", "x"}}) {
    argv.insert(argv.begin(), AGENTENV_BIN);
    CmdResult c = RunCmd(AsNobody(argv));
    INFO(c.Describe());
    CHECK(c.code == 0);
    CHECK(c.out == "x\n");
  }
  CmdResult j = RunCmd(AsNobody({AGENTENV_BIN, "--json", "--root", r, "ctl", "exec", "--", "echo", "x"}));
  INFO(j.Describe());
  REQUIRE(j.code == 0);
  CHECK(json::parse(j.out)["stdout"] == "x\n");
}

}  // namespace agentenv::test
