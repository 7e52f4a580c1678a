// snap/bulk_io: restores through io_uring (AGENTENV_URING=on) and through
// plain syscalls (the default, and where seccomp forbids io_uring) give the same
// tree, and neither creates a file through a planted name or symlink.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "snap/bulk_io.h"
#include "snap/repo.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

// Sets AGENTENV_URING for the scope.
class UringEnv {
 public:
  explicit UringEnv(bool on) {
    if (on) ::setenv("AGENTENV_URING", "on", 1);
    else ::unsetenv("AGENTENV_URING");
  }
  ~UringEnv() { ::unsetenv("AGENTENV_URING"); }
};

void Populate(const std::string& w) {
  for (int d = 0; d < 3; ++d) {
    std::string dir = w + "/d" + std::to_string(d);
    REQUIRE(::mkdir(dir.c_str(), 0750) == 0);
    for (int i = 0; i < 150; ++i)
      REQUIRE(WriteFileAt(dir + "/f" + std::to_string(i), RandomString(100 + i * 37, d * 1000 + i), i % 3 ? 0644 : 0600));
  }
  REQUIRE(WriteFileAt(w + "/empty", ""));
  REQUIRE(WriteFileAt(w + "/exec", "#!/bin/sh\n", 0755));
  // A zero block in a small file, and a file above the single-chunk size.
  REQUIRE(WriteFileAt(w + "/holey", std::string(8192, '\0') + "tail"));
  REQUIRE(WriteFileAt(w + "/large", RandomString(700 * 1024, 99)));
  ::lsetxattr((w + "/d1/f5").c_str(), "user.note", "x", 1, 0);  // where supported
}

// A directory `tree` holding a symlink named `link` that leads to a file
// outside it, and a file named `taken`: names bulk creation must refuse.
struct PlantedTree {
  PlantedTree(const std::string& link, const std::string& taken) {
    REQUIRE(WriteFileAt(outside, "keep"));
    REQUIRE(::mkdir(tree.c_str(), 0755) == 0);
    REQUIRE(::symlink(outside.c_str(), (tree + "/" + link).c_str()) == 0);
    REQUIRE(WriteFileAt(tree + "/" + taken, "taken"));
    dir.reset(::open(tree.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(dir);
  }
  TempDir t;
  const std::string outside = t.str() + "/outside", tree = t.str() + "/tree";
  UniqueFd dir;
};

TEST_CASE("restore through io_uring and through plain syscalls gives the same tree", "[snap]") {
  TempDir t;
  auto created = snap::Repo::Create(t.str() + "/repo");
  REQUIRE(created);
  auto& r = **created;
  const std::string w = r.work_dir();
  Populate(w);
  auto full = r.Snapshot({});
  REQUIRE(full);
  REQUIRE(full->node);
  Manifest want = Capture(w);
  for (const char* n : {"d0", "d1", "d2", "empty", "exec", "holey", "large"}) RemoveAt(AT_FDCWD, w + "/" + n);
  auto empty = r.Snapshot({});
  REQUIRE(empty);
  REQUIRE(empty->node);

  for (bool on : {true, false}) {
    UringEnv env(on);
    INFO((on ? "io_uring" : "plain syscalls"));
    if (on && !snap::BulkIo().uring()) WARN("io_uring unavailable here: both rounds use plain syscalls");
    auto res = r.Restore(full->node->Hex());
    REQUIRE(res);
    CHECK(res->stats.files_written == 454);
    for (const auto& d : CompareManifests(want, Capture(w))) FAIL_CHECK(d);
    auto s = r.Snapshot({});
    REQUIRE(s);
    CHECK(!s->node);
    REQUIRE(r.Restore(empty->node->Hex()));
  }
}

TEST_CASE("bulk file creation refuses existing names and planted symlinks", "[snap][security]") {
  for (bool on : {true, false}) {
    UringEnv env(on);
    INFO((on ? "io_uring" : "plain syscalls"));
    PlantedTree p(".tmp-link", ".tmp-taken");
    for (const char* tmp : {".tmp-link", ".tmp-taken"}) {
      snap::BulkIo io(1);  // the ring even for one file
      snap::NewFile f;
      f.dirfd = p.dir.get();
      f.tmp = tmp;
      f.name = "target";
      f.rel = tmp;
      f.data = {'x'};
      snap::NewFile* files[] = {&f};
      auto r = io.CreateAndWrite(files);
      CHECK(!r);
      CHECK(!f.created);
    }
    CHECK(ReadFileAt(p.outside) == "keep");
    CHECK(ReadFileAt(p.tree + "/.tmp-taken") == "taken");
    // A fresh name works, and rename + stat report the file in place.
    snap::BulkIo io(1);
    snap::NewFile f;
    f.dirfd = p.dir.get();
    f.tmp = ".tmp-new";
    f.name = "target";
    f.rel = "target";
    f.data = {'o', 'k'};
    snap::NewFile* files[] = {&f};
    REQUIRE(io.CreateAndWrite(files));
    REQUIRE(io.Close(files));
    REQUIRE(io.RenameAndStat(files));
    CHECK(ReadFileAt(p.tree + "/target") == "ok");
    CHECK(f.st.st_size == 2);
    CHECK(S_ISREG(f.st.st_mode));
    CHECK((f.st.st_mode & 07777) == 0600);
  }
}

TEST_CASE("files created in place get their final names at once and still refuse planted names", "[snap][security]") {
  for (bool on : {true, false}) {
    UringEnv env(on);
    INFO((on ? "io_uring" : "plain syscalls"));
    PlantedTree p("link", "taken");
    snap::BulkIo io(1);  // the ring even for one file
    auto make = [&](const char* name, std::vector<uint8_t> data) {
      snap::NewFile f;
      f.dirfd = p.dir.get();
      f.tmp = f.name = f.rel = name;
      f.in_place = true;
      f.data = std::move(data);
      return f;
    };
    for (const char* name : {"link", "taken"}) {
      snap::NewFile f = make(name, {'x'});
      snap::NewFile* files[] = {&f};
      CHECK(!io.CreateAndWrite(files));
      CHECK(!f.created);
    }
    CHECK(ReadFileAt(p.outside) == "keep");
    CHECK(ReadFileAt(p.tree + "/taken") == "taken");
    snap::NewFile a = make("a", {'o', 'k'}), b = make("b", {});
    snap::NewFile* files[] = {&a, &b};
    REQUIRE(io.CreateAndWrite(files));
    REQUIRE(io.Close(files));
    REQUIRE(io.RenameAndStat(files));
    CHECK(ReadFileAt(p.tree + "/a") == "ok");
    CHECK(a.st.st_size == 2);
    CHECK(b.st.st_size == 0);
    CHECK(S_ISREG(b.st.st_mode));
    // Nothing else was made beside them.
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(p.tree)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    CHECK(names == std::vector<std::string>{"a", "b", "link", "taken"});
  }
}

}  // namespace
}  // namespace agentenv::test
