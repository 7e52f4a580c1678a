// Workspaces and tournaments end to end, as an unprivileged user (the
// binary runs as uid 65534 when the tests run as root): fork, isolation,
// O(changes) snapshots of the upper with whiteouts and opaque directories,
// tournament winners applied exactly, bad input refused.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <sstream>

#include "cli_exec_testutil.h"

namespace agentenv::test {
namespace {

json RunJson(const fs::path& root, std::vector<std::string> args, int* code = nullptr) {
  args.insert(std::find(args.begin(), args.end(), "--"), "--json");
  CmdResult r = Run(root, std::move(args));
  INFO(r.Describe());
  if (code) *code = r.code;
  return r.Json();
}

// A workspace's tree as the repository recorded it: the node restored into
// a fresh repository's live tree would be the same, so compare through an
// export extracted by tar.
Manifest NodeManifest(const TempDir& tmp, const fs::path& root, const std::string& node, const std::string& tag) {
  fs::path tar = tmp / (tag + ".tar");
  CmdResult e = Run(root, {"export", node, "-o", tar.string()});
  INFO(e.Describe());
  REQUIRE(e.code == 0);
  fs::path x = tmp / ("x-" + tag);
  fs::create_directories(x);
  REQUIRE(RunCmd({"/usr/bin/tar", "-xpf", tar.string(), "-C", x.string()}).code == 0);
  return TreeManifest(x);
}

}  // namespace

TEST_CASE("workspace: fork, exec and snap in a workspace, the live tree and other workspaces never see it", "[cli][workspace]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string base = HeadId(root);
  WriteFile(Work(root) / "etc/app.conf", "live\n");  // unsaved live change: forks take the node, not this
  int code = -1;
  json a = RunJson(root, {"fork", "HEAD", "--name", "a"}, &code);
  REQUIRE(code == 0);
  CHECK(a["workspace"]["base"] == base);
  CHECK(a["materialized"] != "existing");
  json b = RunJson(root, {"fork", "--name", "b"}, &code);
  REQUIRE(code == 0);
  CHECK(b["materialized"] == "existing");  // the same node's lower is shared

  CmdResult r = Run(root, {"exec", "--workspace", "a", "--", "/bin/sh", "-c",
                           "echo in-a > /etc/only-a && cat /etc/app.conf 2>/dev/null || echo none"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(r.out == "none\n");  // the node has no app.conf: the live tree's unsaved file is not in the fork
  r = Run(root, {"exec", "--workspace", "b", "--no-snap", "--", "/bin/sh", "-c", "ls /etc/only-a 2>&1 || echo isolated"});
  CHECK(r.out.find("isolated") != std::string::npos);
  CHECK_FALSE(fs::exists(Work(root) / "etc/only-a"));
  CHECK(HeadId(root) == base);  // the live tree's HEAD did not move

  json ls = RunJson(root, {"workspace", "ls"});
  REQUIRE(ls["workspaces"].size() == 2);
  json wa = ls["workspaces"][0];
  CHECK(wa["name"] == "a");
  CHECK(wa["head"] != base);  // exec snapshotted it
  json show = RunJson(root, {"show", wa["head"].get<std::string>()});
  CHECK(show["node"]["parent"] == base);
  CHECK(show["node"]["title"].get<std::string>().rfind("exec: echo in-a", 0) == 0);
  CHECK(show["node"]["changes"]["added"] == 1);

  // diff --workspace: what changed since its last node; snap makes one.
  r = Run(root, {"exec", "--workspace", "a", "--no-snap", "--", "/bin/sh", "-c", "echo more > /etc/more"});
  REQUIRE(r.code == 0);
  json d = RunJson(root, {"diff", "--workspace", "a"});
  std::set<std::string> changed;
  for (const auto& c : d["changes"]) changed.insert(c["op"].get<std::string>() + " " + c["path"].get<std::string>());
  CHECK(changed == std::set<std::string>{"+ etc/more", "M etc"});  // the file, and its directory's mtime
  json s = RunJson(root, {"snap", "--workspace", "a", "-m", "more"}, &code);
  REQUIRE(code == 0);
  CHECK(s["created"] == true);
  CHECK(s["node"]["parent"] == wa["head"]);
  CHECK(RunJson(root, {"snap", "--workspace", "a"})["created"] == false);  // nothing new

  CHECK(Run(root, {"workspace", "rm", "b"}).code == 0);
  CHECK(RunJson(root, {"workspace", "ls"})["workspaces"].size() == 1);
  json st = RunJson(root, {"status"});
  CHECK(st["workspaces"] == 1);
  CHECK(st["lowers"] == 1);
}

TEST_CASE("workspace: deletions, a recreated directory, renames and chmod round-trip exactly through the upper", "[cli][workspace]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::path w = Work(root);
  fs::create_directories(w / "data/sub");
  fs::create_directories(w / "keep/inner");
  WriteFile(w / "data/a.txt", "a\n");
  WriteFile(w / "data/sub/b.txt", "b\n");
  WriteFile(w / "keep/c.txt", "c\n");
  WriteFile(w / "keep/inner/d.txt", "d\n");
  WriteFile(w / "keep/mode.txt", "m\n");
  WriteFile(w / "keep/log.txt", "1\n");
  if (::geteuid() == 0)
    for (auto& e : fs::recursive_directory_iterator(w)) REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
  REQUIRE(Run(root, {"snap", "-m", "base"}).code == 0);
  REQUIRE(Run(root, {"fork", "--name", "ops"}).code == 0);
  const std::string ops =
      "rm /keep/c.txt && "                                   // a whiteout
      "rm -r /data && mkdir -p /data/sub && echo new > /data/new.txt && "  // an opaque directory
      "mv /keep/inner/d.txt /moved.txt && "                  // a rename across directories
      "chmod 600 /keep/mode.txt && "                         // a metadata-only copy-up
      "echo appended >> /keep/log.txt";                      // a content copy-up
  CmdResult r = Run(root, {"exec", "--workspace", "ops", "--", "/bin/sh", "-c", ops});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  std::string node = RunJson(root, {"workspace", "ls"})["workspaces"][0]["head"];

  // The same operations on the live tree give the tree the node must hold.
  r = Run(root, {"exec", "--no-snap", "--", "/bin/sh", "-c", ops});
  REQUIRE(r.code == 0);
  Manifest want = TreeManifest(w);
  for (const char* ignored : {"proc", "dev", "sys", "tmp", "run"}) want.erase(ignored);
  Manifest got = NodeManifest(tmp, root, node, "ops");
  for (const char* ignored : {"proc", "dev", "sys", "tmp", "run"}) got.erase(ignored);
  CHECK(ManifestDiff(want, got) == "");
  json d = RunJson(root, {"show", node});
  CHECK(d["node"]["changes"]["deleted"].get<int>() >= 3);  // c.txt, d.txt, data/a.txt, data/sub/b.txt
}

TEST_CASE("tournament: the first candidate to pass wins and is applied exactly, the others stay as branches", "[cli][workspace][tournament]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string base = HeadId(root);
  WriteFile(Work(root) / "unsaved.txt", "mine\n");
  int code = -1;
  json t = RunJson(root, {"tournament", "--test", "test -f /etc/ok", "--jobs", "3", "--",
                          "echo broken > /etc/app",                      // fails the test
                          "sleep 5; echo slow > /etc/app; touch /etc/ok",  // passes, later
                          "echo fast > /etc/app; touch /etc/ok"},          // passes first
                   &code);
  REQUIRE(code == 0);
  REQUIRE(t["candidates"].size() == 3);
  CHECK(t["winner"] == 2);
  CHECK(t["applied"] == true);
  CHECK(t["saved"].is_string());  // the unsaved file was saved first
  CHECK(t["candidates"][0]["passed"] == false);
  CHECK(t["candidates"][0]["test_exit_code"] == 1);
  CHECK(t["candidates"][1]["passed"] == true);
  for (const auto& c : t["candidates"]) {
    CHECK(c["node"]["parent"] == base);
    CHECK(c["node"]["title"].get<std::string>().find("tournament " + t["id"].get<std::string>()) == 0);
  }
  std::string winner = t["candidates"][2]["node"]["id"];
  CHECK(HeadId(root) == winner);
  CHECK(ReadFile(Work(root) / "etc/app") == "fast\n");
  CHECK_FALSE(fs::exists(Work(root) / "unsaved.txt"));
  Manifest live = TreeManifest(Work(root));
  Manifest node = NodeManifest(tmp, root, winner, "winner");
  for (const char* ignored : {"proc", "dev", "sys", "tmp", "run"}) live.erase(ignored), node.erase(ignored);
  CHECK(ManifestDiff(node, live) == "");
  // Only the winner's workspace stays; every candidate is a branch.
  json ls = RunJson(root, {"workspace", "ls"});
  REQUIRE(ls["workspaces"].size() == 1);
  CHECK(ls["workspaces"][0]["head"] == winner);
  json br = RunJson(root, {"branches"});
  std::set<std::string> tips;
  for (const auto& b : br["branches"]) tips.insert(b["id"]);
  for (const auto& c : t["candidates"]) CHECK(tips.count(c["node"]["id"].get<std::string>()));
}

TEST_CASE("tournament: no winner applies nothing and exits 1, a missing test command is exit 127", "[cli][workspace][tournament]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string head = HeadId(root);
  WriteFile(Work(root) / "unsaved.txt", "mine\n");
  int code = -1;
  json t = RunJson(root, {"tournament", "--test", "/no/such/test", "--", "echo a > /a", "echo b > /b"}, &code);
  CHECK(code == 1);
  CHECK(t["applied"] == false);
  CHECK(t["winner"].is_null());
  for (const auto& c : t["candidates"]) {
    CHECK(c["test_exit_code"] == 127);
    CHECK(c["node"].is_object());  // kept as a branch
  }
  CHECK(HeadId(root) == head);
  CHECK(ReadFile(Work(root) / "unsaved.txt") == "mine\n");
  CHECK_FALSE(fs::exists(Work(root) / "a"));
  CmdResult text = Run(root, {"tournament", "--test", "false", "--", "true"});
  CHECK(text.code == 1);
  CHECK(text.out.find("no candidate passed: nothing applied") != std::string::npos);
}

TEST_CASE("workspace: bad input is refused with the README's exit codes and changes nothing", "[cli][workspace]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  CHECK(Run(root, {"fork", "no-such-node"}).code == 3);
  CmdResult bad = Run(root, {"fork", "--name", "../escape"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("workspace '../escape'") != std::string::npos);
  CHECK(Run(root, {"fork", "--name", "a/b"}).code == 2);
  CHECK_FALSE(fs::exists(root / "escape"));
  CHECK(Run(root, {"tournament", "--test", "true"}).code == 2);  // no candidates
  CHECK(Run(root, {"exec", "--workspace", "nope", "--", "true"}).code == 3);
  // Removing what is not there leaves it not there: done, and said so.
  CmdResult gone = Run(root, {"workspace", "rm", "nope"});
  CHECK(gone.code == 0);
  CHECK(gone.out.find("already gone") != std::string::npos);
  REQUIRE(Run(root, {"fork", "--name", "busy"}).code == 0);
  CHECK(Run(root, {"fork", "--name", "busy"}).code == 6);  // exists
  // A workspace with a command running in it cannot be removed.
  Child c;
  c.Start(AsNobody({AGENTENV_BIN, "exec", "--root", root.string(), "--workspace", "busy", "--", "/bin/sh", "-c",
                    "echo started > /started; sleep 3"}),
          false, false, (tmp / "busy.log").string());
  REQUIRE(WaitFor([&] { return RunJson(root, {"workspace", "ls"})["workspaces"][0].value("busy", false); }, 10000));
  CmdResult rm = Run(root, {"workspace", "rm", "busy"});
  CHECK(rm.code == 5);
  // Which command holds it, so the user knows what to wait for.
  CHECK(rm.err.find("workspace 'busy' is busy: exec: /bin/sh -c echo started") != std::string::npos);
  CHECK(c.Wait(20000) == 0);
  CHECK(Run(root, {"workspace", "rm", "busy"}).code == 0);
}


TEST_CASE("tournament: kill -9 mid-run leaves no mount, no applied restore, and the next run removes its workspaces", "[cli][workspace][tournament]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string head = HeadId(root);
  WriteOwned(Work(root) / "unsaved.txt", "mine\n");
  Child t;
  t.Start(AsNobody({AGENTENV_BIN, "tournament", "--root", root.string(), "--test", "true", "--", "echo a > /a; sleep 8",
                    "echo b > /b; sleep 8"}),
          false, false, (tmp / "t.log").string());
  // Both candidates run (their workspaces are busy), then the tournament dies.
  REQUIRE(WaitFor([&] {
    json ls = json::parse(Run(root, {"workspace", "ls", "--json"}).out, nullptr, false);
    if (!ls.is_object() || ls["workspaces"].size() != 2) return false;
    for (const auto& w : ls["workspaces"]) if (!w.value("busy", false)) return false;
    return true;
  }, 20000));
  ::kill(t.pid(), SIGKILL);
  t.Wait(20000);
  // Nothing was mounted in this namespace; the live tree and HEAD are as they were.
  CHECK(ReadFile("/proc/self/mountinfo").find(root.string()) == std::string::npos);
  CHECK(HeadId(root) == head);
  CHECK(ReadFile(Work(root) / "unsaved.txt") == "mine\n");
  CHECK_FALSE(fs::exists(Work(root) / "a"));
  // The workspace locks died with the process (the candidates' envs run
  // out their sleep on their own): the next tournament removes the stale
  // workspaces.
  json next = RunJson(root, {"tournament", "--test", "true", "--no-apply", "--", "true"});
  json ls = RunJson(root, {"workspace", "ls"});
  REQUIRE(ls["workspaces"].size() == 1);
  CHECK(ls["workspaces"][0]["name"].get<std::string>().rfind(next["id"].get<std::string>(), 0) == 0);
}

TEST_CASE("workspace: a node close to a materialized one is materialized by hardlinks, and writes stay in the workspace", "[cli][workspace]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/shared", "the same in both\n");
  WriteOwned(Work(root) / "etc/changed", "old\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // out of the racy window: the scan caches them
  REQUIRE(Run(root, {"snap"}).code == 0);
  int code = -1;
  json a = RunJson(root, {"fork", "HEAD", "--name", "a"}, &code);
  REQUIRE(code == 0);
  WriteOwned(Work(root) / "etc/changed", "new\n");
  REQUIRE(Run(root, {"snap"}).code == 0);
  json b = RunJson(root, {"fork", "HEAD", "--name", "b"}, &code);
  REQUIRE(code == 0);
  CHECK(b["materialized"].get<std::string>().rfind("hardlink (", 0) == 0);
  // The first lower: files unchanged in the live tree since their snapshot
  // come from there (a kernel copy or a clone), not from the store.
  std::string first = a["materialized"].get<std::string>();
  CHECK((first.find("from the live tree") != std::string::npos || first == "reflink"));
  fs::path la = a["workspace"]["lower"].get<std::string>(), lb = b["workspace"]["lower"].get<std::string>();
  struct stat sa, sb;
  REQUIRE(::lstat((la / "etc/shared").c_str(), &sa) == 0);
  REQUIRE(::lstat((lb / "etc/shared").c_str(), &sb) == 0);
  CHECK(sa.st_ino == sb.st_ino);  // one file for both lowers
  REQUIRE(::lstat((la / "etc/changed").c_str(), &sa) == 0);
  REQUIRE(::lstat((lb / "etc/changed").c_str(), &sb) == 0);
  CHECK(sa.st_ino != sb.st_ino);
  CHECK(ReadFile(lb / "etc/changed") == "new\n");
  // A write to the shared file in b is copied up: a's lower, a and the
  // live tree keep theirs.
  CmdResult w = Run(root, {"exec", "--workspace", "b", "--", "/bin/sh", "-c", "echo b-only >> /etc/shared"});
  INFO(w.Describe());
  REQUIRE(w.code == 0);
  CHECK(ReadFile(la / "etc/shared") == "the same in both\n");
  CHECK(Run(root, {"exec", "--workspace", "a", "--no-snap", "--", "/bin/cat", "/etc/shared"}).out == "the same in both\n");
  CHECK(ReadFile(Work(root) / "etc/shared") == "the same in both\n");
  CHECK(Run(root, {"exec", "--workspace", "b", "--no-snap", "--", "/bin/cat", "/etc/shared"}).out ==
        "the same in both\nb-only\n");
}

}  // namespace agentenv::test

namespace agentenv::test {

// Overlayfs breaks a hardlink on copy-up and keeps the rest of the group
// linked: a workspace's node records exactly that, so a fork of it (a
// lower built from the node) shows every name, and so does the live tree
// after a restore to it.
TEST_CASE("workspace: hardlink groups survive a workspace's snapshot and every fork of its nodes", "[cli][workspace]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::create_directories(Work(root) / "usr/bin");
  WriteOwned(Work(root) / "usr/bin/h1", "group\n");
  fs::create_hard_link(Work(root) / "usr/bin/h1", Work(root) / "usr/bin/h2");
  fs::create_hard_link(Work(root) / "usr/bin/h1", Work(root) / "usr/bin/h3");
  WriteOwned(Work(root) / "usr/bin/p1", "pair\n");
  fs::create_hard_link(Work(root) / "usr/bin/p1", Work(root) / "usr/bin/p2");
  if (::geteuid() == 0) REQUIRE(::chown((Work(root) / "usr").c_str(), 65534, 65534) == 0);
  if (::geteuid() == 0) REQUIRE(::chown((Work(root) / "usr/bin").c_str(), 65534, 65534) == 0);
  REQUIRE(Run(root, {"snap"}).code == 0);
  int code = -1;
  RunJson(root, {"fork", "HEAD", "--name", "a"}, &code);
  REQUIRE(code == 0);
  // A change elsewhere leaves every group as it was.
  REQUIRE(Run(root, {"exec", "--workspace", "a", "--", "/bin/sh", "-c", "echo x > /etc/x"}).code == 0);
  std::string untouched = RunJson(root, {"workspace", "ls"})["workspaces"][0]["head"];
  // The group's first path copied up, the pair's first deleted.
  CmdResult w = Run(root, {"exec", "--workspace", "a", "--", "/bin/sh", "-c",
                           "echo new > /usr/bin/h1 && /bin/busybox rm /usr/bin/p1"});
  INFO(w.Describe());
  REQUIRE(w.code == 0);
  std::string touched = RunJson(root, {"workspace", "ls"})["workspaces"][0]["head"];
  REQUIRE(touched != untouched);

  auto inodes = [&](const std::string& ws) {
    CmdResult r = Run(root, {"exec", "--workspace", ws, "--no-snap", "--", "/bin/sh", "-c",
                             "cd /usr/bin && for f in h1 h2 h3 p1 p2; do "
                             "if [ -e $f ]; then echo $f $(/bin/busybox stat -c %i $f) $(cat $f); else echo $f -; fi; done"});
    INFO(r.Describe());
    REQUIRE(r.code == 0);
    std::map<std::string, std::pair<std::string, std::string>> out;  // name -> (inode, content)
    std::istringstream in(r.out);
    std::string name, ino, text;
    while (in >> name >> ino) {
      if (ino != "-") in >> text;
      out[name] = {ino, ino == "-" ? "" : text};
    }
    return out;
  };
  REQUIRE(RunJson(root, {"fork", untouched, "--name", "b"}, &code).is_object());
  REQUIRE(code == 0);
  auto b = inodes("b");
  CHECK(b["h1"].first == b["h2"].first);
  CHECK(b["h1"].first == b["h3"].first);
  CHECK(b["p1"].first == b["p2"].first);
  CHECK(b["h3"].second == "group");

  REQUIRE(RunJson(root, {"fork", touched, "--name", "c"}, &code).is_object());
  REQUIRE(code == 0);
  auto c = inodes("c");
  CHECK(c["h1"].second == "new");
  CHECK(c["h2"].second == "group");
  CHECK(c["h2"].first == c["h3"].first);  // still one file
  CHECK(c["h1"].first != c["h2"].first);
  CHECK(c["p1"].first == "-");
  CHECK(c["p2"].second == "pair");

  CmdResult fsck = Run(root, {"fsck", "--lowers"});
  INFO(fsck.Describe());
  CHECK(fsck.code == 0);
  // The live tree restored to the node and scanned again is the node.
  REQUIRE(Run(root, {"restore", touched}).code == 0);
  json s = RunJson(root, {"snap"});
  CHECK(s["created"] == false);
  struct stat s2, s3;
  REQUIRE(::lstat((Work(root) / "usr/bin/h2").c_str(), &s2) == 0);
  REQUIRE(::lstat((Work(root) / "usr/bin/h3").c_str(), &s3) == 0);
  CHECK(s2.st_ino == s3.st_ino);
}

}  // namespace agentenv::test

namespace agentenv::test {

// A tournament's candidates that wait for their turn (--jobs 1) are not
// "left by a killed tournament" to another tournament's sweep: each one's
// workspace is locked from its creation to the end.
TEST_CASE("tournament: two at once, the second never removes the first's waiting candidates", "[cli][workspace][tournament]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  json first;
  int first_code = -1;
  std::thread a([&] {
    first = RunJson(root, {"tournament", "--test", "true", "--jobs", "1", "--no-apply", "--keep", "all", "--",
                           "sleep 1; echo 1 > /one", "sleep 1; echo 2 > /two", "sleep 1; echo 3 > /three"},
                    &first_code);
  });
  bool waiting = WaitFor([&] { return RunJson(root, {"workspace", "ls"})["workspaces"].size() >= 3; }, 20000);
  int second_code = -1;
  json second = RunJson(root, {"tournament", "--test", "true", "--no-apply", "--", "echo x > /x"}, &second_code);
  a.join();
  REQUIRE(waiting);
  CHECK(second_code == 0);
  INFO(first.dump());
  REQUIRE(first_code == 0);
  REQUIRE(first["candidates"].size() == 3);
  for (const auto& c : first["candidates"]) {
    CHECK(c.value("error", "") == "");
    CHECK(c["node"].is_object());
    CHECK(c["passed"] == true);
  }
}

}  // namespace agentenv::test

namespace agentenv::test {

// The reproduction as it was met: under a daemon, a tournament's winner
// (a workspace's node) applied, a change captured on top of it, another
// tournament forked from that: every lower equals its tree, hardlinked
// names included.
TEST_CASE("tournament: under a daemon, tournaments after tournaments keep every hardlinked name", "[cli][workspace][tournament][daemon]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::create_directories(Work(root) / "usr/bin");
  WriteOwned(Work(root) / "usr/bin/perl", "perl\n");
  fs::create_hard_link(Work(root) / "usr/bin/perl", Work(root) / "usr/bin/perl5.36.0");
  for (const char* d : {"usr", "usr/bin"})
    if (::geteuid() == 0) REQUIRE(::chown((Work(root) / d).c_str(), 65534, 65534) == 0);
  REQUIRE(Run(root, {"snap"}).code == 0);
  NobodyDaemon d(root);
  for (int round = 0; round < 2; ++round) {
    WriteOwned(Work(root) / "etc/vv", "r" + std::to_string(round) + "\n");
    REQUIRE(WaitFor([&] { return RunJson(root, {"status"}).value("dirty", true) == false; }, 10000));
    int code = -1;
    json t = RunJson(root, {"tournament", "--jobs", "2", "--test", "test -f /etc/ok", "--",
                            "touch /etc/ok", "true"}, &code);
    INFO(t.dump());
    REQUIRE(code == 0);
    CmdResult fsck = Run(root, {"fsck", "--lowers"});
    INFO(fsck.Describe());
    CHECK(fsck.code == 0);
  }
  REQUIRE(RunJson(root, {"fork", "HEAD", "--name", "last"}).is_object());
  CmdResult seen = Run(root, {"exec", "--workspace", "last", "--no-snap", "--", "/bin/cat", "/usr/bin/perl5.36.0"});
  CHECK(seen.out == "perl\n");
}

}  // namespace agentenv::test
