// The CLI as a user meets it: exit codes like a shell's, log that says
// when it cut, tags that do not move silently, restores that say what they
// did, global flags before the command, MCP that answers before failing.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include "cli_exec_testutil.h"

namespace agentenv::test {

TEST_CASE("cli usage: exec of a missing command exits 127 like a shell and makes no node", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string head = HeadId(root);
  CmdResult r = Run(root, {"exec", "--", "/nonexistent"});
  CHECK(r.code == 127);
  CHECK(r.err.find("exec /nonexistent: No such file or directory") != std::string::npos);
  CHECK(HeadId(root) == head);
}

TEST_CASE("cli usage: log says when it cut, -n 0 shows nothing, not 'no snapshots'", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  for (int i = 0; i < 3; ++i) {
    WriteFile(Work(root) / ("f" + std::to_string(i)), "x");
    REQUIRE(Run(root, {"snap", "-m", "n" + std::to_string(i)}).code == 0);
  }
  CmdResult two = Run(root, {"log", "-n", "2"});
  CHECK(two.out.find("older nodes not shown") != std::string::npos);
  json j = json::parse(Run(root, {"log", "-n", "2", "--json"}).out);
  CHECK(j["more"] == true);
  CHECK(j["nodes"].size() == 2);
  CmdResult all = Run(root, {"log"});
  CHECK(all.out.find("older nodes not shown") == std::string::npos);
  CmdResult none = Run(root, {"log", "-n", "0"});
  CHECK(none.code == 0);
  CHECK(none.out.find("no snapshots yet") == std::string::npos);
}

TEST_CASE("cli usage: tag refuses to move an existing tag without -f", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string first = HeadId(root);
  REQUIRE(Run(root, {"tag", "good"}).code == 0);
  WriteFile(Work(root) / "new", "x");
  REQUIRE(Run(root, {"snap"}).code == 0);
  CmdResult moved = Run(root, {"tag", "good"});
  CHECK(moved.code == 6);
  CHECK(moved.err.find("tag -f good") != std::string::npos);
  json tags = json::parse(Run(root, {"tag", "--json"}).out);
  CHECK(tags["tags"][0]["id"] == first);
  CHECK(Run(root, {"tag", "good"}).code == 6);
  CHECK(Run(root, {"tag", "good", first}).code == 0);  // naming the same node again is fine
  CHECK(Run(root, {"tag", "-f", "good"}).code == 0);
  tags = json::parse(Run(root, {"tag", "--json"}).out);
  CHECK(tags["tags"][0]["id"] == HeadId(root));
}

TEST_CASE("cli usage: a restore that only puts metadata back says so", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/conf", "x");
  REQUIRE(Run(root, {"snap", "-m", "conf"}).code == 0);
  std::string good = HeadId(root);
  REQUIRE(::chmod((Work(root) / "etc/conf").c_str(), 0600) == 0);
  REQUIRE(Run(root, {"snap", "-m", "chmod"}).code == 0);
  CmdResult r = Run(root, {"restore", good});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("wrote 0 files") != std::string::npos);
  CHECK(r.out.find("put back the metadata of ") != std::string::npos);  // the file, and the mtimes above it
}

TEST_CASE("cli usage: --root and --json may come before the command", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  CmdResult r = RunCmd(AsNobody({AGENTENV_BIN, "--root", root.string(), "--json", "head"}));
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(json::parse(r.out)["node"]["id"] == HeadId(root));
  r = RunCmd(AsNobody({AGENTENV_BIN, "--root=" + root.string(), "exec", "--no-snap", "--", "/bin/echo", "hi"}));
  CHECK(r.out == "hi\n");
  CHECK(RunCmd({AGENTENV_BIN, "--json"}).code == 2);
}

TEST_CASE("cli usage: mcp on a directory that is no repository answers initialize, then fails tool calls clearly", "[cli][usage]") {
  TempDir tmp;
  std::string in =
      R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})"
      "\n"
      R"({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"log","arguments":{}}})"
      "\n";
  CmdResult r = RunCmd({AGENTENV_BIN, "mcp", "--root", (tmp / "none").string()}, in);
  REQUIRE(r.code == 0);
  std::vector<json> msgs;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) msgs.push_back(json::parse(l));
  REQUIRE(msgs.size() == 2);
  CHECK(msgs[0]["result"]["serverInfo"]["name"] == "agentenv");
  CHECK(msgs[1]["result"]["isError"] == true);
  CHECK(msgs[1]["result"]["content"][0]["text"].get<std::string>().find("not an agentenv repository") != std::string::npos);
}


TEST_CASE("cli usage: exports open cleanly in GNU tar and bsdtar, stdout and file give the same bytes", "[cli][usage][export]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/caf\xc3\xa9", "utf8 name\n");
  REQUIRE(Run(root, {"snap"}).code == 0);
  fs::path file = tmp / "out.tar";
  REQUIRE(Run(root, {"export", "HEAD", "-o", file.string()}).code == 0);
  CmdResult piped = Run(root, {"export", "HEAD", "-o", "-"});
  REQUIRE(piped.code == 0);
  CHECK(piped.out == ReadFile(file));  // no padding difference
  for (const char* tar : {"/usr/bin/tar", "/usr/bin/bsdtar"}) {
    INFO(tar);
    if (!fs::exists(tar)) FAIL(std::string(tar) + " is missing (scripts/install-deps.sh installs it)");
    fs::path x = tmp / (std::string("x-") + fs::path(tar).filename().string());
    fs::create_directories(x);
    CmdResult r = RunCmd({tar, "-xf", file.string(), "-C", x.string()});
    CHECK(r.code == 0);
    CHECK(r.err == "");  // no "unknown extended header keyword 'hdrcharset'"
    CHECK(ReadFile(x / "etc/caf\xc3\xa9") == "utf8 name\n");
  }
}

TEST_CASE("cli usage: import takes only tar archives, anything else is exit 2 and changes nothing", "[cli][usage][import]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string head = HeadId(root);
  size_t nodes = json::parse(Run(root, {"log", "--json"}).out)["nodes"].size();
  WriteFile(tmp / "passwd", "root:x:0:0:root:/root:/bin/sh\n");
  WriteFile(tmp / "empty", "");
  for (const char* f : {"passwd", "empty"}) {
    INFO(f);
    if (::geteuid() == 0) REQUIRE(::chmod((tmp / f).c_str(), 0644) == 0);
    CmdResult r = Run(root, {"import", (tmp / f).string()});
    CHECK(r.code == 2);
    CHECK(r.err.find("a tar archive, plain or .gz/.xz/.zst, is expected") != std::string::npos);
  }
  CHECK(HeadId(root) == head);
  CHECK(json::parse(Run(root, {"log", "--json"}).out)["nodes"].size() == nodes);
}


// Which node a time names is tested on an injected clock in refs_test; here,
// that show and restore --at read @{...} and what they say, without waiting.
TEST_CASE("cli usage: time refs: show @{...} and restore --at resolve times, and refuse ones before history", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "later.txt", "later\n");
  REQUIRE(Run(root, {"snap", "-m", "later"}).code == 0);
  std::string later = HeadId(root);
  CHECK(json::parse(Run(root, {"show", "@{now}", "--json"}).out)["node"]["id"] == later);
  CHECK(json::parse(Run(root, {"show", "@{0 seconds ago}", "--json"}).out)["node"]["id"] == later);
  CmdResult r = Run(root, {"show", "@{1 weeks ago}"});
  CHECK(r.code == 3);  // before any node
  CHECK(r.err.find("no node was made at or before that time") != std::string::npos);
  CHECK(Run(root, {"show", "@{yesterday-ish}"}).code == 2);
  char day[16];
  time_t now = ::time(nullptr);
  std::strftime(day, sizeof day, "%Y-%m-%d", std::localtime(&now));
  CHECK(Run(root, {"show", std::string("@{") + day + "}"}).code == 3);  // midnight: before the repository
  // Refused times change nothing.
  WriteOwned(Work(root) / "later.txt", "edited\n");
  for (const char* when : {"1 weeks ago", "yesterday-ish"}) {
    r = Run(root, {"restore", "--at", when});
    INFO(r.Describe());
    CHECK(r.code == (std::string(when) == "yesterday-ish" ? 2 : 3));
    CHECK(HeadId(root) == later);
    CHECK(ReadFile(Work(root) / "later.txt") == "edited\n");
  }
  WriteOwned(Work(root) / "later.txt", "later\n");
  r = Run(root, {"restore", "--at", "now"});
  INFO(r.Describe());
  CHECK(r.code == 0);
  CHECK(HeadId(root) == later);
}


TEST_CASE("cli usage: --version", "[cli][usage]") {
  CmdResult r = RunCmd({AGENTENV_BIN, "--version"});
  CHECK(r.code == 0);
  CHECK(r.out.rfind("agentenv ", 0) == 0);
}


TEST_CASE("cli usage: ls and cat read an old node without restoring it", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/conf", "old\n");
  REQUIRE(Run(root, {"snap", "-m", "old"}).code == 0);
  std::string old = HeadId(root);
  WriteFile(Work(root) / "etc/conf", "new\n");
  REQUIRE(Run(root, {"snap", "-m", "new"}).code == 0);
  CmdResult c = Run(root, {"cat", old, "etc/conf"});
  CHECK(c.code == 0);
  CHECK(c.out == "old\n");
  CHECK(ReadFile(Work(root) / "etc/conf") == "new\n");  // nothing restored
  json ls = json::parse(Run(root, {"ls", old, "etc", "--json"}).out);
  bool found = false;
  for (const auto& e : ls["entries"]) found |= e["name"] == "conf" && e["kind"] == "file" && e["size"] == 4;
  CHECK(found);
  CHECK(Run(root, {"cat", old, "etc"}).code == 2);       // a directory
  CHECK(Run(root, {"cat", old, "etc/nope"}).code == 3);  // not there
  CHECK(Run(root, {"cat", old, "../etc/passwd"}).code == 2);
  CHECK(Run(root, {"ls", "nosuchref"}).code == 3);
}


TEST_CASE("cli usage: diff --stat counts changes per top-level directory", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string base = HeadId(root);
  WriteOwned(Work(root) / "etc/a", "a");
  WriteOwned(Work(root) / "etc/b", "b");
  WriteOwned(Work(root) / "top", "t");
  fs::remove(Work(root) / "bin/yes");
  REQUIRE(Run(root, {"snap"}).code == 0);
  CmdResult r = Run(root, {"diff", "--stat", base, "HEAD"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("+2      ~1      -0      etc/") != std::string::npos);  // two files, the dir's mtime
  CHECK(r.out.find("-1      bin/") != std::string::npos);
  CHECK(r.out.find("+1      ~0      -0      .") != std::string::npos);
  CHECK(r.out.find("3 added, 2 modified, 1 deleted") != std::string::npos);
}


TEST_CASE("cli usage: restore REF -- PATH puts back only those paths, saves unsaved changes first, makes a node", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::path w = Work(root);
  fs::create_directories(w / "app/conf.d");
  WriteFile(w / "app/conf.d/main.conf", "good\n");
  WriteFile(w / "app/keep.txt", "v1\n");
  if (::geteuid() == 0)
    for (auto& e : fs::recursive_directory_iterator(w / "app")) REQUIRE(::lchown(e.path().c_str(), 65534, 65534) == 0);
  if (::geteuid() == 0) REQUIRE(::lchown((w / "app").c_str(), 65534, 65534) == 0);
  REQUIRE(Run(root, {"snap", "-m", "good"}).code == 0);
  std::string good = HeadId(root);
  // Later: the config breaks, another file moves on, a stray file appears,
  // and the whole conf.d directory goes.
  WriteFile(w / "app/keep.txt", "v2\n");
  WriteFile(w / "app/stray", "x\n");
  fs::remove_all(w / "app/conf.d");
  REQUIRE(Run(root, {"snap", "-m", "broken"}).code == 0);
  WriteFile(w / "app/keep.txt", "v3 unsaved\n");

  CmdResult r = Run(root, {"restore", good, "--", "app/conf.d/main.conf", "app/stray"});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  CHECK(ReadFile(w / "app/conf.d/main.conf") == "good\n");  // back, with its directory
  CHECK_FALSE(fs::exists(w / "app/stray"));                  // not in the node: removed
  CHECK(ReadFile(w / "app/keep.txt") == "v3 unsaved\n");     // not named: untouched
  json j = json::parse(Run(root, {"head", "--json"}).out);
  CHECK(j["node"]["title"].get<std::string>().rfind("restored app/conf.d/main.conf, app/stray from ", 0) == 0);
  json show = json::parse(Run(root, {"show", j["node"]["parent"].get<std::string>(), "--json"}).out);
  CHECK(show["node"]["title"].get<std::string>().find("uncommitted changes") == 0);  // v3 was saved first
  CHECK(json::parse(Run(root, {"status", "--json"}).out)["dirty"] == false);

  CHECK(Run(root, {"restore", good, "--", "../etc/passwd"}).code == 2);
  CHECK(Run(root, {"restore", good, "--", "tmp/x"}).code == 2);  // ignored: never versioned
  CHECK(Run(root, {"restore", "nosuch", "--", "app"}).code == 3);
}

TEST_CASE("cli usage: an ignored file that came and went leaves status clean and makes no node", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  CmdResult head = Run(root, {"head", "--json"});
  REQUIRE(head.code == 0);
  // An editor's swap file (ignored by default) moves etc/'s mtime.
  struct stat before, after;
  REQUIRE(::stat((Work(root) / "etc").c_str(), &before) == 0);
  NextClockTick();  // so that the swap file's coming is a new mtime
  WriteOwned(Work(root) / "etc/.hosts.swp", "swap");
  CmdResult status = Run(root, {"status", "--json"});
  REQUIRE(status.code == 0);
  CHECK(status.Json()["dirty"] == false);
  fs::remove(Work(root) / "etc/.hosts.swp");
  REQUIRE(::stat((Work(root) / "etc").c_str(), &after) == 0);
  REQUIRE(after.st_mtim.tv_nsec + after.st_mtim.tv_sec * 1000000000L !=
          before.st_mtim.tv_nsec + before.st_mtim.tv_sec * 1000000000L);
  CHECK(Run(root, {"status", "--json"}).Json()["dirty"] == false);
  CmdResult snap = Run(root, {"snap", "--json"});
  REQUIRE(snap.code == 0);
  CHECK(Run(root, {"head", "--json"}).out == head.out);
  // A real change still records the directory exactly, mtime included.
  WriteOwned(Work(root) / "etc/motd", "hi\n");
  REQUIRE(Run(root, {"snap"}).code == 0);
  CHECK(Run(root, {"status", "--json"}).Json()["dirty"] == false);
}

TEST_CASE("cli usage: a sparse file exports as a sparse entry that GNU tar and bsdtar extract sparse", "[cli][usage][export]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  fs::path sparse = Work(root) / "var.img";
  WriteOwned(sparse, "head");
  fs::resize_file(sparse, 50 << 20);  // a 50 MiB file, nearly all hole
  {
    std::fstream f(sparse, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20'000'000);
    f << "middle";
  }
  REQUIRE(Run(root, {"snap"}).code == 0);
  fs::path file = tmp / "out.tar";
  REQUIRE(Run(root, {"export", "HEAD", "-o", file.string()}).code == 0);
  CHECK(fs::file_size(file) < (4u << 20));  // the zeros are not in the archive
  for (const char* tar : {"/usr/bin/tar", "/usr/bin/bsdtar"}) {
    INFO(tar);
    fs::path x = tmp / (std::string("x-") + fs::path(tar).filename().string());
    fs::create_directories(x);
    CmdResult r = RunCmd({tar, "-xf", file.string(), "-C", x.string()});
    CHECK(r.code == 0);
    CHECK(r.err == "");
    struct stat st;
    REQUIRE(::stat((x / "var.img").c_str(), &st) == 0);
    CHECK(st.st_size == (50 << 20));
    CHECK(uint64_t(st.st_blocks) * 512 < (4u << 20));  // extracted sparse
    CHECK(ReadFile(x / "var.img") == ReadFile(sparse));
  }
}

TEST_CASE("cli usage: a slow command shows progress on a terminal, -q and --json show none", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  std::string big(8 << 20, 'x');  // more than a pipe holds: export waits for its reader
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = char('a' + (i / 4096) % 26);
  WriteOwned(Work(root) / "big", big);
  REQUIRE(Run(root, {"snap"}).code == 0);
  // stderr on a terminal (script's pty), stdout into a reader that waits:
  // the export is slow for a known reason. The reader waits until the
  // progress line is in script's log (or `tenths` of a second pass), so the
  // test asks for a line, not for a machine fast enough to draw one in time.
  auto on_tty = [&](const std::string& flags, int tenths) {
    fs::path log = tmp / ("tty" + flags + ".log");
    std::string wait = "i=0; while [ $i -lt " + std::to_string(tenths) + " ] && ! grep -q 'exporting: ' " +
                       log.string() + " 2>/dev/null; do sleep 0.1; i=$((i+1)); done";
    std::string cmd = std::string(AGENTENV_BIN) + " export HEAD -o - --root " + root.string() + " " + flags +
                      " | (" + wait + "; cat >/dev/null)";
    CmdResult r = RunCmd(AsNobody({"/usr/bin/script", "-qfec", cmd, log.string()}));
    INFO(r.Describe());
    CHECK(r.code == 0);
    return r.out;
  };
  std::string shown = on_tty("", 300);
  CHECK(shown.find("exporting: ") != std::string::npos);
  CHECK(shown.find(" files, ") != std::string::npos);
  CHECK(shown.find("\r\033[K") != std::string::npos);  // the line is cleared at the end
  CHECK(on_tty("-q", 15).find("exporting") == std::string::npos);  // 1.5 s is three lines' time
  // -q: nothing on success, but data commands still print their data.
  WriteOwned(Work(root) / "etc/motd", "hi\n");
  CmdResult quiet = Run(root, {"snap", "-q"});
  CHECK(quiet.code == 0);
  CHECK(quiet.out == "");
  CHECK(Run(root, {"-q", "log"}).out.find("etc/motd") != std::string::npos);
}

TEST_CASE("cli usage: diff -- PATH limits the paths, -p shows content diffs, binary files say so", "[cli][usage]") {
  TempDir tmp;
  fs::path root = BusyboxRepo(tmp);
  WriteOwned(Work(root) / "etc/conf", "a = 1\nb = 2\nc = 3\n");
  WriteOwned(Work(root) / "etc/blob", std::string("bin\0ary", 7));
  REQUIRE(Run(root, {"snap"}).code == 0);
  WriteOwned(Work(root) / "etc/conf", "a = 1\nb = 20\nc = 3\n");
  WriteOwned(Work(root) / "etc/blob", std::string("bin\0ARY", 7));
  WriteOwned(Work(root) / "elsewhere", "x\n");
  REQUIRE(Run(root, {"snap"}).code == 0);

  CmdResult limited = Run(root, {"diff", "HEAD~1", "HEAD", "--json", "--", "etc"});
  REQUIRE(limited.code == 0);
  json j = limited.Json();
  CHECK(j["total"] == 2);  // etc/conf, etc/blob; not elsewhere
  CHECK(j.dump().find("elsewhere") == std::string::npos);

  CmdResult text = Run(root, {"diff", "HEAD~1", "HEAD", "-p", "--", "etc/conf", "etc/blob"});
  INFO(text.Describe());
  REQUIRE(text.code == 0);
  CHECK(text.out.find("--- a/etc/conf\n+++ b/etc/conf\n@@ -1,3 +1,3 @@\n a = 1\n-b = 2\n+b = 20\n c = 3\n") !=
        std::string::npos);
  CHECK(text.out.find("etc/blob: binary, no content diff") != std::string::npos);
  CHECK(Run(root, {"diff", "HEAD", "--", "../etc"}).code == 2);
}

}  // namespace agentenv::test
