// control/files.h and control/patch.h: the file operations on the live
// tree and on nodes, through the JSON entry as MCP and the socket call
// them; hostile paths (.., links out of the tree, loops), big and binary
// files; the unified-diff applier.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "control/archive.h"
#include "control/client.h"
#include "control/files.h"
#include "control/open_repo.h"
#include "control/ops.h"
#include "control/patch.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using control::json;
namespace fs = std::filesystem;

struct FilesRepo {
  TempDir tmp;
  std::string root = tmp.str() + "/repo";
  std::unique_ptr<control::Client> client;
  control::Server* server = nullptr;
  FilesRepo() {
    fs::create_directories(tmp.str() + "/src/etc/app");
    REQUIRE(WriteFileAt(tmp.str() + "/src/etc/app/app.conf", "mode=good\nport=80\n"));
    REQUIRE(WriteFileAt(tmp.str() + "/src/etc/os-release", "NAME=tree\n"));
    control::InitRequest init;
    init.from = tmp.str() + "/src";
    REQUIRE(control::Init(root, init));
    client = std::make_unique<control::Client>(root);
    auto s = client->Local();
    REQUIRE(s);
    server = *s;
  }
  std::string work() const { return snap::layout::Work(root); }
  Result<json> Call(const std::string& op, const json& args) { return control::CallJson(*server, op, args, nullptr); }
};

}  // namespace

TEST_CASE("files: read_file reads the live tree and any node, in pages, following links inside the tree", "[control][files]") {
  FilesRepo r;
  REQUIRE(WriteFileAt(r.work() + "/etc/app/app.conf", "mode=broken\nport=80\n"));
  fs::create_symlink("/etc/os-release", r.work() + "/etc/abs-link");
  fs::create_symlink("../os-release", r.work() + "/etc/app/rel-link");
  REQUIRE(r.Call("snapshot", {{"message", "broke"}}));

  auto live = r.Call("read_file", {{"path", "/etc/app/app.conf"}});
  REQUIRE(live);
  CHECK((*live)["text"] == "mode=broken\nport=80\n");
  CHECK((*live)["total_lines"] == 2);
  CHECK((*live)["truncated"] == false);
  auto old = r.Call("read_file", {{"path", "etc/app/app.conf"}, {"ref", "HEAD~1"}});
  REQUIRE(old);
  CHECK((*old)["text"] == "mode=good\nport=80\n");
  CHECK((*old)["node"].get<std::string>().size() == 12);
  auto page = r.Call("read_file", {{"path", "etc/app/app.conf"}, {"start_line", 2}, {"lines", 1}});
  REQUIRE(page);
  CHECK((*page)["text"] == "port=80\n");
  CHECK((*page)["start_line"] == 2);
  CHECK((*page)["end_line"] == 2);
  auto first = r.Call("read_file", {{"path", "etc/app/app.conf"}, {"lines", 1}});
  CHECK((*first)["truncated"] == true);

  // An absolute link is the environment's path, never the host's.
  for (std::string ref : {"", "HEAD"}) {
    INFO("ref '" << ref << "'");
    auto abs = r.Call("read_file", {{"path", "etc/abs-link"}, {"ref", ref}});
    REQUIRE(abs);
    CHECK((*abs)["text"] == "NAME=tree\n");
    CHECK((*abs)["path"] == "etc/os-release");
    auto rel = r.Call("read_file", {{"path", "etc/app/rel-link"}, {"ref", ref}});
    REQUIRE(rel);
    CHECK((*rel)["text"] == "NAME=tree\n");
  }
}

TEST_CASE("files: hostile paths never leave the tree: .., links out, loops", "[control][files]") {
  FilesRepo r;
  TempDir outside;
  REQUIRE(WriteFileAt(outside.str() + "/secret", "host secret\n"));
  fs::create_symlink(outside.str() + "/secret", r.work() + "/etc/to-host");   // absolute: read inside the tree
  fs::create_symlink("../../../../../../../../" + outside.str() + "/secret", r.work() + "/etc/climb");
  fs::create_symlink("loop-b", r.work() + "/etc/loop-a");
  fs::create_symlink("loop-a", r.work() + "/etc/loop-b");
  REQUIRE(r.Call("snapshot", {{"message", "links"}}));
  for (std::string ref : {"", "HEAD"}) {
    INFO("ref '" << ref << "'");
    for (std::string path : {std::string("etc/to-host"), std::string("etc/climb"), "../../../../" + outside.str() + "/secret"}) {
      INFO(path);
      auto read = r.Call("read_file", {{"path", path}, {"ref", ref}});
      REQUIRE_FALSE(read);  // the tree has no such file
      CHECK(read.error().code == ErrorCode::kNotFound);
    }
    auto loop = r.Call("read_file", {{"path", "etc/loop-a"}, {"ref", ref}});
    REQUIRE_FALSE(loop);
    CHECK(loop.error().message.find("too many levels of symbolic links") != std::string::npos);
    auto list = r.Call("list_dir", {{"path", "../.."}, {"ref", ref}});
    REQUIRE(list);
    CHECK((*list)["path"] == "");  // ".." stops at the root
  }
  // Writes: a path that climbs out is refused; a link out is written inside.
  auto climb = r.Call("write_file", {{"path", "../escape"}, {"content", "x"}});
  REQUIRE_FALSE(climb);
  CHECK(climb.error().code == ErrorCode::kInvalid);
  CHECK_FALSE(fs::exists(fs::path(r.work()).parent_path() / "escape"));
  auto via_link = r.Call("write_file", {{"path", "etc/to-host"}, {"content", "x"}});
  REQUIRE_FALSE(via_link);  // dangling inside the tree
  CHECK(ReadFileAt(outside.str() + "/secret") == "host secret\n");
  fs::create_symlink("/", r.work() + "/etc/rootlink");
  const std::string name = "srv/files-test-" + std::to_string(::getpid());
  auto through = r.Call("write_file", {{"path", "etc/rootlink/" + name}, {"content", "x"}});
  REQUIRE(through);  // lands in the tree, under the same path
  CHECK((*through)["path"] == name);
  CHECK(ReadFileAt(r.work() + "/" + name) == "x");
  CHECK_FALSE(fs::exists("/" + name));
}

TEST_CASE("files: big and binary files are capped and flagged", "[control][files]") {
  FilesRepo r;
  std::string big;
  for (int i = 0; i < 200000; ++i) big += "line " + std::to_string(i) + "\n";
  REQUIRE(WriteFileAt(r.work() + "/big.txt", big));
  REQUIRE(WriteFileAt(r.work() + "/blob.bin", std::string("\x7f" "ELF\0\0\x01\xff", 8)));
  REQUIRE(r.Call("snapshot", {{"message", "files"}}));
  for (std::string ref : {"", "HEAD"}) {
    auto page = r.Call("read_file", {{"path", "big.txt"}, {"ref", ref}});
    REQUIRE(page);
    CHECK((*page)["end_line"] == 400);
    CHECK((*page)["truncated"] == true);
    CHECK((*page)["size"] == big.size());
    CHECK((*page)["text"].get<std::string>().size() < 32768);
    auto bin = r.Call("read_file", {{"path", "blob.bin"}, {"ref", ref}});
    REQUIRE(bin);
    CHECK((*bin)["binary"] == true);
    CHECK((*bin)["text"] == "");
  }
  auto capped = r.Call("read_file", {{"path", "big.txt"}, {"max_bytes", 100}});
  REQUIRE(capped);
  CHECK((*capped)["text"].get<std::string>().size() <= 100);
  // Search skips binary files and reports bounded output.
  REQUIRE(WriteFileAt(r.work() + "/small.txt", big.substr(0, 10000)));
  auto found = r.Call("search", {{"pattern", "^line 9[0-9]$"}, {"limit", 3}});
  REQUIRE(found);
  CHECK((*found)["matches"].size() == 3);
  CHECK((*found)["truncated"] == true);
  auto bad = r.Call("search", {{"pattern", "(unclosed"}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == ErrorCode::kInvalid);
}

TEST_CASE("files: write_file writes whole files and patches, each a node labelled with the path", "[control][files]") {
  FilesRepo r;
  auto created = r.Call("write_file", {{"path", "srv/new/notes.txt"}, {"content", "one\ntwo\n"}, {"message", "notes"}});
  REQUIRE(created);
  CHECK((*created)["created"] == true);
  CHECK((*created)["node"]["title"] == "notes");
  CHECK(ReadFileAt(r.work() + "/srv/new/notes.txt") == "one\ntwo\n");
  auto status = r.Call("status", json::object());
  CHECK((*status)["dirty"] == false);  // the write is in its node

  auto patched = r.Call("write_file", {{"path", "etc/app/app.conf"},
                                       {"patch", "--- a/etc/app/app.conf\n+++ b/etc/app/app.conf\n@@ -1,2 +1,2 @@\n-mode=good\n+mode=fast\n port=80\n"}});
  REQUIRE(patched);
  CHECK((*patched)["node"]["title"] == "write_file etc/app/app.conf");
  CHECK(ReadFileAt(r.work() + "/etc/app/app.conf") == "mode=fast\nport=80\n");
  auto stale = r.Call("write_file", {{"path", "etc/app/app.conf"}, {"patch", "@@ -1 +1 @@\n-mode=good\n+mode=slow\n"}});
  REQUIRE_FALSE(stale);
  CHECK(stale.error().code == ErrorCode::kInvalid);
  CHECK(ReadFileAt(r.work() + "/etc/app/app.conf") == "mode=fast\nport=80\n");
  auto same = r.Call("write_file", {{"path", "etc/app/app.conf"}, {"content", "mode=fast\nport=80\n"}});
  REQUIRE(same);
  CHECK((*same)["node"].is_null());
  auto both = r.Call("write_file", {{"path", "x"}, {"content", "a"}, {"patch", "b"}});
  CHECK_FALSE(both);

  // Rolling back the patch's node undoes exactly it.
  REQUIRE(r.Call("rollback", {{"ref", "HEAD~1"}}));
  CHECK(ReadFileAt(r.work() + "/etc/app/app.conf") == "mode=good\nport=80\n");

  // file_history finds both nodes that changed the path, newest first.
  REQUIRE(r.Call("write_file", {{"path", "etc/app/app.conf"}, {"content", "mode=third\n"}}));
  auto hist = r.Call("file_history", {{"path", "etc/app/app.conf"}});
  REQUIRE(hist);
  INFO(hist->dump());
  REQUIRE((*hist)["changes"].size() == 2);  // this write, and init that made it (the patch was rolled back)
  CHECK((*hist)["changes"][0]["op"] == "M");
  CHECK((*hist)["changes"][0]["node"]["title"] == "write_file etc/app/app.conf");
  CHECK((*hist)["changes"][0]["node"]["provenance"]["kind"] == "snapshot");
  CHECK((*hist)["changes"].back()["op"] == "+");
  auto none = r.Call("file_history", {{"path", "no/such"}});
  REQUIRE(none);
  CHECK((*none)["changes"].empty());
}

TEST_CASE("files: list_dir walks to a depth with sizes, search respects the ignore rules", "[control][files]") {
  FilesRepo r;
  fs::create_directories(r.work() + "/tmp");
  REQUIRE(WriteFileAt(r.work() + "/tmp/scratch.log", "listen = 1\n"));  // /tmp is ignored by default
  REQUIRE(WriteFileAt(r.work() + "/etc/app/listen.conf", "listen = 8080\n"));
  auto one = r.Call("list_dir", {{"path", "etc"}});
  REQUIRE(one);
  std::vector<std::string> paths;
  for (const auto& e : (*one)["entries"]) paths.push_back(e["path"]);
  CHECK(paths == std::vector<std::string>{"etc/app", "etc/os-release"});
  auto deep = r.Call("list_dir", {{"path", "etc"}, {"depth", 2}});
  REQUIRE(deep);
  bool sized = false;
  for (const auto& e : (*deep)["entries"]) sized |= e["path"] == "etc/app/app.conf" && e["size"] == 18;
  CHECK(sized);
  auto cut = r.Call("list_dir", {{"path", "etc"}, {"depth", 2}, {"limit", 2}});
  CHECK((*cut)["truncated"] == true);
  CHECK((*cut)["entries"].size() == 2);

  auto hits = r.Call("search", {{"pattern", "listen\\s*="}});
  REQUIRE(hits);
  INFO(hits->dump());
  REQUIRE((*hits)["matches"].size() == 1);
  CHECK((*hits)["matches"][0]["path"] == "etc/app/listen.conf");
  CHECK((*hits)["matches"][0]["line"] == 1);
  auto names = r.Call("search", {{"pattern", "\\.conf$"}, {"names", true}});
  REQUIRE(names);
  CHECK((*names)["matches"].size() == 2);
}

TEST_CASE("patch: unified diffs apply at their lines or nearby, and refuse what does not fit", "[control][files]") {
  auto p = control::ApplyPatch("a\nb\nc\n", "@@ -2 +2 @@\n-b\n+B\n");
  REQUIRE(p);
  CHECK(*p == "a\nB\nc\n");
  // An offset: the lines moved down by one.
  p = control::ApplyPatch("x\na\nb\nc\n", "@@ -1,2 +1,2 @@\n a\n-b\n+B\n");
  REQUIRE(p);
  CHECK(*p == "x\na\nB\nc\n");
  // A new file, and one without a final newline.
  p = control::ApplyPatch("", "--- /dev/null\n+++ b/f\n@@ -0,0 +1,2 @@\n+one\n+two\n\\ No newline at end of file\n");
  REQUIRE(p);
  CHECK(*p == "one\ntwo");
  p = control::ApplyPatch("a\nb\nc\nd\ne\n", "@@ -1 +1 @@\n-a\n+A\n@@ -5 +5 @@\n-e\n+E\n");
  REQUIRE(p);
  CHECK(*p == "A\nb\nc\nd\nE\n");
  for (const char* bad : {"", "no hunks here\n", "@@ -1 +1 @@\n-zzz\n+y\n", "@@ -1,3 +1 @@\n-a\n", "@@ nonsense @@\n",
                          "@@ -1 +1 @@\n?a\n"}) {
    INFO(bad);
    auto r = control::ApplyPatch("a\nb\n", bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalid);
  }
}

}  // namespace agentenv::test

namespace agentenv::test {

TEST_CASE("files: head and show leave a node's package list out unless asked", "[control][files]") {
  TempDir tmp;
  fs::create_directories(tmp.str() + "/src/var/lib/dpkg");
  std::string status;
  for (int i = 0; i < 30; ++i)
    status += "Package: pkg" + std::to_string(i) + "\nStatus: install ok installed\nArchitecture: all\nVersion: 1." +
              std::to_string(i) + "\n\n";
  REQUIRE(WriteFileAt(tmp.str() + "/src/var/lib/dpkg/status", status));
  control::InitRequest init;
  init.from = tmp.str() + "/src";
  REQUIRE(control::Init(tmp.str() + "/repo", init));
  control::Client client(tmp.str() + "/repo");
  auto s = client.Local();
  REQUIRE(s);
  for (const char* op : {"head", "show"}) {
    INFO(op);
    auto brief = control::CallJson(**s, op, json::object(), nullptr);
    REQUIRE(brief);
    CHECK_FALSE((*brief)["node"].contains("packages"));
    CHECK((*brief)["node"]["packages_omitted"].get<std::string>().find("30 package changes") != std::string::npos);
    auto full = control::CallJson(**s, op, {{"packages", true}}, nullptr);
    REQUIRE(full);
    CHECK((*full)["node"]["packages"].size() == 30);
  }
}

}  // namespace agentenv::test
