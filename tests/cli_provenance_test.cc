// End-to-end tests of provenance through the agentenv binary: what made a
// node is recorded as data (argv, exit code, workspace, tournament role),
// shown by show/log/the digest, kept by retain, and read back by the
// digest without guessing from titles (the reproductions of a day on which
// title parsing got rollbacks, failures and tournaments wrong).
#include <catch2/catch.hpp>

#include "tests/cli_exec_testutil.h"

namespace agentenv::test {
namespace {

json J(const fs::path& root, std::vector<std::string> args) {
  args.insert(std::find(args.begin(), args.end(), "--"), "--json");
  CmdResult r = Run(root, args);
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return r.Json();
}

std::string Digest(const fs::path& root) {
  json d = J(root, {"log", "--digest", "--since", "1 hour ago"});
  return d.value("text", "");
}

}  // namespace

TEST_CASE("provenance: exec keeps its whole command and exit code, log marks the failure, show and diff count alike", "[cli][provenance]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  CmdResult failed = Run(root, {"exec", "--", "/bin/sh", "-c", "mkdir -p /etc/conf.d && echo x > /etc/conf.d/a; exit 3"});
  INFO(failed.Describe());
  CHECK(failed.code == 3);
  json show = J(root, {"show", "HEAD"});
  const json& p = show["node"]["provenance"];
  CHECK(p.value("kind", "") == "exec");
  CHECK(p.value("exit_code", 0) == 3);
  CHECK(p.value("failed", false));
  CHECK(p.value("command", "") == "mkdir -p /etc/conf.d && echo x > /etc/conf.d/a; exit 3");
  CHECK(p["who"].value("origin", "") == "cli");
  CHECK(show["node"].value("title", "").find("(exit 3)") != std::string::npos);
  CmdResult log = Run(root, {"log", "-n", "2"});
  INFO(log.out);
  CHECK(log.out.find("exit 3") != std::string::npos);

  // A directory whose only change is its mtime (a file made and removed
  // in it) is no change to show, and so none to diff either.
  WriteOwned(Work(root) / "etc/conf.d/tmp", "t");
  fs::remove(Work(root) / "etc/conf.d/tmp");
  WriteOwned(Work(root) / "etc/new", "n");
  WriteOwned(Work(root) / "etc/hosts", "127.0.0.1 h\n");
  J(root, {"snap", "-m", "edits"});
  json shown = J(root, {"show", "HEAD"});
  json diff = J(root, {"diff", "HEAD~1", "HEAD"});
  INFO(diff.dump());
  const json& counts = shown["node"]["changes"];
  uint64_t added = 0, modified = 0, deleted = 0;
  for (const auto& c : diff["changes"]) {
    std::string op = c.value("op", "");
    (op == "+" ? added : op == "-" ? deleted : modified)++;
  }
  CHECK(counts.value("added", uint64_t{0}) == added);
  CHECK(counts.value("modified", uint64_t{0}) == modified);
  CHECK(counts.value("deleted", uint64_t{0}) == deleted);
  CHECK(diff.value("total", uint64_t{0}) == added + modified + deleted);
  for (const auto& c : diff["changes"]) CHECK(c.value("path", "") != "etc/conf.d");
}

TEST_CASE("provenance: the digest tells a workspace's exec from a rollback, sees restore HEAD~1 and a tournament whole", "[cli][provenance]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  // snap, fork, exec in the workspace, snap: a fork's node between two
  // live nodes is no rollback.
  WriteOwned(Work(root) / "etc/one", "1");
  J(root, {"snap", "-m", "one"});
  J(root, {"fork", "--name", "side"});
  CHECK(Run(root, {"exec", "--workspace", "side", "--", "/bin/sh", "-c", "echo w > /etc/side"}).code == 0);
  WriteOwned(Work(root) / "etc/two", "2");
  J(root, {"snap", "-m", "two"});
  std::string d = Digest(root);
  INFO(d);
  CHECK(d.find("0 rollbacks") != std::string::npos);
  CHECK(d.find("1 fork") != std::string::npos);
  CHECK(d.find("fork side from ") != std::string::npos);
  CHECK(d.find("`echo w > /etc/side`") != std::string::npos);

  // exec rm -rf, restore HEAD~1: one rollback, from and to, and what it undid.
  const std::string before = HeadId(root);
  CHECK(Run(root, {"exec", "--", "/bin/sh", "-c", "rm -rf /etc/one"}).code == 0);
  const std::string removed = HeadId(root);
  CHECK(Run(root, {"restore", "HEAD~1"}).code == 0);
  CHECK(HeadId(root) == before);
  // A tournament of two candidates: both whole, the first wins.
  json t = J(root, {"tournament", "--test", "test -f /etc/ok", "--", "touch /etc/ok && echo first", "echo second"});
  INFO(t.dump());
  d = Digest(root);
  INFO(d);
  CHECK(d.find("1 rollback,") != std::string::npos);
  CHECK(d.find("HEAD " + removed.substr(0, 12) + " -> " + before.substr(0, 12)) != std::string::npos);
  CHECK(d.find("undid 1 node: ran `rm -rf /etc/one`") != std::string::npos);
  CHECK(d.find("1 tournament") != std::string::npos);
  CHECK(d.find("#1 `touch /etc/ok && echo first` test exit 0") != std::string::npos);
  CHECK(d.find("#2 `echo second` test exit 1") != std::string::npos);
  CHECK(d.find("won: #1 (applied to HEAD)") != std::string::npos);
  // The op log names the rollback in log's text too.
  CmdResult log = Run(root, {"log", "-n", "20"});
  INFO(log.out);
  CHECK(log.out.find("rollback") != std::string::npos);
}

TEST_CASE("provenance: retain keeps the provenance of the nodes it keeps and says what a thinned span held", "[cli][provenance]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  J(root, {"tournament", "--no-apply", "--test", "true", "--", "echo a > /etc/a", "echo b > /etc/b"});
  for (int i = 0; i < 4; ++i)
    CHECK(Run(root, {"exec", "--", "/bin/sh", "-c", "echo " + std::to_string(i) + " > /etc/n; exit " + std::to_string(i % 2)}).code == i % 2);
  CHECK(Run(root, {"exec", "--", "/bin/sh", "-c", "echo last > /etc/n"}).code == 0);
  json kept = J(root, {"retain", "--keep-last", "1", "--keep-within", "0"});
  INFO(kept.dump());
  uint64_t dropped = 0, failed = 0;
  for (const auto& n : kept["dropped"]) {
    ++dropped;
    if (n["provenance"].value("failed", false)) ++failed;
  }
  CHECK(dropped >= 3);
  CHECK(failed >= 1);
  json log = J(root, {"log", "-n", "50"});
  INFO(log.dump());
  bool saw_last = false;
  for (const auto& n : log["nodes"]) {
    std::string title = n.value("title", "");
    if (!n.contains("provenance")) continue;
    const json& p = n["provenance"];
    if (p.value("command", "") == "echo last > /etc/n") {
      saw_last = true;
      CHECK(title == "exec: echo last > /etc/n");
      // Everything between it and the first node was dropped: the span says what it held.
      REQUIRE(p.contains("thinned"));
      CHECK(p["thinned"].value("nodes", uint64_t{0}) == dropped);
      CHECK(p["thinned"].value("failed", uint64_t{0}) == failed);
      CHECK(p["thinned"]["kinds"].value("exec", uint64_t{0}) == dropped);
    }
    if (p.value("kind", "") == "tournament") CHECK(title.starts_with("tournament "));
  }
  CHECK(saw_last);
}

}  // namespace agentenv::test
