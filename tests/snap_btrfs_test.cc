// The btrfs backend on a loopback btrfs made by each test: the change
// search (snap/btrfs.h) against full scans, subvolume snapshots of nodes,
// materialization, and what works without privileges.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <stdio.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <set>
#include <thread>

#include "snap/btrfs.h"
#include "snap/fsops.h"
#include "snap_testutil.h"

using namespace agentenv;
using namespace agentenv::test;
namespace fs = std::filesystem;

namespace {

bool Has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// Reads every file and lists every directory below `dir`. Under relatime
// (the default) the first read of each after it was written moves its
// atime, which rewrites its inode item in a new transaction.
void ReadEverything(const std::string& dir) {
  for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it)
    if (it->symlink_status().type() == fs::file_type::regular) (void)ReadFileAt(it->path().string());
}

int64_t AtimeNs(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return int64_t(st.st_atim.tv_sec) * 1'000'000'000 + st.st_atim.tv_nsec;
}

// Past the racy window: files written before are old enough for the
// change search to tell a read of them from a change.
void OutOfRacyWindow() {
  std::this_thread::sleep_for(std::chrono::nanoseconds(snap::kRacyWindowNs) + std::chrono::milliseconds(20));
}

}  // namespace

TEST_CASE("btrfs: the live tree is a subvolume and each node keeps a snapshot", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  auto backend = r->Backend();
  REQUIRE(backend);
  CHECK(*backend == "btrfs");
  CHECK(snap::btrfs::IsSubvolume(r->work_dir()));
  REQUIRE(WriteFileAt(r->work_dir() + "/a", "one\n"));
  auto s1 = r->Snapshot({});
  REQUIRE(s1);
  REQUIRE(s1->node);
  CHECK(s1->walked);  // no snapshot to compare with yet
  CHECK(snap::btrfs::IsSubvolume(snap::layout::Subvols(r->root()) + "/" + s1->node->Hex()));
  REQUIRE(WriteFileAt(r->work_dir() + "/b", "two\n"));
  auto s2 = r->Snapshot({});
  REQUIRE(s2);
  REQUIRE(s2->node);
  CHECK_FALSE(s2->walked);
  CHECK(s2->changes.added == 1);
  CHECK(s2->warnings.empty());
  // Nothing changed: no node, and nothing walked either.
  auto s3 = r->Snapshot({});
  REQUIRE(s3);
  CHECK_FALSE(s3->node);
  CHECK_FALSE(s3->walked);
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs: the LMDB files are not copy-on-write, the packs are", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  REQUIRE(WriteFileAt(r->work_dir() + "/a", RandomString(5000, 1)));
  REQUIRE(r->Snapshot({}));
  auto nocow = [](const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd);
    int flags = 0;
    REQUIRE(::ioctl(fd.get(), FS_IOC_GETFLAGS, &flags) == 0);
    return (flags & FS_NOCOW_FL) != 0;
  };
  CHECK(nocow(r->root() + "/meta/data.mdb"));
  CHECK(nocow(r->root() + "/store/index/data.mdb"));
  size_t packs = 0;
  for (const auto& e : fs::directory_iterator(r->root() + "/store/packs")) {
    CHECK_FALSE(nocow(e.path().string()));  // packs keep btrfs's checksums
    ++packs;
  }
  CHECK(packs > 0);
}

TEST_CASE("btrfs change search names deletions, renames, hardlinks, xattrs and chmod", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  const std::string live = m.dir() + "/live", base = m.dir() + "/base", next = m.dir() + "/next";
  REQUIRE(snap::btrfs::CreateSubvolume(live));
  REQUIRE(::mkdir((live + "/d").c_str(), 0755) == 0);
  REQUIRE(::mkdir((live + "/d/sub").c_str(), 0755) == 0);
  REQUIRE(::mkdir((live + "/e").c_str(), 0755) == 0);
  for (const char* f : {"/gone", "/keep", "/mode", "/attr", "/link", "/d/sub/f", "/e/x"})
    REQUIRE(WriteFileAt(live + f, std::string(f) + "\n"));
  REQUIRE(snap::btrfs::Snapshot(live, base, true));
  REQUIRE(::unlink((live + "/gone").c_str()) == 0);
  REQUIRE(::rename((live + "/d").c_str(), (live + "/e/moved").c_str()) == 0);
  REQUIRE(::chmod((live + "/mode").c_str(), 0600) == 0);
  REQUIRE(::setxattr((live + "/attr").c_str(), "user.k", "v", 1, 0) == 0);
  REQUIRE(::link((live + "/link").c_str(), (live + "/e/link2").c_str()) == 0);
  REQUIRE(snap::btrfs::Snapshot(live, next, true));
  auto ch = snap::btrfs::ChangedPaths(base, next, {});
  REQUIRE(ch);
  std::string all;
  for (const auto& p : ch->paths) all += p + " ";
  INFO("paths: " << all);
  CHECK(Has(ch->paths, "gone"));     // from the root's listing
  CHECK(Has(ch->paths, "d"));        // moved away
  CHECK(Has(ch->paths, "e/moved"));  // moved here: the whole subtree
  CHECK(Has(ch->paths, "mode"));
  CHECK(Has(ch->paths, "attr"));
  CHECK(Has(ch->paths, "link"));
  CHECK(Has(ch->paths, "e/link2"));
  CHECK_FALSE(Has(ch->paths, "keep"));
  CHECK_FALSE(Has(ch->paths, "e/x"));
  CHECK(Has(ch->entries, ""));
  CHECK(Has(ch->entries, "e"));
  // Ignored directories: their own entry only, nothing below.
  auto skipped = snap::btrfs::ChangedPaths(base, next, [](std::string_view rel, bool) { return rel == "e"; });
  REQUIRE(skipped);
  CHECK(Has(skipped->entries, "e"));
  CHECK_FALSE(Has(skipped->paths, "e/moved"));
  CHECK_FALSE(Has(skipped->paths, "e/link2"));
  REQUIRE(snap::btrfs::DeleteSubvolume(next));
  REQUIRE(snap::btrfs::DeleteSubvolume(base));
}

TEST_CASE("btrfs change search leaves out what was only read since the base but not what changed",
          "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  const std::string live = m.dir() + "/live", base = m.dir() + "/base", next = m.dir() + "/next";
  REQUIRE(snap::btrfs::CreateSubvolume(live));
  REQUIRE(::mkdir((live + "/d").c_str(), 0755) == 0);
  REQUIRE(::mkdir((live + "/d/sub").c_str(), 0755) == 0);
  for (const char* f : {"/a", "/d/read", "/d/write", "/d/sub/mode", "/d/sub/read"})
    REQUIRE(WriteFileAt(live + f, "version 1\n"));
  OutOfRacyWindow();
  // Written just before the base: read later, it still counts as changed
  // (a change in the same clock tick would have left its ctime as it was).
  REQUIRE(WriteFileAt(live + "/fresh", "version 1\n"));
  REQUIRE(snap::btrfs::Snapshot(live, base, true));
  const int64_t atime = AtimeNs(live + "/d/read");
  ReadEverything(live);
  REQUIRE(AtimeNs(live + "/d/read") != atime);  // the mount is relatime: reads rewrote inode items
  REQUIRE(WriteFileAt(live + "/d/write", "version 2\n"));  // same size, read first
  REQUIRE(::chmod((live + "/d/sub/mode").c_str(), 0600) == 0);
  REQUIRE(snap::btrfs::Snapshot(live, next, true));
  auto ch = snap::btrfs::ChangedPaths(base, next, {});
  REQUIRE(ch);
  std::string all;
  for (const auto& p : ch->paths) all += p + " ";
  INFO("paths: " << all << "; " << ch->read_only << " read only");
  CHECK(ch->paths == std::vector<std::string>{"d/sub/mode", "d/write", "fresh"});
  // The root was listed but "fresh" changed it just before the base: its
  // listing is compared; d and d/sub were only listed.
  CHECK(ch->entries == std::vector<std::string>{""});
  CHECK(ch->read_only == 5);  // a, d/read, d/sub/read, d, d/sub
  REQUIRE(snap::btrfs::DeleteSubvolume(next));
  REQUIRE(snap::btrfs::DeleteSubvolume(base));
}

TEST_CASE("btrfs: the first snapshot after init --from searches from the root node's snapshot "
          "though every file was read",
          "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  const std::string src = m.dir() + "/src";
  REQUIRE(::mkdir(src.c_str(), 0755) == 0);
  for (int d = 0; d < 10; ++d) {
    const std::string dir = src + "/d" + std::to_string(d);
    REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
    for (int f = 0; f < 20; ++f)
      REQUIRE(WriteFileAt(dir + "/f" + std::to_string(f), RandomString(100 + f, d * 20 + f)));
    REQUIRE(::symlink("f0", (dir + "/link").c_str()) == 0);
  }
  // As `agentenv init --from` does it.
  auto staged = snap::Repo::CreateStaged(m.dir() + "/repo");
  REQUIRE(staged);
  snap::Repo& r = **staged;
  auto seeded = r.Seed(src, "init");
  REQUIRE(seeded);
  REQUIRE(seeded->node);
  REQUIRE(r.FinishInit());
  const std::string root_snapshot = snap::layout::Subvols(r.root()) + "/" + seeded->node->Hex();
  REQUIRE(snap::btrfs::IsSubvolume(root_snapshot));
  const std::string w = r.work_dir();
  // The agent starts: it reads everything, then changes one file.
  ReadEverything(w);
  REQUIRE(WriteFileAt(w + "/d3/f7", "changed\n"));
  // What the next snapshot's search finds: the one file.
  const std::string probe = m.dir() + "/probe";
  REQUIRE(snap::btrfs::Snapshot(w, probe, true));
  auto ch = snap::btrfs::ChangedPaths(root_snapshot, probe, {});
  REQUIRE(ch);
  CHECK(ch->paths == std::vector<std::string>{"d3/f7"});
  CHECK(ch->entries.empty());
  // Every other file and every directory: all were read (the symlinks not).
  CHECK(ch->read_only == 10 * 20 - 1 + 11);
  REQUIRE(snap::btrfs::DeleteSubvolume(probe));
  auto s = r.Snapshot({});
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK_FALSE(s->walked);
  CHECK(s->hashed_files == 1);
  CHECK(s->changes.modified == 1);
  CHECK(HeadTree(r) == FullScanTree(r));
}

TEST_CASE("btrfs change search equals a full scan after 1000 random operations", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  std::mt19937_64 rng(Catch::rngSeed() ? Catch::rngSeed() : 20261123);
  auto pick = [&](size_t n) { return size_t(rng() % n); };
  const std::vector<std::string> names = {"a", "b", "c", "d", "e", "f"};
  // Everything below the live tree (relative), directories flagged.
  auto listing = [&](bool dirs_only) {
    std::vector<std::string> out;
    if (dirs_only) out.push_back("");
    for (auto it = fs::recursive_directory_iterator(w); it != fs::recursive_directory_iterator(); ++it) {
      bool dir = it->symlink_status().type() == fs::file_type::directory;
      if (dirs_only && !dir) continue;
      if (!dirs_only && dir) continue;
      out.push_back(it->path().string().substr(w.size() + 1));
    }
    return out;
  };
  auto at = [&](const std::string& rel) { return rel.empty() ? w : w + "/" + rel; };
  auto any_dir = [&] { auto d = listing(true); return d[pick(d.size())]; };
  auto new_path = [&] {
    std::string d = any_dir();
    return (d.empty() ? "" : d + "/") + names[pick(names.size())];
  };
  std::vector<std::string> log;
  std::vector<store::ObjectId> nodes;
  int snaps = 0, fast = 0, restores = 0, ops = 0;
  while (ops < 1000) {
    auto files = listing(false);
    std::string desc;
    switch (pick(17)) {
      case 0: case 1: {
        std::string p = new_path();
        desc = "write " + p;
        if (fs::symlink_status(at(p)).type() == fs::file_type::regular ||
            !fs::exists(fs::symlink_status(at(p))))
          WriteFileAt(at(p), RandomString(1 + pick(3000), rng()));
        break;
      }
      case 2:
        if (files.empty()) break;
        {
          std::string f = files[pick(files.size())];
          desc = "append " + f;
          int fd = ::open(at(f).c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW);
          if (fd >= 0) {
            (void)!::write(fd, "x", 1);
            ::close(fd);
          }
        }
        break;
      case 3:
        if (files.empty()) break;
        desc = "truncate " + files[pick(files.size())];
        (void)::truncate(at(desc.substr(9)).c_str(), 0);
        break;
      case 4:
        if (files.empty()) break;
        desc = "unlink " + files[pick(files.size())];
        ::unlink(at(desc.substr(7)).c_str());
        break;
      case 5: {
        std::string p = new_path();
        desc = "mkdir " + p;
        ::mkdir(at(p).c_str(), 0755);
        break;
      }
      case 6: {
        std::string d = any_dir();
        if (d.empty()) break;
        desc = "rm -r " + d;
        fs::remove_all(at(d));
        break;
      }
      case 7: case 8: {  // a file or a directory elsewhere, maybe over another
        bool dir = pick(2);
        std::string from = dir ? any_dir() : (files.empty() ? "" : files[pick(files.size())]);
        std::string to = new_path();
        if (from.empty()) break;
        desc = "rename " + from + " " + to;
        ::rename(at(from).c_str(), at(to).c_str());  // EINVAL into itself: fine
        break;
      }
      case 9: {
        std::string p = pick(2) || files.empty() ? any_dir() : files[pick(files.size())];
        desc = "chmod " + p;
        ::chmod(at(p).c_str(), pick(2) ? 0700 : 0755);
        break;
      }
      case 10: {
        std::string p = pick(2) || files.empty() ? any_dir() : files[pick(files.size())];
        desc = "xattr " + p;
        if (fs::is_symlink(fs::symlink_status(at(p)))) break;
        if (pick(3)) ::setxattr(at(p).c_str(), "user.k", names[pick(6)].data(), 1, 0);
        else ::removexattr(at(p).c_str(), "user.k");
        break;
      }
      case 11:
        if (files.empty() || pick(3)) break;
        {
          std::string f = files[pick(files.size())], to = new_path();
          desc = "link " + f + " " + to;
          ::link(at(f).c_str(), at(to).c_str());
        }
        break;
      case 12: {
        std::string p = new_path();
        desc = "symlink " + p;
        ::symlink(names[pick(6)].c_str(), at(p).c_str());
        break;
      }
      case 13:
        if (files.empty()) break;
        desc = "mtime " + files[pick(files.size())];
        SetMtime(at(desc.substr(6)), 1600000000 + pick(10), 0);
        break;
      case 14: {
        std::string a = pick(2) || files.empty() ? any_dir() : files[pick(files.size())];
        std::string b = pick(2) || files.empty() ? any_dir() : files[pick(files.size())];
        if (a.empty() || b.empty()) break;
        desc = "exchange " + a + " " + b;
        ::renameat2(AT_FDCWD, at(a).c_str(), AT_FDCWD, at(b).c_str(), RENAME_EXCHANGE);
        break;
      }
      case 15:
        if (files.empty()) break;
        desc = "chown " + files[pick(files.size())];
        ::lchown(at(desc.substr(6)).c_str(), 1000 + pick(2), 1000);
        break;
      case 16: {  // only moves atime: no change, which the search must tell
        std::string d = any_dir();
        desc = "read " + d;
        ReadEverything(at(d));
        break;
      }
    }
    if (!desc.empty()) {
      log.push_back(desc);
      ++ops;
    }
    if (pick(4) != 0 && ops < 1000) continue;
    // Now and then a base older than the racy window, from which the next
    // search leaves out what was only read.
    if (pick(8) == 0) OutOfRacyWindow();
    auto s = r->Snapshot({});
    REQUIRE(s);
    ++snaps;
    if (!s->walked) ++fast;
    if (s->node) nodes.push_back(*s->node);
    store::ObjectId full = FullScanTree(*r);
    if (HeadTree(*r) != full) {
      std::string last;
      for (size_t i = log.size() > 12 ? log.size() - 12 : 0; i < log.size(); ++i) last += log[i] + "; ";
      FAIL("after " << ops << " operations the change search missed a change; last: " << last);
    }
    // Now and then back to an earlier node, in place as under a running agent.
    if (!nodes.empty() && pick(20) == 0) {
      auto back = r->Restore(nodes[pick(nodes.size())].Hex());
      REQUIRE(back);
      ++restores;
      log.push_back("restore");
      CHECK(HeadTree(*r) == FullScanTree(*r));
    }
  }
  INFO("snapshots " << snaps << ", without a walk " << fast << ", restores " << restores);
  CHECK(fast * 2 > snaps);  // hardlinks force some walks, most take the fast path
}

TEST_CASE("btrfs: a subvolume nested in the live tree is recorded by walking", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  REQUIRE(WriteFileAt(w + "/top", "top\n"));
  Snap(*r);
  REQUIRE(snap::btrfs::CreateSubvolume(w + "/inner"));
  REQUIRE(WriteFileAt(w + "/inner/f", "inside\n"));
  auto s = r->Snapshot({});
  REQUIRE(s);
  REQUIRE(s->node);
  CHECK(s->walked);
  CHECK(s->changes.added == 2);  // inner and inner/f, not an empty directory
  CHECK_FALSE(fs::exists(snap::layout::Subvols(r->root()) + "/" + s->node->Hex()));
  auto low = r->LeaseLower(*s->node);
  REQUIRE(low);
  CHECK(ReadFileAt(low->dir() + "/inner/f") == "inside\n");
  // Without it, snapshots take the fast path again (after one walk).
  REQUIRE(snap::btrfs::DeleteSubvolume(w + "/inner"));
  REQUIRE(r->Snapshot({}));
  REQUIRE(WriteFileAt(w + "/top", "changed\n"));
  auto again = r->Snapshot({});
  REQUIRE(again);
  CHECK_FALSE(again->walked);
  CHECK(HeadTree(*r) == FullScanTree(*r));
}

TEST_CASE("btrfs materializes a node with a snapshot", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  REQUIRE(::mkdir((w + "/etc").c_str(), 0750) == 0);
  REQUIRE(WriteFileAt(w + "/etc/conf", "setting=1\n", 0600));
  REQUIRE(::symlink("etc/conf", (w + "/conf").c_str()) == 0);
  Manifest m1 = Capture(w);
  store::ObjectId n1 = Snap(*r);
  REQUIRE(WriteFileAt(w + "/etc/conf", "setting=2\n", 0600));
  store::ObjectId n2 = Snap(*r);
  auto low = r->LeaseLower(n1);
  REQUIRE(low);
  CHECK(low->method() == "snapshot");
  for (const auto& problem : CompareManifests(m1, Capture(low->dir()))) FAIL_CHECK(problem);
  // A node without a snapshot (dropped) comes from the store instead.
  REQUIRE(snap::btrfs::DeleteSubvolume(snap::layout::Subvols(r->root()) + "/" + n2.Hex()));
  auto low2 = r->LeaseLower(n2);
  REQUIRE(low2);
  CHECK(low2->method() == "reflink");
  CHECK(ReadFileAt(low2->dir() + "/etc/conf") == "setting=2\n");
  // Lowers are removed like any directory.
  CHECK(snap::RemoveTree(low->dir()));
  CHECK_FALSE(fs::exists(low->dir()));
}

TEST_CASE("AGENTENV_BACKEND=btrfs fails clearly off btrfs", "[snap][btrfs]") {
  TempDir t;
  ::setenv("AGENTENV_BACKEND", "btrfs", 1);
  auto r = snap::Repo::Create(t.str() + "/repo");
  ::unsetenv("AGENTENV_BACKEND");
  if (snap::btrfs::OnBtrfs(t.str())) Skip("the temporary directory is on btrfs");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ErrorCode::kUnsupported);
  CHECK(r.error().message.find("not a btrfs filesystem") != std::string::npos);
}

TEST_CASE("btrfs without privileges: subvolumes, snapshots by full scan, clear delete error", "[snap][btrfs][rootless]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  REQUIRE(::chmod(t.str().c_str(), 0755) == 0);
  REQUIRE(::chown(m.dir().c_str(), 65534, 65534) == 0);
  const std::string dir = m.dir();
  for (const auto& problem : RunAsNobody([&] {
         std::vector<std::string> p;
         auto r = snap::Repo::Create(dir + "/repo");
         if (!r) return std::vector<std::string>{"create: " + r.error().message};
         auto b = (*r)->Backend();
         if (!b || *b != "btrfs") p.push_back("backend is not btrfs");
         if (!snap::btrfs::IsSubvolume((*r)->work_dir())) p.push_back("live tree is not a subvolume");
         WriteFileAt((*r)->work_dir() + "/f", "rootless\n");
         auto s = (*r)->Snapshot({});
         if (!s || !s->node) p.push_back("snapshot failed");
         else if (!s->walked) p.push_back("snapshot did not walk");
         if (fs::exists(snap::layout::Subvols(dir + "/repo"))) p.push_back("kept snapshots it cannot delete");
         if (!snap::btrfs::Snapshot((*r)->work_dir(), dir + "/mine", true)) p.push_back("owner cannot snapshot");
         auto del = snap::btrfs::DeleteSubvolume(dir + "/mine");
         if (del || del.error().code != ErrorCode::kUnsupported ||
             del.error().message.find("user_subvol_rm_allowed") == std::string::npos)
           p.push_back("delete without privilege: expected a clear kUnsupported error");
         return p;
       }))
    FAIL_CHECK(problem);
}

TEST_CASE("btrfs change search misses nothing written while snapshots are taken", "[snap][btrfs][root]") {
  TempDir t;
  BtrfsMount m(t.str());
  NeedBtrfs(m);
  auto r = MakeRepo(m.dir() + "/repo");
  const std::string w = r->work_dir();
  for (int d = 0; d < 4; ++d) REQUIRE(::mkdir((w + "/d" + std::to_string(d)).c_str(), 0755) == 0);
  Snap(*r);
  int fast = 0, snaps = 0;
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> stop{false};
    // Same-size rewrites within one clock tick are the hard case: only
    // the generation (and the racy rule) can tell them apart.
    std::thread writer([&, round] {
      std::mt19937_64 rng(round);
      for (uint64_t i = 0; !stop; ++i) {
        std::string dir = w + "/d" + std::to_string(rng() % 4);
        std::string f = dir + "/f" + std::to_string(rng() % 8);
        switch (rng() % 5) {
          case 0: ::rename(f.c_str(), (w + "/d" + std::to_string(rng() % 4) + "/g" + std::to_string(rng() % 8)).c_str()); break;
          case 1: ::unlink(f.c_str()); break;
          case 2: ::chmod(f.c_str(), rng() % 2 ? 0600 : 0644); break;
          default: WriteFileAt(f, RandomString(64, i)); break;
        }
      }
    });
    for (int s = 0; s < 20; ++s) {
      auto res = r->Snapshot({});
      REQUIRE(res);
      ++snaps;
      fast += !res->walked;
    }
    stop = true;
    writer.join();
    auto last = r->Snapshot({});
    REQUIRE(last);
    INFO("round " << round);
    CHECK(HeadTree(*r) == FullScanTree(*r));
  }
  INFO("snapshots " << snaps << ", without a walk " << fast);
  CHECK(fast * 2 > snaps);
}
