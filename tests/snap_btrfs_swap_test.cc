// Restore by swapping subvolumes (snap/repo_swap.cc) on a loopback btrfs
// made by each test: the tree it gives, that it is a swap, when it must
// restore in place instead, ignored paths, the change search after it,
// and a swap cut short at each step.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "snap/btrfs.h"
#include "snap/live_use.h"
#include "snap_testutil.h"

using namespace agentenv;
using namespace agentenv::test;
namespace fs = std::filesystem;

namespace {

snap::RestoreResult SwapTo(snap::Repo& r, const store::ObjectId& node) {
  auto res = r.Restore(node.Hex(), std::nullopt, snap::RestoreMode::kSwapIfUnused);
  REQUIRE(res);
  return *res;
}

struct stat StatOf(const std::string& p) {
  struct stat st {};
  REQUIRE(::lstat(p.c_str(), &st) == 0);
  return st;
}

// Entries of work/ besides the live tree (a swap's leftovers).
std::vector<std::string> WorkLeftovers(snap::Repo& r) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(snap::layout::WorkParent(r.root())))
    if (e.path().filename() != "current") out.push_back(e.path().filename().string());
  return out;
}

// A child process whose working directory is `dir`, until killed.
pid_t ParkIn(const std::string& dir) {
  pid_t pid = ::fork();
  if (pid == 0) {
    if (::chdir(dir.c_str()) != 0) ::_exit(1);
    ::execlp("sleep", "sleep", "300", (char*)nullptr);
    ::_exit(1);
  }
  return pid;
}

// Polls `pred` for up to 10 s.
bool WaitUntil(const std::function<bool()>& pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    ::usleep(10000);
  }
  return false;
}

void Reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

}  // namespace

TEST_CASE("btrfs restore by swap gives exactly the node's tree without writing a file", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/d").c_str(), 0750) == 0);
  for (int i = 0; i < 2000; ++i) REQUIRE(WriteFileAt(w + "/d/f" + std::to_string(i), RandomString(2000, uint64_t(i))));
  REQUIRE(::symlink("d/f1", (w + "/link").c_str()) == 0);
  REQUIRE(::setxattr((w + "/d/f3").c_str(), "user.k", "v", 1, 0) == 0);
  REQUIRE(SetMtime(w + "/d/f4", 1600000000, 5));
  store::ObjectId n1 = Snap(*r);
  Manifest want = Capture(w);
  // Every file differs afterwards: in place, all 2000 would be written.
  for (int i = 0; i < 2000; ++i) REQUIRE(WriteFileAt(w + "/d/f" + std::to_string(i), "changed\n"));
  REQUIRE(WriteFileAt(w + "/new", "new\n"));
  REQUIRE(::unlink((w + "/link").c_str()) == 0);
  store::ObjectId n2 = Snap(*r);
  REQUIRE(WriteFileAt(w + "/unsaved", "unsaved\n"));
  struct stat before = StatOf(w);

  snap::RestoreResult res = SwapTo(*r, n1);
  INFO(res.not_swapped);
  REQUIRE(res.swapped);
  CHECK(res.stats.files_written == 0);
  CHECK(res.stats.warnings.empty());
  REQUIRE(res.saved);  // "unsaved" became a node first
  CHECK(TreeOf(*r, *res.saved) != TreeOf(*r, n2));
  // A new subvolume (new device), holding the snapshot's very inodes.
  struct stat after = StatOf(w);
  CHECK(after.st_dev != before.st_dev);
  CHECK(StatOf(w + "/d/f7").st_ino == StatOf(snap::layout::Subvols(r->root()) + "/" + n1.Hex() + "/d/f7").st_ino);
  CHECK(snap::btrfs::IsSubvolume(w));
  CHECK(WorkLeftovers(*r).empty());
  CHECK_FALSE(fs::exists(snap::layout::Restoring(r->root())));
  auto diffs = CompareManifests(want, Capture(w));
  for (const auto& d : diffs) UNSCOPED_INFO(d);
  CHECK(diffs.empty());
  auto head = r->Head();
  REQUIRE(head);
  CHECK(**head == n1);
  CHECK(HeadTree(*r) == FullScanTree(*r));
  // The swap's HEAD move is in the operation log, written with it.
  auto ops = r->meta().RecentOperations(1);
  REQUIRE(ops);
  REQUIRE(ops->size() == 1);
  CHECK((*ops)[0].kind == snap::OpKind::kRestore);
  CHECK((*ops)[0].from == n2);
  CHECK((*ops)[0].to == n1);
  CHECK((*ops)[0].saved == res.saved);

  // The next snapshot searches changes from n1's snapshot: the swapped-in
  // tree is a snapshot of it.
  REQUIRE(WriteFileAt(w + "/d/f9", "after the swap\n"));
  auto s = r->Snapshot({});
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK_FALSE(s->walked);
  CHECK(s->changes.modified == 1);
  CHECK(HeadTree(*r) == FullScanTree(*r));
  // And back, by swap again, to the node saved before the first one.
  snap::RestoreResult back = SwapTo(*r, *res.saved);
  CHECK(back.swapped);
  CHECK(ReadFileAt(w + "/unsaved") == "unsaved\n");
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs restore by swap keeps the stat cache matching, and gc drops the rows of what it took away",
          "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/d").c_str(), 0750) == 0);
  for (int i = 0; i < 50; ++i) REQUIRE(WriteFileAt(w + "/d/f" + std::to_string(i), RandomString(3000, uint64_t(i))));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));  // past the racy window: rows are written
  store::ObjectId n1 = Snap(*r);
  REQUIRE(::mkdir((w + "/gone").c_str(), 0750) == 0);
  for (int i = 0; i < 20; ++i) REQUIRE(WriteFileAt(w + "/gone/g" + std::to_string(i), RandomString(3000, 100 + uint64_t(i))));
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  Snap(*r);
  auto rows_match = [&](const std::string& prefix, int n) {
    auto dev = r->LiveStatDev();
    REQUIRE(dev);
    auto stats = *r->meta().ReadStats();
    int matching = 0;
    for (int i = 0; i < n; ++i) {
      std::string rel = prefix + std::to_string(i);
      auto row = stats->Get(rel);
      struct stat st;
      if (row && ::lstat((w + "/" + rel).c_str(), &st) == 0 && row->Matches(snap::StatFields::Of(st, *dev))) ++matching;
    }
    return matching;
  };
  REQUIRE(rows_match("d/f", 50) == 50);
  REQUIRE(rows_match("gone/g", 20) == 20);

  r->set_swap_from(0);  // these trees differ in a few paths only
  REQUIRE(SwapTo(*r, n1).swapped);
  // A new subvolume, another st_dev, the same inodes and times: the rows
  // still match, so no scan reads these files again.
  CHECK(rows_match("d/f", 50) == 50);
  auto gc = r->Gc(store::CompactOptions{0.0});
  REQUIRE(gc);
  CHECK(gc->stale_cache_rows >= 20);  // gone/g* (and gone's entry row)
  auto stats = *r->meta().ReadStats();
  for (int i = 0; i < 20; ++i) CHECK_FALSE(stats->Get("gone/g" + std::to_string(i)));
  stats.reset();
  CHECK(rows_match("d/f", 50) == 50);
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs restore of a few paths rewrites them in place, which costs less than a swap", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  for (int i = 0; i < 10; ++i) REQUIRE(WriteFileAt(w + "/f" + std::to_string(i), "one\n"));
  store::ObjectId n1 = Snap(*r);
  for (int i = 0; i < 10; ++i) REQUIRE(WriteFileAt(w + "/f" + std::to_string(i), "two\n"));
  Snap(*r);
  dev_t dev = StatOf(w).st_dev;
  snap::RestoreResult res = SwapTo(*r, n1);
  CHECK_FALSE(res.swapped);
  CHECK(res.not_swapped.empty());  // not a refusal: the cheaper way
  CHECK(StatOf(w).st_dev == dev);
  CHECK(ReadFileAt(w + "/f3") == "one\n");
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs restore by swap: a process in the live tree forces the in-place restore", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  r->set_swap_from(0);  // these trees differ in a few paths only
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/d").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/d/a", "one\n"));
  store::ObjectId n1 = Snap(*r);
  REQUIRE(WriteFileAt(w + "/d/a", "two\n"));
  store::ObjectId n2 = Snap(*r);

  SECTION("a working directory") {
    pid_t pid = ParkIn(w + "/d");
    REQUIRE(pid > 0);
    REQUIRE(WaitUntil([&] {
      struct stat st;
      return ::stat(("/proc/" + std::to_string(pid) + "/cwd").c_str(), &st) == 0 && st.st_dev == StatOf(w).st_dev;
    }));
    snap::RestoreResult res = SwapTo(*r, n1);
    CHECK_FALSE(res.swapped);
    CHECK(res.not_swapped.find("pid " + std::to_string(pid)) != std::string::npos);
    CHECK(res.not_swapped.find("cwd") != std::string::npos);
    // The process still works in the live tree and sees the restore.
    std::string cwd = "/proc/" + std::to_string(pid) + "/cwd";
    CHECK(fs::read_symlink(cwd).string() == w + "/d");
    CHECK(ReadFileAt(cwd + "/a") == "one\n");
    Reap(pid);
  }
  SECTION("an open file") {
    int fd = ::open((w + "/d/a").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    snap::RestoreResult res = SwapTo(*r, n1);
    ::close(fd);
    CHECK_FALSE(res.swapped);
    CHECK(res.not_swapped.find("fd/") != std::string::npos);
  }
  SECTION("a mapped file, its descriptor closed") {
    int fd = ::open((w + "/d/a").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    void* map = ::mmap(nullptr, 4, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    REQUIRE(map != MAP_FAILED);
    snap::RestoreResult res = SwapTo(*r, n1);
    ::munmap(map, 4);
    CHECK_FALSE(res.swapped);
    CHECK(res.not_swapped.find("map_files/") != std::string::npos);
  }
  SECTION("nothing: swapped") {
    auto user = snap::FindSubvolumeUser(w);
    REQUIRE(user);
    CHECK_FALSE(*user);
    CHECK(SwapTo(*r, n1).swapped);
  }
  CHECK(ReadFileAt(w + "/d/a") == "one\n");
  CHECK(HeadTree(*r) == TreeOf(*r, n1));
  CHECK(HeadTree(*r) == FullScanTree(*r));
  (void)n2;
}

TEST_CASE("btrfs restore by swap keeps the live tree's ignored paths", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  r->set_swap_from(0);  // these trees differ in a few paths only
  r->set_ignored([](std::string_view rel, bool) { return rel == "tmp" || rel == "run" || rel == "var/cache"; },
                 {"tmp", "run", "var/cache"});
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/tmp").c_str(), 01777) == 0);
  REQUIRE(::chmod((w + "/tmp").c_str(), 01777) == 0);
  REQUIRE(::mkdir((w + "/var").c_str(), 0755) == 0);
  REQUIRE(::mkdir((w + "/var/cache").c_str(), 0755) == 0);
  REQUIRE(WriteFileAt(w + "/tmp/old", "in the node's snapshot\n"));
  REQUIRE(WriteFileAt(w + "/a", "one\n"));
  store::ObjectId n1 = Snap(*r);
  REQUIRE(::unlink((w + "/tmp/old").c_str()) == 0);
  REQUIRE(::mkdir((w + "/tmp/sub").c_str(), 0700) == 0);
  REQUIRE(WriteFileAt(w + "/tmp/sub/live", "live\n"));
  REQUIRE(::mkdir((w + "/run").c_str(), 0755) == 0);  // the node lacks it
  REQUIRE(WriteFileAt(w + "/var/cache/pkg", "cached\n"));
  REQUIRE(WriteFileAt(w + "/a", "two\n"));
  Snap(*r);
  Manifest tmp_before = Capture(w + "/tmp");

  snap::RestoreResult res = SwapTo(*r, n1);
  INFO(res.not_swapped);
  REQUIRE(res.swapped);
  CHECK(ReadFileAt(w + "/a") == "one\n");
  auto diffs = CompareManifests(tmp_before, Capture(w + "/tmp"));
  for (const auto& d : diffs) UNSCOPED_INFO(d);
  CHECK(diffs.empty());
  CHECK_FALSE(fs::exists(w + "/tmp/old"));
  CHECK(fs::is_directory(w + "/run"));
  CHECK(ReadFileAt(w + "/var/cache/pkg") == "cached\n");
  CHECK(HeadTree(*r) == TreeOf(*r, n1));
  // The placeholder n1 lacks is the one difference, as after a restore in place.
  REQUIRE(::rmdir((w + "/run").c_str()) == 0);
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs restore: swaps, snapshots and in-place restores in random order match full scans", "[snap][btrfs][root][slow]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  r->set_swap_from(0);  // these trees differ in a few paths only
  const std::string w = r->work_dir();
  std::mt19937_64 rng(Catch::rngSeed() ? Catch::rngSeed() : 20261125);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  const std::vector<std::string> names = {"a", "b", "c", "d/a", "d/b", "d/e/f", "g"};
  std::vector<store::ObjectId> nodes;
  std::vector<std::string> log;
  int swaps = 0, in_place = 0, fast = 0, snaps = 0;
  for (int step = 0; step < 300; ++step) {
    std::string p = w + "/" + names[pick(names.size())];
    switch (pick(6)) {
      case 0: case 1:
        {
          std::error_code ec;
          fs::create_directories(fs::path(p).parent_path(), ec);
        }
        if (!fs::is_directory(p)) WriteFileAt(p, RandomString(1 + pick(5000), rng()));
        log.push_back("write " + p);
        break;
      case 2:
        fs::remove_all(p);
        log.push_back("rm " + p);
        break;
      case 3:
        ::chmod(p.c_str(), pick(2) ? 0700 : 0644);
        log.push_back("chmod " + p);
        break;
      case 4: {
        std::string q = w + "/" + names[pick(names.size())];
        ::rename(p.c_str(), q.c_str());
        log.push_back("rename " + p + " " + q);
        break;
      }
      case 5:
        fs::remove_all(w + "/d");
        log.push_back("rm d");
        break;
    }
    if (pick(3) != 0) continue;
    auto s = r->Snapshot({});
    REQUIRE(s);
    ++snaps;
    if (!s->walked) ++fast;
    if (s->node) nodes.push_back(*s->node);
    if (HeadTree(*r) != FullScanTree(*r)) FAIL("snapshot after step " << step << " differs; last: " << log.back());
    if (nodes.empty() || pick(3) != 0) continue;
    const store::ObjectId& to = nodes[pick(nodes.size())];
    bool swap = pick(3) != 0;
    auto res = r->Restore(to.Hex(), std::nullopt, swap ? snap::RestoreMode::kSwapIfUnused : snap::RestoreMode::kInPlace);
    REQUIRE(res);
    (res->swapped ? swaps : in_place) += 1;
    log.push_back(res->swapped ? "swap" : "restore in place");
    CHECK(HeadTree(*r) == TreeOf(*r, to));
    if (HeadTree(*r) != FullScanTree(*r)) FAIL("restore at step " << step << " differs (" << log.back() << ")");
    CHECK(WorkLeftovers(*r).empty());
  }
  INFO("snapshots " << snaps << ", fast " << fast << ", swaps " << swaps << ", in place " << in_place);
  CHECK(swaps > 0);
  CHECK(in_place > 0);
  CHECK(fast * 2 > snaps);
}

TEST_CASE("btrfs restore by swap cut short at each step leaves a usable repository", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  const std::string root = m.dir() + "/repo";
  store::ObjectId n1, n2;
  {
    auto r = MakeRepo(root);
    REQUIRE(WriteFileAt(r->work_dir() + "/a", "one\n"));
    n1 = Snap(*r);
    REQUIRE(WriteFileAt(r->work_dir() + "/a", "two\n"));
    REQUIRE(WriteFileAt(r->work_dir() + "/b", "b\n"));
    n2 = Snap(*r);
  }
  const std::string work = snap::layout::Work(root), tmp = snap::layout::WorkParent(root) + "/.swap-4242";
  REQUIRE(snap::btrfs::Snapshot(snap::layout::Subvols(root) + "/" + n1.Hex(), tmp, false));
  std::string expect;
  SECTION("killed before the exchange: the old tree, a leftover") {
    expect = "two\n";
  }
  SECTION("killed after the exchange, before HEAD moved") {
    std::string marker = n1.Hex() + "\nswap\n";
    REQUIRE(WriteFileAt(snap::layout::Restoring(root), marker));
    REQUIRE(::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, work.c_str(), RENAME_EXCHANGE) == 0);
    expect = "one\n";
  }
  auto r = snap::Repo::Open(root);
  REQUIRE(r);
  CHECK(ReadFileAt(work + "/a") == expect);
  // The next writer removes the leftover and does not trust HEAD's
  // snapshot when the swap got as far as the exchange.
  auto s = (*r)->Snapshot({});
  REQUIRE(s);
  CHECK_FALSE(fs::exists(tmp));
  CHECK(HeadTree(**r) == FullScanTree(**r));
  if (expect == "one\n") {
    CHECK(s->walked);
    REQUIRE(s->node);
    CHECK(HeadTree(**r) == TreeOf(**r, n1));
  } else {
    CHECK_FALSE(s->node);
  }
  CHECK_FALSE(fs::exists(snap::layout::Restoring(root)));
  // And swaps work again (n2 may have lost its snapshot above).
  (*r)->set_swap_from(0);  // n1 and the live tree differ in one path
  auto again = (*r)->Restore(n1.Hex(), std::nullopt, snap::RestoreMode::kSwapIfUnused);
  REQUIRE(again);
  INFO(again->not_swapped);
  CHECK(again->swapped);
  CHECK(ReadFileAt(work + "/a") == "one\n");
  CHECK(HeadTree(**r) == FullScanTree(**r));
}
