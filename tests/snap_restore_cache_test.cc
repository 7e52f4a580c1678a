// snap/ restore with a known set of changed paths (as the daemon's journal
// provides), and the stat cache a restore leaves behind: the next snapshot
// must read none of the files the restore wrote.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "snap/repo.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;

// State s of a small tree: 30 files in 3 directories, a file whose mode
// changes, an xattr (where the filesystem has them) and a symlink.
void State(const std::string& w, int s) {
  for (int d = 0; d < 3; ++d) {
    std::string dir = w + "/d" + std::to_string(d);
    ::mkdir(dir.c_str(), 0755);
    // Odd files change between states, even ones stay as they are.
    for (int i = 0; i < 10; ++i)
      if (i % 2 || s == 0) REQUIRE(WriteFileAt(dir + "/f" + std::to_string(i), RandomString(3000 + i, d * 100 + i + s * 7)));
  }
  REQUIRE(WriteFileAt(w + "/mode", "same bytes\n"));
  REQUIRE(::chmod((w + "/mode").c_str(), s % 2 ? 0600 : 0644) == 0);
  RemoveAt(AT_FDCWD, w + "/link");
  REQUIRE(::symlink(s % 2 ? "d1" : "d2", (w + "/link").c_str()) == 0);
  RemoveAt(AT_FDCWD, w + "/only" + std::to_string(s));
  REQUIRE(WriteFileAt(w + "/only" + std::to_string(s), "only in state " + std::to_string(s)));
  RemoveAt(AT_FDCWD, w + "/only" + std::to_string(1 - s));
}

TEST_CASE("restore leaves a stat cache that describes every file it wrote", "[snap]") {
  TempDir t;
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  State(w, 0);
  Settle(*r);
  store::ObjectId a = Snap(*r);
  Manifest ma = Capture(w);
  State(w, 1);
  Settle(*r);
  store::ObjectId b = Snap(*r);
  Manifest mb = Capture(w);

  for (int round = 0; round < 2; ++round) {
    auto res = r->Restore(a.Hex());
    REQUIRE(res);
    CHECK(!res->saved);
    CHECK(res->stats.files_written == 16);  // 15 changed files + only0
    CHECK(res->stats.stat_entries.size() == 17);  // + the chmod'ed file
    for (const auto& d : CompareManifests(ma, Capture(w))) FAIL_CHECK(d);
    // Nothing changed since the restore, and nothing needs reading to see it.
    auto s = r->Snapshot({});
    REQUIRE(s);
    CHECK(!s->node);
    CHECK(s->hashed_files == 0);

    res = r->Restore(b.Hex());
    REQUIRE(res);
    CHECK(!res->saved);
    for (const auto& d : CompareManifests(mb, Capture(w))) FAIL_CHECK(d);
    s = r->Snapshot({});
    REQUIRE(s);
    CHECK(!s->node);
    CHECK(s->hashed_files == 0);
  }

  // A file changed after the restore is still seen (the cache holds the
  // restored inode's stat, not a blanket "clean").
  REQUIRE(r->Restore(a.Hex()));
  REQUIRE(WriteFileAt(w + "/d0/f1", "edited after restore"));
  auto s = r->Snapshot({});
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK(s->hashed_files == 1);
  REQUIRE(s->changes.sample.size() == 1);
  CHECK(s->changes.sample[0].path == "d0/f1");
}

TEST_CASE("the first snapshot after init from a directory reads nothing", "[snap]") {
  TempDir t;
  std::string src = t.str() + "/src";
  REQUIRE(::mkdir(src.c_str(), 0755) == 0);
  State(src, 0);
  auto r = MakeRepo(t.str() + "/repo");
  Settle(*r);
  REQUIRE(r->Seed(src, "seed"));
  auto s = r->Snapshot({});
  REQUIRE(s);
  CHECK(!s->node);
  CHECK(s->hashed_files == 0);
}

TEST_CASE("restore with a known dirty set saves those paths and restores the rest", "[snap]") {
  TempDir t;
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  State(w, 0);
  Settle(*r);
  store::ObjectId a = Snap(*r);
  Manifest ma = Capture(w);
  State(w, 1);
  store::ObjectId b = Snap(*r);
  Manifest mb = Capture(w);

  // Uncommitted edits the journal knows about.
  REQUIRE(WriteFileAt(w + "/d2/f3", "uncommitted edit"));
  REQUIRE(WriteFileAt(w + "/d1/new", "uncommitted new file"));
  RemoveAt(AT_FDCWD, w + "/d0/f0");
  Manifest dirty = Capture(w);
  auto res = r->Restore(a.Hex(), std::vector<std::string>{"d2/f3", "d1/new", "d0/f0"});
  REQUIRE(res);
  REQUIRE(res->saved);
  for (const auto& d : CompareManifests(ma, Capture(w))) FAIL_CHECK(d);
  // The saved node holds exactly the dirty tree.
  auto back = r->Restore(res->saved->Hex(), std::vector<std::string>{});
  REQUIRE(back);
  CHECK(!back->saved);
  for (const auto& d : CompareManifests(dirty, Capture(w))) FAIL_CHECK(d);
  auto rec = r->Record(*res->saved);
  REQUIRE(rec);
  REQUIRE(rec->parent);
  CHECK(*rec->parent == b);
  CHECK(rec->changes >= 3);

  // Known clean: no scan, no saved node, same result as a full restore.
  REQUIRE(r->Restore(b.Hex()));
  auto clean = r->Restore(a.Hex(), std::vector<std::string>{});
  REQUIRE(clean);
  CHECK(!clean->saved);
  for (const auto& d : CompareManifests(ma, Capture(w))) FAIL_CHECK(d);
  auto full = r->Restore(b.Hex());
  REQUIRE(full);
  CHECK(!full->saved);
  for (const auto& d : CompareManifests(mb, Capture(w))) FAIL_CHECK(d);
}

// A change journal (capture/capture.h) drains itself into history, then
// restores with an empty dirty set; without a journal, no set: full scan.
TEST_CASE("the dirty set decides between a full scan and trusting history", "[snap]") {
  TempDir t;
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  State(w, 0);
  store::ObjectId a = Snap(*r);
  State(w, 1);
  store::ObjectId b = Snap(*r);

  // No journal to vouch (degraded, a failed capture): full scan, the
  // unreported edit is saved before the restore.
  REQUIRE(WriteFileAt(w + "/d2/f2", "edit the journal missed"));
  auto res = r->Restore(a.Hex());
  REQUIRE(res);
  REQUIRE(res->saved);
  CHECK(ReadFileAt(w + "/d2/f2") == RandomString(3000 + 2, 2 * 100 + 2));

  // The journal vouches (empty set): no scan at all, so an edit it did not
  // report is neither saved nor undone (d2/f2 is equal in a and b, so the
  // restore skips it).
  REQUIRE(WriteFileAt(w + "/d2/f2", "edit after the flush"));
  res = r->Restore(b.Hex(), std::vector<std::string>{});
  REQUIRE(res);
  CHECK(!res->saved);
  CHECK(ReadFileAt(w + "/d2/f2") == "edit after the flush");
  // A reported path is saved and restored.
  res = r->Restore(a.Hex(), std::vector<std::string>{"d2/f2"});
  REQUIRE(res);
  REQUIRE(res->saved);
  CHECK(ReadFileAt(w + "/d2/f2") == RandomString(3000 + 2, 2 * 100 + 2));
}

TEST_CASE("entry paths re-read a directory's own metadata, not what is below it", "[snap]") {
  TempDir t;
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  State(w, 0);
  store::ObjectId a = Snap(*r);
  // The journal reports d1 as an entry (IN_ATTRIB) and d0/f1 as written.
  REQUIRE(::chmod((w + "/d1").c_str(), 0700) == 0);
  REQUIRE(WriteFileAt(w + "/d0/f1", "written"));
  Manifest want = Capture(w);
  REQUIRE(WriteFileAt(w + "/d1/f1", "not reported: a path scan cannot see it"));
  snap::SnapOptions opt;
  opt.paths = std::vector<std::string>{"d0/f1"};
  opt.entry_paths = {"", "d1", "d0"};
  auto s = r->Snapshot(opt);
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK(s->hashed_files == 1);
  REQUIRE(r->Restore(a.Hex(), std::vector<std::string>{"d1/f1"}));
  REQUIRE(r->Restore(s->node->Hex(), std::vector<std::string>{}));
  for (const auto& d : CompareManifests(want, Capture(w))) FAIL_CHECK(d);
}

}  // namespace
}  // namespace agentenv::test
