// End-to-end tests of the agentenv binary: every command through its real
// argv, exit code, text and --json output, on real directories.
#include <catch2/catch.hpp>

#include <grp.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <atomic>
#include <set>

#include "tests/cli_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {


// A small tree with the usual kinds of entries.
void MakeSource(const fs::path& src) {
  fs::create_directories(src / "sub/deep");
  fs::create_directories(src / "empty");
  WriteFile(src / "a.txt", "alpha\n");
  auto bytes = RandomBytes(100000, 7);
  WriteFile(src / "sub/b.bin", std::string(bytes.begin(), bytes.end()));
  WriteFile(src / "sub/deep/c.txt", "gamma\n");
  WriteFile(src / "run.sh", "#!/bin/sh\necho hi\n");
  fs::permissions(src / "run.sh", fs::perms(0755));
  fs::create_symlink("a.txt", src / "link");
}

// A repository at tmp/repo seeded from a MakeSource tree.
fs::path InitRepo(const TempDir& tmp) {
  MakeSource(tmp / "src");
  fs::path root = tmp / "repo";
  CmdResult r = Agentenv(root, {"init", "--from", (tmp / "src").string()});
  INFO(r.Describe());
  REQUIRE(r.code == 0);
  return root;
}

json Snap(const fs::path& root, const std::string& msg) {
  int code = -1;
  json j = AgentenvJson(root, {"snap", "-m", msg}, &code);
  REQUIRE(code == 0);
  REQUIRE(j.value("created", false));
  return j["node"];
}


}  // namespace

TEST_CASE("cli: init --from copies the tree and takes the root snapshot", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  CHECK(ManifestDiff(TreeManifest(tmp / "src"), TreeManifest(Work(root))) == "");
  json log = AgentenvJson(root, {"log"});
  REQUIRE(log["nodes"].size() == 1);
  CHECK(log["nodes"][0]["parent"].is_null());
  CHECK(log["nodes"][0].value("head", false));
  // The live tree equals its snapshot.
  json st = AgentenvJson(root, {"status"});
  CHECK_FALSE(st.value("dirty", true));
  CHECK(st["head"].value("id", "") == log["nodes"][0].value("id", ""));
}

TEST_CASE("cli: init refuses an initialized repository and changes nothing", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  std::string head = HeadId(root);
  Manifest before = TreeManifest(Work(root));
  fs::create_directories(tmp / "other");
  WriteFile(tmp / "other/x.txt", "x");

  CmdResult r = Agentenv(root, {"init", "--from", (tmp / "other").string()});
  INFO(r.Describe());
  CHECK(r.code == 6);
  CHECK(r.err.find("agentenv:") != std::string::npos);

  int code = -1;
  json j = AgentenvJson(root, {"init", "--from", (tmp / "other").string()}, &code);
  CHECK(code == 6);
  CHECK(j.value("ok", true) == false);
  CHECK(j["error"].value("code", "") == "exists");

  WriteTar(tmp / "t.tar", {{"y.txt", '0', "", "y"}});
  CHECK(Agentenv(root, {"init", "--tarball", (tmp / "t.tar").string()}).code == 6);

  CHECK(ManifestDiff(before, TreeManifest(Work(root))) == "");
  CHECK(HeadId(root) == head);
  CHECK(AgentenvJson(root, {"log"})["nodes"].size() == 1);
}

TEST_CASE("cli: init from a source that does not exist fails and leaves no repository root", "[cli]") {
  TempDir tmp;
  fs::path root = tmp / "repo";
  CmdResult r = Agentenv(root, {"init", "--from", (tmp / "missing").string()});
  INFO(r.Describe());
  CHECK(r.code != 0);
  CHECK(r.err.find((tmp / "missing").string()) != std::string::npos);
  CHECK_FALSE(fs::exists(root));
  // An existing root directory stays, with what was in it.
  fs::create_directories(root);
  WriteFile(root / "keep.txt", "k");
  CHECK(Agentenv(root, {"init", "--from", (tmp / "missing").string()}).code != 0);
  CHECK(fs::exists(root / "keep.txt"));
  for (const auto& e : fs::directory_iterator(root)) CHECK(e.path().filename() == "keep.txt");
}

TEST_CASE("cli: init --tarball unpacks tar.gz and tar.zst made by GNU tar", "[cli]") {
  TempDir tmp;
  MakeSource(tmp / "src");
  Manifest want = TreeManifest(tmp / "src");
  for (std::string ext : {"gz", "zst"}) {
    SECTION(ext) {
      fs::path archive = tmp / ("rootfs.tar." + ext);
      CmdResult t = RunCmd({"/usr/bin/tar", ext == "gz" ? "--gzip" : "--zstd", "-cf", archive.string(), "-C",
                            (tmp / "src").string(), "."});
      INFO(t.Describe());
      REQUIRE(t.code == 0);
      fs::path root = tmp / ("repo-" + ext);
      int code = -1;
      json j = AgentenvJson(root, {"init", "--tarball", archive.string()}, &code);
      REQUIRE(code == 0);
      CHECK(j.value("ok", false));
      CHECK(j["node"].value("id", "").size() == 64);
      CHECK(ManifestDiff(want, TreeManifest(Work(root))) == "");
      CHECK_FALSE(AgentenvJson(root, {"status"}).value("dirty", true));
    }
  }
}

TEST_CASE("cli: init --tarball refuses hostile archives and writes nothing outside", "[cli]") {
  TempDir tmp;
  fs::path outside = tmp / "outside";
  fs::create_directories(outside);
  WriteFile(outside / "secret", "original\n");
  fs::path root = tmp / "repo";
  const std::string out = outside.string();

  struct Case {
    const char* what;
    std::vector<TarEntry> entries;
  };
  std::vector<Case> cases = {
      {"dot-dot entry", {{"ok.txt", '0', "", "ok"}, {"../../../outside/dotdot", '0', "", "evil"}}},
      {"dot-dot after a leading '/'", {{"/../../../outside/absolute", '0', "", "evil"}}},
      {"write through an absolute symlink", {{"a", '2', out}, {"a/through-symlink", '0', "", "evil"}}},
      {"write through a relative symlink", {{"b", '2', "../../../outside"}, {"b/through-relative", '0', "", "evil"}}},
      {"hardlink with ..", {{"h", '1', "../../../outside/secret", "PWNED\n"}}},
      {"absolute hardlink", {{"h", '1', out + "/secret", "PWNED\n"}}},
      {"hardlink through a symlink", {{"a", '2', out}, {"h", '1', "a/secret", "PWNED\n"}}},
  };
  for (const auto& c : cases) {
    SECTION(c.what) {
      fs::path archive = tmp / "hostile.tar";
      WriteTar(archive, c.entries);
      CmdResult r = Agentenv(root, {"init", "--tarball", archive.string()});
      INFO(c.what << "\n" << r.Describe());
      CHECK(r.code != 0);
      CHECK(r.err.find("agentenv: ") != std::string::npos);
      // Nothing escaped: the outside directory is as it was.
      Manifest m = TreeManifest(outside);
      CHECK(m.size() == 1);
      CHECK(ReadFile(outside / "secret") == "original\n");
      struct stat st;
      REQUIRE(::stat((outside / "secret").c_str(), &st) == 0);
      CHECK(st.st_nlink == 1);
      for (const char* p : {"dotdot", "absolute", "through-relative"}) CHECK_FALSE(fs::exists(tmp / p));
      CHECK_FALSE(fs::exists(tmp / "repo/dotdot"));
      CHECK_FALSE(fs::exists(tmp / "repo/work/dotdot"));
      // A refused archive leaves no repository behind: init works afterwards.
      MakeSource(tmp / "src");
      CmdResult again = Agentenv(root, {"init", "--from", (tmp / "src").string()});
      INFO(again.Describe());
      CHECK(again.code == 0);
    }
  }
}

TEST_CASE("cli: snap makes a node only when something changed", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  std::string head = HeadId(root);
  int code = -1;
  json j = AgentenvJson(root, {"snap"}, &code);
  CHECK(code == 0);
  CHECK(j.value("ok", false));
  CHECK(j.value("created", true) == false);
  CHECK(j["node"].is_null());
  CHECK(HeadId(root) == head);

  WriteFile(Work(root) / "new.txt", "new\n");
  json node = Snap(root, "added new.txt");
  CHECK(node.value("title", "") == "added new.txt");
  CHECK(node.value("parent", "") == head);
  CHECK(HeadId(root) == node.value("id", ""));
  CHECK(AgentenvJson(root, {"commit", "-m", "again"}).value("created", true) == false);

  // Text form.
  CmdResult t = Agentenv(root, {"snap"});
  CHECK(t.code == 0);
  CHECK(t.out.find("nothing changed") != std::string::npos);
}

TEST_CASE("cli: log, show and diff", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  WriteFile(Work(root) / "one.txt", "1\n");
  json n1 = Snap(root, "first");
  WriteFile(Work(root) / "a.txt", "changed\n");
  fs::remove(Work(root) / "sub/deep/c.txt");
  json n2 = Snap(root, "second");

  json log = AgentenvJson(root, {"log"});
  REQUIRE(log["nodes"].size() == 3);
  CHECK(log["nodes"][0].value("id", "") == n2.value("id", ""));
  CHECK(log["nodes"][1].value("id", "") == n1.value("id", ""));
  CHECK(log["nodes"][0].value("head", false));
  CHECK_FALSE(log["nodes"][1].value("head", true));
  CHECK_FALSE(log["nodes"][2].value("head", true));
  CHECK(log["nodes"][0].value("parent", "") == n1.value("id", ""));
  CHECK(log["nodes"][0].value("seq", 0) > log["nodes"][1].value("seq", 0));
  CHECK(AgentenvJson(root, {"log", "-n", "1"})["nodes"].size() == 1);
  CmdResult text = Agentenv(root, {"log"});
  CHECK(text.out.rfind("* " + n2.value("short", ""), 0) == 0);

  json show = AgentenvJson(root, {"show", n1.value("short", "")})["node"];
  CHECK(show.value("message", "") == "first");
  CHECK(show.value("id", "") == n1.value("id", ""));
  CHECK(show["changes"].value("added", 0) == 1);
  REQUIRE(show["changes"]["sample"].size() == 1);
  CHECK(show["changes"]["sample"][0].value("path", "") == "one.txt");
  CHECK(show["changes"]["sample"][0].value("op", "") == "+");
  CHECK(Agentenv(root, {"show"}).out.find("second") != std::string::npos);

  // Between two nodes.
  json d = AgentenvJson(root, {"diff", n1.value("id", ""), n2.value("id", "")});
  std::set<std::string> got;
  for (const auto& c : d["changes"]) got.insert(c.value("op", "") + " " + c.value("path", ""));
  CHECK(got.count("M a.txt"));
  CHECK(got.count("- sub/deep/c.txt"));
  CHECK_FALSE(got.count("+ one.txt"));
  CHECK(d.value("total", size_t(0)) == d["changes"].size());
  // Against the live tree (default: HEAD).
  CHECK(AgentenvJson(root, {"diff"}).value("total", 99) == 0);
  CHECK(Agentenv(root, {"diff"}).out.find("no differences") != std::string::npos);
  WriteFile(Work(root) / "live.txt", "live\n");
  json live = AgentenvJson(root, {"diff"});
  REQUIRE(live.value("total", 0) == 1);
  CHECK(live["changes"][0].value("path", "") == "live.txt");
  CHECK(live["changes"][0].value("op", "") == "+");
  json live1 = AgentenvJson(root, {"diff", "HEAD~1"});
  CHECK(live1.value("total", 0) >= 3);
}

TEST_CASE("cli: tags can be set, listed, used and deleted", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  std::string first = HeadId(root);
  WriteFile(Work(root) / "x.txt", "x");
  Snap(root, "x");
  json t = AgentenvJson(root, {"tag", "base", "HEAD~1"});
  CHECK(t.value("ok", false));
  CHECK(t.value("id", "") == first);
  json list = AgentenvJson(root, {"tag"});
  REQUIRE(list["tags"].size() == 1);
  CHECK(list["tags"][0].value("name", "") == "base");
  CHECK(list["tags"][0].value("id", "") == first);
  CHECK(Agentenv(root, {"log"}).out.find("[base]") != std::string::npos);
  CHECK(AgentenvJson(root, {"show", "base"})["node"].value("id", "") == first);

  json d = AgentenvJson(root, {"tag", "-d", "base"});
  CHECK(d.value("deleted", "") == "base");
  CHECK(AgentenvJson(root, {"tag"})["tags"].empty());
  CHECK(Agentenv(root, {"show", "base"}).code == 3);
  CHECK(Agentenv(root, {"tag", "-d", "base"}).code == 3);
  CHECK(Agentenv(root, {"tag", "t2", "nosuchnode"}).code == 3);
}

TEST_CASE("cli: restore by tag, prefix and HEAD~1, uncommitted changes are saved first", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  fs::path w = Work(root);
  Manifest m0 = TreeManifest(w);
  std::string n0 = HeadId(root);
  REQUIRE(Agentenv(root, {"tag", "start"}).code == 0);

  WriteFile(w / "a.txt", "second version\n");
  fs::remove_all(w / "sub");
  fs::create_directories(w / "newdir");
  WriteFile(w / "newdir/n.txt", "n");
  fs::permissions(w / "run.sh", fs::perms(0700));
  std::string n1 = Snap(root, "one").value("id", "");
  Manifest m1 = TreeManifest(w);

  // HEAD~1.
  int code = -1;
  json r = AgentenvJson(root, {"restore", "HEAD~1"}, &code);
  REQUIRE(code == 0);
  CHECK(r["saved"].is_null());
  CHECK(r["node"].value("id", "") == n0);
  CHECK(ManifestDiff(m0, TreeManifest(w)) == "");
  CHECK(HeadId(root) == n0);
  CHECK_FALSE(AgentenvJson(root, {"status"}).value("dirty", true));

  // A short prefix.
  r = AgentenvJson(root, {"checkout", n1.substr(0, 8)}, &code);
  REQUIRE(code == 0);
  CHECK(ManifestDiff(m1, TreeManifest(w)) == "");
  CHECK(HeadId(root) == n1);

  // A tag, with uncommitted changes: they are saved first and restorable.
  WriteFile(w / "a.txt", "dirty\n");
  WriteFile(w / "dirty.txt", "unsaved work\n");
  Manifest dirty = TreeManifest(w);
  r = AgentenvJson(root, {"restore", "start"}, &code);
  REQUIRE(code == 0);
  REQUIRE(r["saved"].is_string());
  std::string saved = r["saved"].get<std::string>();
  CHECK(ManifestDiff(m0, TreeManifest(w)) == "");
  json show = AgentenvJson(root, {"show", saved})["node"];
  CHECK(show.value("parent", "") == n1);
  r = AgentenvJson(root, {"restore", saved}, &code);
  REQUIRE(code == 0);
  CHECK(r["saved"].is_null());
  CHECK(ManifestDiff(dirty, TreeManifest(w)) == "");
  CHECK(ReadFile(w / "dirty.txt") == "unsaved work\n");

  // Both lines of history are branch tips now? The saved node is HEAD and a tip.
  json br = AgentenvJson(root, {"branches"});
  bool found = false;
  for (const auto& b : br["branches"]) found |= b.value("id", "") == saved;
  CHECK(found);
}

TEST_CASE("cli: errors: unknown ref, bad flag, JSON error shape", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Manifest before = TreeManifest(Work(root));

  CmdResult r = Agentenv(root, {"restore", "nosuchref"});
  INFO(r.Describe());
  CHECK(r.code == 3);
  CHECK(r.err.find("nosuchref") != std::string::npos);
  CHECK(r.out.empty());

  int code = -1;
  json j = AgentenvJson(root, {"restore", "nosuchref"}, &code);
  CHECK(code == 3);
  REQUIRE(j.is_object());
  CHECK(j.size() == 2);
  CHECK(j["ok"] == false);
  REQUIRE(j["error"].is_object());
  CHECK(j["error"].size() == 2);
  CHECK(j["error"]["code"] == "not_found");
  CHECK(j["error"]["message"].get<std::string>().find("nosuchref") != std::string::npos);

  CHECK(Agentenv(root, {"show", "HEAD~5"}).code == 3);
  CHECK(Agentenv(root, {"diff", "deadbeefdead"}).code == 3);

  r = Agentenv(root, {"snap", "--bogus-flag"});
  CHECK(r.code == 2);
  CHECK(r.err.find("bogus") != std::string::npos);
  j = AgentenvJson(root, {"snap", "--bogus-flag"}, &code);
  CHECK(code == 2);
  CHECK(j["ok"] == false);
  CHECK(j["error"]["code"] == "invalid");
  CHECK(RunCmd({AGENTENV_BIN, "frobnicate"}).code == 2);
  CHECK(RunCmd({AGENTENV_BIN}).code == 2);
  CHECK(Agentenv(root, {"restore"}).code == 2);  // missing ref

  // Not a repository.
  j = AgentenvJson(tmp / "nothing", {"log"}, &code);
  CHECK(code == 3);
  CHECK(j["error"]["code"] == "not_found");

  CHECK(ManifestDiff(before, TreeManifest(Work(root))) == "");
  CHECK(AgentenvJson(root, {"log"})["nodes"].size() == 1);
}

TEST_CASE("cli: status reports a dirty tree", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  json st = AgentenvJson(root, {"status"});
  CHECK(st.value("dirty", true) == false);
  CHECK(st.value("changed", 99) == 0);
  CHECK(st.value("nodes", 0) == 1);
  CHECK(Agentenv(root, {"status"}).out.find("clean") != std::string::npos);

  WriteFile(Work(root) / "a.txt", "modified\n");
  WriteFile(Work(root) / "b.txt", "added\n");
  st = AgentenvJson(root, {"status"});
  CHECK(st.value("dirty", false));
  CHECK(st.value("changed", 0) == 2);
  std::set<std::string> got;
  for (const auto& c : st["changes"]) got.insert(c.value("op", "") + " " + c.value("path", ""));
  CHECK(got == std::set<std::string>{"M a.txt", "+ b.txt"});
  // status does not make a node.
  CHECK(AgentenvJson(root, {"log"})["nodes"].size() == 1);
  Snap(root, "x");
  CHECK_FALSE(AgentenvJson(root, {"status"}).value("dirty", true));
}

TEST_CASE("cli: fsck is clean, then finds a flipped byte in a pack", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  auto big = RandomBytes(1 << 20, 99);  // incompressible: the pack is mostly this payload
  WriteFile(Work(root) / "big.bin", std::string(big.begin(), big.end()));
  Snap(root, "big");

  int code = -1;
  json j = AgentenvJson(root, {"fsck"}, &code);
  CHECK(code == 0);
  CHECK(j.value("errors", 99) == 0);
  CHECK(j.value("objects", 0) > 0);
  CHECK(Agentenv(root, {"fsck"}).code == 0);

  fs::path biggest;
  uintmax_t size = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "store/packs"))
    if (e.is_regular_file() && e.file_size() > size) size = e.file_size(), biggest = e.path();
  REQUIRE(size > (1 << 19));
  {
    int fd = ::open(biggest.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    off_t off = off_t(size / 2);
    unsigned char c;
    REQUIRE(::pread(fd, &c, 1, off) == 1);
    c ^= 0x5a;
    REQUIRE(::pwrite(fd, &c, 1, off) == 1);
    ::close(fd);
  }
  CmdResult r = Agentenv(root, {"fsck"});
  INFO(r.Describe());
  CHECK(r.code == 4);
  CHECK(r.err.find("error") != std::string::npos);
  j = AgentenvJson(root, {"fsck"}, &code);
  CHECK(code == 4);
  CHECK(j.value("ok", true) == false);
  CHECK(j.value("errors", 0) >= 1);
  CHECK_FALSE(j["findings"].empty());
}

TEST_CASE("cli daemon: captures automatically, serves the socket, stops on SIGTERM", "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  fs::path sock = root / "agentenv.sock";
  Daemon d(root, {"--quiet-ms", "100", "--max-delay-ms", "500"});
  REQUIRE(d.WaitReady());
  INFO("daemon log:\n" << d.Log());
  struct stat st;
  REQUIRE(::stat(sock.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  // A second daemon on the same repository is refused.
  CmdResult second = Agentenv(root, {"daemon", "--quiet-ms", "100"}, 10000);
  CHECK(second.code == 5);

  WriteFile(Work(root) / "hello-auto.txt", "hello\n");
  json log;
  bool captured = WaitFor([&] {
    log = Ctl(root, "log");
    return log.is_object() && !log["nodes"].empty() &&
           log["nodes"][0].value("title", "").find("hello-auto.txt") != std::string::npos;
  }, 10000);
  INFO(log.dump());
  CHECK(captured);
  CHECK(log["nodes"].size() == 2);
  CHECK(log["nodes"][0].value("head", false));

  // ctl reports daemon errors with the CLI's exit codes.
  CHECK(Agentenv(root, {"ctl", "show", "ref=nosuchref"}).code == 3);
  CHECK(Agentenv(root, {"ctl", "frobnicate"}).code == 2);
  json snap = Ctl(root, "snapshot", {"message=by ctl"});
  CHECK(snap.value("created", true) == false);

  // A malformed line gets an error; the connection stays usable.
  SocketClient c;
  REQUIRE(c.Connect(sock));
  json e = c.Call("this is not json");
  REQUIRE(e.is_object());
  CHECK(e.value("ok", true) == false);
  CHECK(e["error"].value("code", "") == "invalid");
  e = c.Call(R"({"id":1,"args":{}})");
  CHECK(e.value("ok", true) == false);
  json h = c.Call(R"({"id":7,"op":"head"})");
  CHECK(h.value("ok", false));
  CHECK(h["id"] == 7);
  CHECK(h["result"]["node"].value("id", "") == log["nodes"][0].value("id", ""));

  // Two clients at once: the second is answered while the first stays connected.
  SocketClient c2;
  REQUIRE(c2.Connect(sock));
  REQUIRE(c.Send(R"({"id":"a","op":"log","args":{"limit":1}})"));
  REQUIRE(c2.Send(R"({"id":"b","op":"status"})"));
  json rb = c2.Receive();
  json ra = c.Receive();
  CHECK(ra["id"] == "a");
  CHECK(ra.value("ok", false));
  CHECK(rb["id"] == "b");
  CHECK(rb.value("ok", false));
  CHECK(rb["result"].value("dirty", true) == false);
  // And several ctl processes in parallel (no Catch2 assertion on these
  // threads: they are not thread-safe; the count is checked after the join).
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k) {
        CmdResult r = RunCmd({AGENTENV_BIN, "ctl", k % 2 ? "log" : "head", "--root", root.string(), "--json"});
        json j = json::parse(r.out, nullptr, false);
        ok += r.code == 0 && j.is_object() && j.value("ok", false) ? 1 : 0;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(ok == 20);

  // SIGTERM: the last changes become a node, the socket goes away, exit 0.
  WriteFile(Work(root) / "last.txt", "last\n");
  int rc = d.Stop();
  CHECK(rc == 0);
  CHECK_FALSE(fs::exists(sock));
  CHECK(AgentenvJson(root, {"snap"}).value("created", true) == false);
  CHECK(Agentenv(root, {"ctl", "head"}).code == 3);  // no daemon
}

TEST_CASE("cli daemon: 50 concurrent clients are all answered", "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  fs::path sock = root / "agentenv.sock";
  Daemon d(root, {"--quiet-ms", "100"});
  REQUIRE(d.WaitReady());
  INFO("daemon log:\n" << d.Log());

  // 50 connections open at once, each sending before any reads: a server
  // that answered clients one after another would time out here.
  std::vector<SocketClient> clients(50);
  for (auto& c : clients) REQUIRE(c.Connect(sock));
  for (size_t i = 0; i < clients.size(); ++i) {
    std::string op = i % 3 == 0 ? "log" : i % 3 == 1 ? "head" : "status";
    REQUIRE(clients[i].Send("{\"id\":" + std::to_string(i) + ",\"op\":\"" + op + "\"}"));
  }
  int answered = 0;
  for (size_t i = 0; i < clients.size(); ++i) {
    json r = clients[i].Receive();
    answered += r.is_object() && r.value("ok", false) && r["id"] == i;
  }
  CHECK(answered == 50);
}

TEST_CASE("cli daemon: a peer of another uid is refused", "[cli][daemon]") {
  if (::geteuid() != 0) Skip("needs root to act as uid 65534");
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  fs::path sock = root / "agentenv.sock";
  Daemon d(root, {"--quiet-ms", "100"});
  REQUIRE(d.WaitReady());
  INFO("daemon log:\n" << d.Log());

  // Let uid 65534 reach the socket through the file system, so that only
  // the daemon's SO_PEERCRED check stands between it and the repository.
  for (fs::path p = sock.parent_path(); p != tmp.path().parent_path(); p = p.parent_path())
    ::chmod(p.c_str(), 0755);
  REQUIRE(::chmod(sock.c_str(), 0666) == 0);
  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0)
      ::_exit(10);
    SocketClient c;
    if (!c.Connect(sock)) ::_exit(11);
    json r = c.Call(R"({"id":1,"op":"rollback","args":{"ref":"HEAD"}})");
    std::string out = r.is_object() ? r.dump() : "no answer";
    if (::write(pipefd[1], out.data(), out.size()) < 0) ::_exit(12);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) got.append(buf, n);
  ::close(pipefd[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  INFO(got);
  json r = json::parse(got, nullptr, false);
  REQUIRE(r.is_object());
  CHECK(r.value("ok", true) == false);
  CHECK(r["error"].value("code", "") == "denied");
  // The daemon still serves its own uid.
  CHECK(Ctl(root, "head").value("ok", false));
}

TEST_CASE("cli daemon: a request with wrongly typed arguments gets an error and the daemon survives",
          "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Daemon d(root, {"--no-capture"});
  REQUIRE(d.WaitReady());
  SocketClient c;
  REQUIRE(c.Connect(root / "agentenv.sock"));
  for (const char* req : {R"({"id":1,"op":"tag","args":{"name":"x","delete":"yes"}})",
                          R"({"id":2,"op":"log","args":{"limit":-1}})",
                          R"({"id":3,"op":"rollback","args":{"ref":5}})",
                          R"({"id":4,"op":"head","args":"notanobject"})"}) {
    json r = c.Call(req, 5000);
    INFO(req << " -> " << r.dump() << "\ndaemon log:\n" << d.Log());
    REQUIRE(r.is_object());
    CHECK(r.value("ok", true) == false);
    CHECK(r["error"].value("code", "") == "invalid");
  }
  SocketClient c2;
  CHECK(c2.Connect(root / "agentenv.sock"));
  CHECK(c2.Call(R"({"op":"head"})", 5000).value("ok", false));
  CHECK(d.Stop() == 0);
}

// Peak RSS of pid in KiB (VmHWM).
long PeakRssKb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

TEST_CASE("cli daemon: a request line over 16 MiB gets an error, memory stays bounded, others are served",
          "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Daemon d(root, {"--no-capture"});
  REQUIRE(d.WaitReady());
  long before = PeakRssKb(d.child().pid());
  SocketClient c;
  REQUIRE(c.Connect(root / "agentenv.sock"));
  std::string mb(1 << 20, 'x');
  size_t sent = 0;
  for (int i = 0; i < 100; ++i) {  // 100 MB, no newline; the daemon hangs up after 16 MiB
    if (!c.SendRaw(mb)) break;
    sent += mb.size();
  }
  CHECK(sent < (size_t{40} << 20));
  json r = c.Receive(5000);
  INFO(r.dump() << "\ndaemon log:\n" << d.Log());
  REQUIRE(r.is_object());
  CHECK(r.value("ok", true) == false);
  CHECK(r["error"].value("code", "") == "invalid");
  CHECK(r["error"].value("message", "").find("16 MiB") != std::string::npos);
  long after = PeakRssKb(d.child().pid());
  INFO("peak RSS before " << before << " KiB, after " << after << " KiB");
  CHECK(after - before < 60 * 1024 * kSanitizerMemory);
  SocketClient c2;
  REQUIRE(c2.Connect(root / "agentenv.sock"));
  CHECK(c2.Call(R"({"op":"head"})", 5000).value("ok", false));
  CHECK(d.Stop() == 0);
}

namespace {


// Whether `v` has the JSON type named by `type` (null is no type's value).
bool HasType(const json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  return false;
}

// The first way `v` violates `schema` (types of declared properties and
// required keys, one level deep), or "".
std::string SchemaViolation(const json& v, const json& schema) {
  if (schema.contains("type")) {
    const json& t = schema["type"];
    bool ok = t.is_string() ? HasType(v, t.get<std::string>()) : false;
    if (t.is_array())
      for (const auto& x : t) ok |= HasType(v, x.get<std::string>());
    if (!ok) return "value " + v.dump().substr(0, 80) + " is not of type " + t.dump();
  }
  if (v.is_object() && schema.contains("required"))
    for (const auto& k : schema["required"])
      if (!v.contains(k.get<std::string>())) return "missing required '" + k.get<std::string>() + "'";
  if (v.is_object() && schema.contains("properties"))
    for (const auto& [k, s] : schema["properties"].items())
      if (v.contains(k)) {
        std::string inner = SchemaViolation(v[k], s);
        if (!inner.empty()) return "property '" + k + "': " + inner;
      }
  return "";
}

}  // namespace

TEST_CASE("cli mcp: initialize, tools, snapshot/log/rollback and errors", "[cli][mcp]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Mcp m(root);
  json init = m.Request("initialize", {{"protocolVersion", "2025-11-25"},
                                       {"capabilities", json::object()},
                                       {"clientInfo", {{"name", "cli_test"}, {"version", "1"}}}});
  REQUIRE(init.contains("result"));
  CHECK(init["result"].value("protocolVersion", "") == "2025-11-25");
  CHECK(init["result"]["capabilities"].contains("tools"));
  CHECK(init["result"]["serverInfo"].value("name", "") == "agentenv");
  m.Notify("notifications/initialized");

  json list = m.Request("tools/list", json::object());
  REQUIRE(list["result"]["tools"].is_array());
  std::map<std::string, json> tools;
  for (const auto& t : list["result"]["tools"]) {
    INFO(t.dump());
    CHECK(t["inputSchema"].value("type", "") == "object");
    CHECK(t["outputSchema"].value("type", "") == "object");
    CHECK_FALSE(t.value("description", "").empty());
    tools[t.value("name", "")] = t;
  }
  for (const char* name : {"snapshot", "rollback", "log", "diff", "show", "status"}) CHECK(tools.count(name));

  WriteFile(Work(root) / "model-wrote.txt", "by the model\n");
  json snap = m.Call("snapshot", {{"message", "before risky step"}});
  REQUIRE(snap.contains("result"));
  CHECK(snap["result"].value("isError", true) == false);
  CHECK(snap["result"]["structuredContent"].value("created", false));
  CHECK(snap["result"]["content"][0].value("type", "") == "text");

  json log = m.Call("log", {{"limit", 5}});
  REQUIRE(log["result"]["structuredContent"]["nodes"].size() == 2);
  CHECK(log["result"]["structuredContent"]["nodes"][0].value("title", "") == "before risky step");

  json rb = m.Call("rollback", {{"ref", "HEAD~1"}});
  CHECK(rb["result"].value("isError", true) == false);
  CHECK_FALSE(fs::exists(Work(root) / "model-wrote.txt"));

  json bad = m.Call("rollback", {{"ref", "no-such-node"}});
  REQUIRE(bad.contains("result"));
  CHECK(bad["result"].value("isError", false));
  std::string text = bad["result"]["content"][0].value("text", "");
  CHECK(text.find("did not happen") != std::string::npos);
  CHECK(text.find("no-such-node") != std::string::npos);

  json unknown = m.Request("server/discover", json::object());
  REQUIRE(unknown.contains("error"));
  CHECK(unknown["error"].value("code", 0) == -32601);
  CHECK(m.Request("ping", json::object()).contains("result"));
  // Still serving after the errors.
  CHECK(m.Call("head", json::object())["result"].value("isError", true) == false);
}

TEST_CASE("cli mcp: structuredContent conforms to each tool's outputSchema", "[cli][mcp]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Mcp m(root);
  REQUIRE(m.Request("initialize", {{"protocolVersion", "2025-11-25"}, {"capabilities", json::object()},
                                   {"clientInfo", {{"name", "t"}, {"version", "1"}}}})
              .contains("result"));
  std::map<std::string, json> schema;
  json list = m.Request("tools/list", json::object());
  REQUIRE(list["result"]["tools"].is_array());
  for (const auto& t : list["result"]["tools"]) schema[t.value("name", "")] = t["outputSchema"];
  REQUIRE(schema.size() >= 9);

  WriteFile(Work(root) / "f.txt", "f\n");
  std::vector<std::pair<std::string, json>> calls = {
      {"snapshot", {{"message", "m"}}},   // creates a node
      {"snapshot", json::object()},       // nothing changed: no node
      {"tag", {{"name", "t1"}}},
      {"tag", json::object()},
      {"log", json::object()},
      {"diff", {{"from", "HEAD~1"}, {"to", "HEAD"}}},
      {"show", {{"ref", "HEAD"}}},
      {"head", json::object()},
      {"branches", json::object()},
      {"status", json::object()},
      {"rollback", {{"ref", "HEAD~1"}}},  // clean tree: nothing saved
  };
  for (const auto& [tool, args] : calls) {
    json r = m.Call(tool, args);
    INFO(tool << " " << args.dump() << " -> " << r.dump().substr(0, 600));
    REQUIRE(r.contains("result"));
    CHECK(r["result"].value("isError", true) == false);
    CHECK(SchemaViolation(r["result"]["structuredContent"], schema[tool]) == "");
  }
}

TEST_CASE("cli mcp: a tool call with wrongly typed arguments is an error result, not a crash", "[cli][mcp]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  Mcp m(root);
  REQUIRE(m.Initialize().contains("result"));
  for (const json& args : {json{{"name", "x"}, {"delete", "yes"}}, json{{"name", 3}}}) {
    json r = m.Call("tag", args);
    INFO(args.dump() << " -> " << r.dump());
    REQUIRE(r.contains("result"));
    CHECK(r["result"].value("isError", false));
  }
  CHECK(m.Call("head", json::object())["result"].value("isError", true) == false);
}


namespace {

// Whether some process holds the repository lock (flock on <root>/lock).
bool LockHeld(const fs::path& root) {
  UniqueFd fd(::open((root / "lock").c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return false;
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return false;
  return errno == EWOULDBLOCK;
}

size_t Count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("cli daemon: holds the lock and CLI writers run through it with the same output", "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  // Without a daemon: writers run here.
  WriteFile(Work(root) / "direct.txt", "direct\n");
  int code = -1;
  json direct = AgentenvJson(root, {"snap", "-m", "direct"}, &code);
  REQUIRE(code == 0);
  CHECK(direct.value("created", false));
  CmdResult nothing_direct = Agentenv(root, {"snap"});
  CmdResult missing_direct = Agentenv(root, {"restore", "nosuch", "--json"});
  CHECK_FALSE(LockHeld(root));

  Daemon d(root, {"--no-capture"});
  REQUIRE(d.WaitReady());
  INFO("daemon log:\n" << d.Log());
  CHECK(WaitFor([&] { return LockHeld(root); }, 10000));

  // A second daemon is refused, clearly, and leaves the first one serving.
  CmdResult second = Agentenv(root, {"daemon", "--no-capture"}, 10000);
  CHECK(second.code == 5);
  CHECK(second.err.find("another daemon is already serving") != std::string::npos);

  WriteFile(Work(root) / "routed.txt", "routed\n");
  json routed = AgentenvJson(root, {"snap", "-m", "through the daemon"}, &code);
  CHECK(code == 0);
  CHECK(routed.value("created", false));
  CHECK(routed["node"].value("title", "") == "through the daemon");
  std::set<std::string> keys_direct, keys_routed;
  for (const auto& [k, v] : direct.items()) keys_direct.insert(k);
  for (const auto& [k, v] : routed.items()) keys_routed.insert(k);
  CHECK(keys_direct == keys_routed);
  // Same text, same error JSON, same exit codes as without a daemon.
  CmdResult nothing_routed = Agentenv(root, {"snap"});
  CHECK(nothing_routed.code == nothing_direct.code);
  CHECK(nothing_routed.out == nothing_direct.out);
  CmdResult missing_routed = Agentenv(root, {"restore", "nosuch", "--json"});
  CHECK(missing_routed.code == 3);
  CHECK(missing_routed.out == missing_direct.out);

  CmdResult tag = Agentenv(root, {"tag", "good"});
  CHECK(tag.code == 0);
  CHECK(tag.out.find("as good") != std::string::npos);
  CmdResult restore = Agentenv(root, {"restore", "HEAD~1"});
  CHECK(restore.code == 0);
  CHECK_FALSE(fs::exists(Work(root) / "routed.txt"));
  CHECK(fs::exists(Work(root) / "direct.txt"));
  CHECK(AgentenvJson(root, {"status"}).value("dirty", true) == false);
  // Readers run here: they never need the lock.
  CmdResult log = Agentenv(root, {"log"});
  CHECK(log.code == 0);
  CHECK(log.out.find("through the daemon") != std::string::npos);

  // The daemon logs each operation it serves by its name in the op table.
  std::string dlog = d.Log();
  CHECK(Count(dlog, "client: snapshot") == 2);
  CHECK(Count(dlog, "client: rollback") == 2);
  CHECK(Count(dlog, "client: tag") == 1);
  CHECK(Count(dlog, "client: status") == 1);
  CHECK(Count(dlog, "client: log") == 0);

  // The MCP server hands its writers to the daemon as well.
  {
    Mcp m(root);
    REQUIRE(m.Initialize().contains("result"));
    WriteFile(Work(root) / "mcp.txt", "mcp\n");
    json r = m.Call("snapshot", {{"message", "by mcp"}});
    INFO(r.dump());
    CHECK(r["result"].value("isError", true) == false);
    CHECK(r["result"]["structuredContent"].value("created", false));
  }

  CHECK(d.Stop() == 0);
  CHECK_FALSE(LockHeld(root));
  // Without the daemon, writers run here again.
  WriteFile(Work(root) / "after.txt", "after\n");
  CHECK(AgentenvJson(root, {"snap", "-m", "after"}).value("created", false));
  CHECK(Count(d.Log(), "client: snapshot") == 3);  // the two CLI snaps and MCP's
}

}  // namespace agentenv::test

namespace agentenv::test {
namespace {

TEST_CASE("cli: tree paths are normalized, and one leading outside the tree is a usage error", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  fs::path work = root / "work" / "current";
  fs::create_directories(work / "etc");
  WriteFile(work / "etc" / "a", "a\n");
  CHECK(Agentenv(root, {"snap", "./etc"}).code == 0);
  CHECK(AgentenvJson(root, {"status"})["dirty"] == false);
  WriteFile(work / "etc" / "b", "b\n");
  CHECK(Agentenv(root, {"snap", "etc/.."}).code == 0);  // the root: everything
  CHECK(AgentenvJson(root, {"status"})["dirty"] == false);
  std::string head = HeadId(root);
  for (const char* bad : {"..", "../x", "etc/../.."}) {
    for (std::vector<std::string> cmd : {std::vector<std::string>{"snap", bad},
                                         {"diff", "HEAD~1", "HEAD", "--", bad},
                                         {"restore", "HEAD~1", bad}}) {
      cmd.insert(cmd.begin() + 1, {"--root", root.string()});
      cmd.insert(cmd.begin(), AGENTENV_BIN);
      CmdResult r = RunCmd(cmd);
      INFO(r.Describe());
      CHECK(r.code == 2);
      CHECK(r.err.find(std::string(bad) + ": leads outside the tree") != std::string::npos);
    }
  }
  CHECK(HeadId(root) == head);
}

TEST_CASE("cli: a writer waits --wait seconds for a held lock, then exits 5 saying what to do", "[cli]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  std::string head = HeadId(root);
  WriteFile(root / "work" / "current" / "new", "n\n");
  UniqueFd lock(::open((root / "lock").c_str(), O_RDWR | O_CLOEXEC));
  REQUIRE(::flock(lock.get(), LOCK_EX) == 0);  // standing in for another command
  auto start = Clock::now();
  CmdResult r = Agentenv(root, {"snap", "--wait", "0.4"});
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(r.Describe());
  CHECK(r.code == 5);
  CHECK(r.err.find("locked by another agentenv command (still busy after 0.4 s)") != std::string::npos);
  CHECK(r.err.find("--wait SECONDS") != std::string::npos);
  CHECK(took >= 0.4);
  CHECK(took < 5);
  CHECK(Agentenv(root, {"snap", "--wait", "-1"}).code == 2);
  lock.reset();
  CHECK(HeadId(root) == head);
  CHECK(Agentenv(root, {"snap", "--wait", "0"}).code == 0);
}

// Every file under store/ and meta/ (LMDB's lock.mdb aside: readers
// register there) with its size and content hash.
std::string RepoBytes(const fs::path& root) {
  std::string out;
  for (const char* d : {"store", "meta"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / d)) {
      if (!e.is_regular_file() || e.path().filename() == "lock.mdb") continue;
      std::string data = ReadFile(e.path());
      out += e.path().string() + " " + std::to_string(data.size()) + " " + std::to_string(Fnv1a(data)) + "\n";
    }
  }
  return out;
}

TEST_CASE("cli: fsck is read-only and compares the live tree beside a running daemon", "[cli][daemon]") {
  TempDir tmp;
  fs::path root = InitRepo(tmp);
  WriteFile(root / "work" / "current" / "big", std::string(8 << 20, 'q') + "tail");
  std::string before = RepoBytes(root);
  json plain = AgentenvJson(root, {"fsck"});
  CHECK(plain["live"]["dirty"] == true);
  CHECK(RepoBytes(root) == before);
  Daemon d(root, {"--no-capture"});
  REQUIRE(d.WaitReady());
  before = RepoBytes(root);
  auto start = Clock::now();
  int code = -1;
  json beside = AgentenvJson(root, {"fsck"}, &code);
  double took = std::chrono::duration<double>(Clock::now() - start).count();
  INFO(beside.dump());
  CHECK(code == 0);
  CHECK(beside["live"]["dirty"] == true);
  CHECK(took < 10);
  CHECK(RepoBytes(root) == before);
  CHECK(d.Stop() == 0);
}

TEST_CASE("cli daemon: capture that failed on ENOSPC retries by itself and SIGTERM flushes it", "[cli][daemon]") {
  if (!IsRoot()) Skip("needs root to mount a size-limited tmpfs");
  TempDir tmp;
  SmallTmpfs fs_(tmp.path() / "mnt", "24m");
  REQUIRE(fs_.mounted());
  fs::path root = tmp.path() / "mnt" / "repo";
  REQUIRE(Agentenv(root, {"init", "-q"}).code == 0);
  fs::path work = root / "work" / "current";
  for (int round = 0; round < 2; ++round) {
    Daemon d(root, {"--quiet-ms", "50", "--max-delay-ms", "200"});
    REQUIRE(d.WaitReady());
    std::string head = HeadId(root);
    FillUp(tmp.path() / "mnt");
    // A new file (empty: the disk is full) needs index pages the store cannot write.
    { std::ofstream(work / ("r" + std::to_string(round))) << ""; }
    json st;
    REQUIRE(WaitFor([&] {
      st = Ctl(root, "status");
      return st.is_object() && st.value("capture", "") == "failing";
    }, 10000));
    INFO(st.dump() << "\n" << d.Log());
    CHECK(st["capture_error"].get<std::string>().find("No space left on device") != std::string::npos);
    CHECK(HeadId(root) == head);
    CmdResult text = Agentenv(root, {"status"});
    CHECK(text.out.find("capture    FAILING since") != std::string::npos);
    fs::remove(tmp.path() / "mnt" / "fill");
    if (round == 0) {
      // Nothing else changes: the daemon must notice the space by itself.
      // Timed by the node's own time, so the poll (a process start, slow
      // under a sanitizer) is not counted: one capped retry wait (1 s) and
      // the snapshot.
      int64_t freed_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
      REQUIRE(WaitFor([&] { return HeadId(root) != head; }, 5000));
      double took = double(AgentenvJson(root, {"head"})["node"]["time_ns"].get<int64_t>() - freed_ns) / 1e9;
      CHECK(took < 2.0);
      CHECK(Ctl(root, "status").value("capture", "") == "ok");
      CHECK(d.Stop() == 0);
    } else {
      CHECK(d.Stop() == 0);  // at once: the flush on SIGTERM records it
      CHECK(HeadId(root) != head);
    }
    CHECK(AgentenvJson(root, {"status"})["dirty"] == false);  // the change is in HEAD
  }
  json log = AgentenvJson(root, {"log"});
  CHECK(log["nodes"].size() >= 3);
  CHECK(Agentenv(root, {"fsck"}).code == 0);
}

}  // namespace
}  // namespace agentenv::test
