// snap/ restore: type changes, deletions, 0000 directories, read-only
// files, hardlink groups split and joined, and symlinks planted in the live
// tree that must never lead a restore outside it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include <catch2/catch.hpp>

#include "snap/repo.h"
#include "snap_testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;

void Restore(Repo& r, const store::ObjectId& id, const Manifest& want) {
  auto res = r.Restore(id.Hex());
  REQUIRE(res);
  CHECK(res->stats.warnings.empty());
  for (const auto& d : CompareManifests(want, Capture(r.work_dir()))) FAIL_CHECK(d);
}

// Three states; every path changes kind (file, dir, symlink, absent)
// between them, hardlink groups split and join, and a 0000 directory and
// read-only files change content.
void State(const std::string& w, int s) {
  auto put = [&](const std::string& rel, int kind, const std::string& text) {
    RemoveAt(AT_FDCWD, w + "/" + rel);
    std::string p = w + "/" + rel;
    if (kind == 0) REQUIRE(WriteFileAt(p, text, 0444));  // read-only file
    if (kind == 1) {
      REQUIRE(::mkdir(p.c_str(), 0755) == 0);
      REQUIRE(WriteFileAt(p + "/in", text));
    }
    if (kind == 2) REQUIRE(::symlink(text.c_str(), p.c_str()) == 0);
    // kind 3: absent
  };
  for (int i = 0; i < 4; ++i) put("p" + std::to_string(i), (i + s) % 4, "state " + std::to_string(s));
  // A 0000 directory whose contents change.
  ::chmod((w + "/locked").c_str(), 0700);
  RemoveAt(AT_FDCWD, w + "/locked");
  REQUIRE(::mkdir((w + "/locked").c_str(), 0700) == 0);
  REQUIRE(WriteFileAt(w + "/locked/f" + std::to_string(s), "locked " + std::to_string(s)));
  if (s == 1) REQUIRE(::mkdir((w + "/locked/sub").c_str(), 0) == 0);
  REQUIRE(::chmod((w + "/locked").c_str(), 0) == 0);
  // Hardlinks: s0 {a,b,c}; s1 {a,b} {c,d}; s2 {a,c} b alone, d gone.
  for (const char* n : {"a", "b", "c", "d"}) ::unlink((w + "/h/" + n).c_str());
  ::mkdir((w + "/h").c_str(), 0755);
  auto link = [&](const char* from, const char* to) {
    REQUIRE(::link((w + "/h/" + from).c_str(), (w + "/h/" + to).c_str()) == 0);
  };
  REQUIRE(WriteFileAt(w + "/h/a", "group one " + std::to_string(s)));
  if (s == 0) link("a", "b"), link("a", "c");
  if (s == 1) {
    link("a", "b");
    REQUIRE(WriteFileAt(w + "/h/c", "group two"));
    link("c", "d");
  }
  if (s == 2) {
    link("a", "c");
    REQUIRE(WriteFileAt(w + "/h/b", "alone"));
  }
}

// The states above, snapshotted and restored in every order.
void RestoreStates(const std::string& base) {
  auto r = MakeRepo(base + "/repo");
  const std::string w = r->work_dir();
  std::vector<store::ObjectId> ids;
  std::vector<Manifest> want;
  for (int s = 0; s < 3; ++s) {
    State(w, s);
    want.push_back(Capture(w));
    ids.push_back(Snap(*r));
  }
  for (int s : {0, 1, 2, 0, 2, 1, 0}) {
    INFO("restoring state " << s);
    Restore(*r, ids[s], want[s]);
  }
}

TEST_CASE("restore across type changes, 0000 dirs, read-only files, hardlink groups", "[snap]") {
  DeepTempDir t;
  RestoreStates(t.str());
}

TEST_CASE("restore across type changes, 0000 dirs, read-only files, hardlink groups on btrfs", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  RestoreStates(m.dir());
}

// Snapshots `etc` as a real directory, then replaces it with a symlink to
// `outside` and restores: the outside directory must not change.
TEST_CASE("restore does not write through a planted symlink", "[snap][security]") {
  DeepTempDir t;
  const std::string outside = t.str() + "/outside";
  REQUIRE(::mkdir(outside.c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(outside + "/passwd", "outside passwd\n"));
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/etc").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/etc/passwd", "root:x:0:0\n"));
  REQUIRE(WriteFileAt(w + "/etc/hosts", "127.0.0.1 localhost\n", 0600));
  REQUIRE(::mkdir((w + "/etc/sub").c_str(), 0700) == 0);
  REQUIRE(WriteFileAt(w + "/etc/sub/x", "x"));
  Manifest want = Capture(w);
  auto id = Snap(*r);
  Manifest outside_before = Capture(outside);

  RemoveAt(AT_FDCWD, w + "/etc");
  REQUIRE(::symlink(outside.c_str(), (w + "/etc").c_str()) == 0);
  Restore(*r, id, want);
  for (const auto& d : CompareManifests(outside_before, Capture(outside))) FAIL_CHECK("outside changed: " << d);
}

// The live tree changes after the restore's scan: directory etc/ and file
// f become symlinks to outside. Whatever RestoreTree then does (fail or
// succeed), nothing outside may change: no chmod, no write, no new file.
TEST_CASE("restore does not follow a symlink swapped in after the scan", "[snap][security]") {
  DeepTempDir t;
  const std::string outside = t.str() + "/outside";
  REQUIRE(::mkdir(outside.c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(outside + "/passwd", "outside passwd\n"));
  REQUIRE(WriteFileAt(outside + "/f", "outside f\n", 0644));
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  // Node x: etc/ 0755 with passwd v1, f 0644. Node y: the same etc/ content
  // with mode 0700 and f 0600 (metadata-only changes), plus a changed zdir/ (sorted last).
  REQUIRE(::mkdir((w + "/etc").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/etc/passwd", "v1\n"));
  REQUIRE(WriteFileAt(w + "/f", "f\n", 0644));
  REQUIRE(::mkdir((w + "/zdir").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/zdir/passwd", "dir v1\n"));
  auto x = Snap(*r);
  REQUIRE(::chmod((w + "/etc").c_str(), 0700) == 0);
  REQUIRE(::chmod((w + "/f").c_str(), 0600) == 0);
  REQUIRE(WriteFileAt(w + "/zdir/passwd", "dir v2\n"));
  REQUIRE(WriteFileAt(w + "/zdir/new", "new\n"));
  auto y = Snap(*r);
  REQUIRE(r->Restore(x.Hex()));

  auto nx = snap::LoadNode(r->store(), x);
  auto ny = snap::LoadNode(r->store(), y);
  REQUIRE(nx);
  REQUIRE(ny);
  for (const char* name : {"etc", "f", "zdir"}) {
    RemoveAt(AT_FDCWD, w + "/" + name);
    std::string target = std::string(name) == "f" ? outside + "/f" : outside;
    REQUIRE(::symlink(target.c_str(), (w + "/" + name).c_str()) == 0);
  }
  Manifest before = Capture(outside);
  UniqueFd work(::open(w.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(work);
  snap::RestoreOptions opt;
  opt.privileged = IsRoot();
  auto res = snap::RestoreTree(r->store(), work.get(), nx->tree, ny->tree, ny->root, ny->links, opt);
  INFO("restore result: " << (res ? "ok" : res.error().message));
  for (const auto& d : CompareManifests(before, Capture(outside))) FAIL_CHECK("outside changed: " << d);
}

void RestoreEmpty(const std::string& base) {
  auto r = MakeRepo(base + "/repo");
  const std::string w = r->work_dir();
  Manifest empty = Capture(w);
  auto first = r->Snapshot({.message = "empty", .label = "", .paths = std::nullopt, .allow_empty = true});
  REQUIRE(first);
  REQUIRE(first->node);
  REQUIRE(::mkdir((w + "/ro").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/ro/file", "ro", 0400));
  REQUIRE(::mkdir((w + "/ro/locked").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/ro/locked/inner", "inner", 0));
  REQUIRE(::chmod((w + "/ro/locked").c_str(), 0) == 0);
  REQUIRE(::chmod((w + "/ro").c_str(), 0555) == 0);
  Snap(*r);
  auto res = r->Restore(first->node->Hex());
  REQUIRE(res);
  for (const auto& d : CompareManifests(empty, Capture(w))) FAIL_CHECK(d);
}

TEST_CASE("restore hands stat cache entries to the sink one batch at a time and returns after the last", "[snap]") {
  TempDir t;
  auto r = MakeRepo(t.str() + "/repo");
  const std::string w = r->work_dir();
  // More files than a few batches of the sink (4096 to 16384 entries), in a few directories,
  // with an mtime well before the restore (newer ones are left out).
  constexpr int kFiles = 20000;
  for (int d = 0; d < 4; ++d) {
    std::string dir = w + "/d" + std::to_string(d);
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    for (int i = d; i < kFiles; i += 4) {
      std::string f = dir + "/f" + std::to_string(i);
      REQUIRE(WriteFileAt(f, std::to_string(i)));
      REQUIRE(SetMtime(f, 1600000000, 0));
    }
  }
  auto full = Snap(*r);
  auto n = snap::LoadNode(r->store(), full);
  REQUIRE(n);
  TempDir out;
  UniqueFd fd(::open(out.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  REQUIRE(fd);
  snap::RestoreOptions opt;
  opt.privileged = IsRoot();
  opt.fresh = true;
  std::atomic<int> inside{0}, overlapped{0}, calls{0};
  std::atomic<size_t> sunk{0}, min_batch{SIZE_MAX}, max_batch{0};
  std::set<std::string> seen;  // written by one call at a time
  opt.stat_sink = [&](std::vector<std::pair<std::string, snap::StatEntry>>&& batch) -> Result<void> {
    if (inside.fetch_add(1) != 0) ++overlapped;
    // Slow, like a commit waiting on an fsync: the restore goes on meanwhile.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    for (const auto& [rel, e] : batch) seen.insert(rel);
    sunk += batch.size();
    min_batch = std::min(min_batch.load(), batch.size());
    max_batch = std::max(max_batch.load(), batch.size());
    ++calls;
    inside.fetch_sub(1);
    return {};
  };
  auto res = snap::RestoreTree(r->store(), fd.get(), snap::EmptyTreeId(), n->tree, n->root, n->links, opt);
  REQUIRE(res);
  // Every call has returned: nothing is still being handed over.
  CHECK(inside.load() == 0);
  CHECK(overlapped.load() == 0);
  // The slow sink is busy when the next 4096 are ready: batches grow to
  // 16384 rather than the restore waiting. The rest is returned.
  CHECK(calls.load() >= 1);
  CHECK(calls.load() <= kFiles / 4096);
  CHECK(min_batch.load() >= 4096);
  CHECK(max_batch.load() <= 16384);
  CHECK(sunk.load() + res->stat_entries.size() == size_t(kFiles));
  CHECK(seen.size() == sunk.load());
  for (const auto& [rel, e] : res->stat_entries) CHECK(seen.count(rel) == 0);
  for (const auto& d : CompareManifests(Capture(w), Capture(out.str()))) FAIL_CHECK(d);

  SECTION("a failing sink fails the restore at its end") {
    TempDir out2;
    UniqueFd fd2(::open(out2.str().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    opt.stat_sink = [&](std::vector<std::pair<std::string, snap::StatEntry>>&&) -> Result<void> {
      return Fail(ErrorCode::kIo, "stat sink: disk full");
    };
    auto failed = snap::RestoreTree(r->store(), fd2.get(), snap::EmptyTreeId(), n->tree, n->root, n->links, opt);
    REQUIRE(!failed);
    CHECK(failed.error().message == "stat sink: disk full");
  }
}

TEST_CASE("restore of a deleted tree removes read-only and 0000 content", "[snap]") {
  DeepTempDir t;
  RestoreEmpty(t.str());
}

TEST_CASE("restore of a deleted tree removes read-only and 0000 content on btrfs", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  if (!IsRoot()) Skip("needs root to make and mount a loopback btrfs");
  if (!m.ok()) Skip("cannot make a loopback btrfs here (loop devices, mkfs.btrfs)");
  RestoreEmpty(m.dir());
}

}  // namespace
}  // namespace agentenv::test
