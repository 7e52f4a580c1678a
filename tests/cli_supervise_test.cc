// `agentenv supervise` end to end, as uid 65534: an operator rollback kills
// the agent's env, restores and relaunches; the agent's own rollback (its
// socket) restores in place; ps shows the agent's processes.
#include <catch2/catch.hpp>

#include "tests/cli_exec_testutil.h"

namespace agentenv::test {
namespace {

size_t Lines(const fs::path& p) {
  std::string s = ReadFile(p);
  return size_t(std::count(s.begin(), s.end(), '\n'));
}

std::set<std::string> AgentCommands(const json& ps) {
  std::set<std::string> cmds;
  if (ps.is_object() && ps["agent"].is_object())
    for (const auto& p : ps["agent"]["processes"]) cmds.insert(p.value("cmdline", ""));
  return cmds;
}

}  // namespace

TEST_CASE("cli supervise: operator rollback relaunches the agent, the agent's rollback keeps it, ps shows it", "[cli][supervise]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::create_directories(Work(root) / "var/tmp");
  if (::geteuid() == 0) {
    REQUIRE(::chown((Work(root) / "var").c_str(), 65534, 65534) == 0);
    REQUIRE(::chown((Work(root) / "var/tmp").c_str(), 65534, 65534) == 0);
  }
  // /var/tmp is never versioned nor restored (and, unlike /tmp, no tmpfs):
  // a launch counter that survives rollbacks.
  Child sup;
  sup.Start(AsNobody({AGENTENV_BIN, "supervise", "--root", root.string(), "--quiet-ms", "100", "--",
                      "/bin/sh", "-c", "echo launch >> /var/tmp/launches; exec sleep 990"}),
            false, false, (tmp / "supervise.log").string());
  INFO(ReadFile(tmp / "supervise.log"));
  REQUIRE(WaitFor([&] { return Lines(Work(root) / "var/tmp/launches") == 1; }, 15000));
  json ps;
  REQUIRE(WaitFor([&] {
    ps = Request(root, "ps", json::object())["result"];
    return AgentCommands(ps).count("sleep 990");
  }, 10000));
  pid_t first_pid = ps["agent"]["pid"].get<pid_t>();

  std::string good = json::parse(Run(root, {"head", "--json"}).out)["node"]["id"];
  WriteFile(Work(root) / "mistake.txt", "oops\n");
  // The operator's rollback: kill, restore, relaunch.
  json rb = Request(root, "rollback", {{"ref", good}});
  INFO(rb.dump());
  REQUIRE(rb.value("ok", false));
  CHECK(rb["result"]["relaunched"] == true);
  CHECK_FALSE(fs::exists(Work(root) / "mistake.txt"));
  CHECK(WaitFor([&] { return Lines(Work(root) / "var/tmp/launches") == 2; }, 10000));
  REQUIRE(WaitFor([&] {
    ps = Request(root, "ps", json::object())["result"];
    return AgentCommands(ps).count("sleep 990") && ps["agent"]["pid"] != first_pid;
  }, 10000));
  CHECK(::kill(first_pid, 0) != 0);  // the first env is gone

  // The agent's own rollback (the socket it sees at /run/agentenv.sock) restores in place.
  WriteFile(Work(root) / "mistake2.txt", "oops\n");
  SocketClient agent;
  REQUIRE(agent.Connect(root / "agent.sock"));
  json arb = agent.Call(json{{"op", "rollback"}, {"args", {{"ref", good}}}}.dump(), 30000);
  INFO(arb.dump());
  REQUIRE(arb.value("ok", false));
  CHECK_FALSE(arb["result"].contains("relaunched"));
  CHECK_FALSE(fs::exists(Work(root) / "mistake2.txt"));
  // Kept running: no relaunch follows (a third launch would show within the wait).
  CHECK_FALSE(WaitFor([&] { return Lines(Work(root) / "var/tmp/launches") != 2; }, 300));
  pid_t second_pid = ps["agent"]["pid"].get<pid_t>();
  CHECK(::kill(second_pid, 0) == 0);

  // SIGTERM: the env dies with the supervisor.
  sup.Signal(SIGTERM);
  CHECK(sup.Wait(15000) == 128 + SIGTERM);
  CHECK(WaitFor([&] { return ::kill(second_pid, 0) != 0; }, 5000));
}

}  // namespace agentenv::test
