// gc: Batch::Drop and Store::Compact reclaim space, keep shared chunks,
// survive kill -9 at any point and never break a concurrent reader.
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "store/inspect.h"
#include "store/manifest.h"
#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::ObjectId;
using store::ObjectType;
using store::Store;

// Bytes the pack files occupy on disk, as du counts them.
uint64_t DiskUsage(const std::string& store_dir) {
  uint64_t total = 0;
  auto files = store::ListPackFiles(store_dir);
  REQUIRE(files);
  for (uint32_t n : *files) {
    struct stat st;
    REQUIRE(::stat(store::PackPath(store_dir, n).c_str(), &st) == 0);
    total += uint64_t(st.st_blocks) * 512;
  }
  return total;
}

std::vector<ObjectId> ChunksOf(const Store& s, const store::FileRef& f) {
  auto m = s.Get(f.id);
  REQUIRE(m);
  auto chunks = store::DecodeManifest(*m);
  REQUIRE(chunks);
  std::vector<ObjectId> out;
  for (auto& c : *chunks) out.push_back(c.id);
  return out;
}

void FsckClean(const Store& s, fsck::FsckReport* rep = nullptr) {
  auto findings = Fsck(s, rep);
  std::string all;
  for (auto& f : findings) all += f.message + "\n";
  INFO(all);
  CHECK(findings.empty());
}

TEST_CASE("store gc: drop + compact frees the dropped bytes and keeps shared chunks") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  // A and B share their first 2 MiB: dropping A must keep those chunks.
  auto a = RandomBytes(4 << 20, 1), b = a;
  b.resize(2 << 20);
  auto tail = RandomBytes(2 << 20, 2);
  b.insert(b.end(), tail.begin(), tail.end());
  WriteFile(t.str() + "/a", a);
  WriteFile(t.str() + "/b", b);
  auto batch = *s->BeginBatch();
  auto fa = PutPath(*batch, t.str() + "/a");
  auto fb = PutPath(*batch, t.str() + "/b");
  std::vector<ObjectId> small;
  for (int i = 0; i < 20; ++i) small.push_back(*batch->Put(ObjectType::kChunk, RandomBytes(100000, 100 + i)));
  CommitOk(*batch);

  // What the snapshot layer would compute: A's manifest and the chunks
  // only A references, plus half of the small objects.
  auto a_chunks = ChunksOf(*s, fa), b_chunks = ChunksOf(*s, fb);
  std::set<ObjectId> keep(b_chunks.begin(), b_chunks.end());
  std::vector<ObjectId> drop{fa.id};
  for (auto& c : a_chunks)
    if (!keep.count(c)) drop.push_back(c);
  REQUIRE(drop.size() < a_chunks.size() + 1);  // some chunks are shared
  for (int i = 0; i < 10; ++i) drop.push_back(small[i]);
  uint64_t dropped_stored = 0;
  for (auto& id : drop) dropped_stored += s->Stat(id)->stored_size;

  auto before = *s->Stats();
  uint64_t du_before = DiskUsage(s->dir());
  batch = *s->BeginBatch();
  for (auto& id : drop) REQUIRE(batch->Drop(id));
  CommitOk(*batch);
  for (auto& id : drop) CHECK_FALSE(*s->Has(id));
  auto after_drop = *s->Stats();
  CHECK(after_drop.stored_bytes == before.stored_bytes - dropped_stored);
  CHECK(after_drop.pack_bytes == before.pack_bytes);  // not reclaimed yet
  fsck::FsckReport rep;
  FsckClean(*s, &rep);
  CHECK(rep.dead_records == drop.size());

  std::vector<store::CompactProgress> progress;
  // The batch's parallel writers spread it over one or more packs: any
  // pack with a dropped record qualifies.
  auto r = s->Compact(store::CompactOptions{.min_dead_fraction = 0.01},
                      [&](const store::CompactProgress& p) { progress.push_back(p); });
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  CHECK(r->packs_rewritten >= 1);
  CHECK(!progress.empty());
  auto after = *s->Stats();
  // Freed: the dropped payloads plus their headers and alignment padding.
  CHECK(before.pack_bytes - after.pack_bytes >= dropped_stored);
  CHECK(before.pack_bytes - after.pack_bytes <= dropped_stored + drop.size() * 4160);
  CHECK(r->bytes_freed == before.pack_bytes - after.pack_bytes);
  CHECK(DiskUsage(s->dir()) + dropped_stored <= du_before + 64 * 1024);
  CHECK(after.objects == before.objects - drop.size());

  for (auto& id : drop) CHECK_FALSE(*s->Has(id));
  CHECK(ReadBack(*s, fb) == b);
  for (int i = 10; i < 20; ++i) CHECK(s->Get(small[i]));
  FsckClean(*s, &rep);
  CHECK(rep.dead_records == 0);
  // Survives reopening, and nothing is left to compact.
  s = OpenStore(t.str() + "/s", Store::Mode::kOpen);
  CHECK(ReadBack(*s, fb) == b);
  CHECK(s->Compact({})->packs_rewritten == 0);
}

TEST_CASE("store gc: Drop inside a batch: atomic, idempotent, cancelled by a later Put") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto x = RandomBytes(5000, 1), y = RandomBytes(5000, 2), z = RandomBytes(5000, 3);
  auto b = *s->BeginBatch();
  auto xid = *b->Put(ObjectType::kChunk, x);
  auto yid = *b->Put(ObjectType::kChunk, y);
  CommitOk(*b);
  CHECK(*s->Removals() == 0);  // commits that remove nothing are not counted

  b = *s->BeginBatch();
  REQUIRE(b->Drop(ObjectId::Of(RandomBytes(9, 9))));  // unknown: removes nothing
  CommitOk(*b);
  CHECK(*s->Removals() == 0);

  b = *s->BeginBatch();
  REQUIRE(b->Drop(xid));
  REQUIRE(b->Drop(xid));                             // twice: still one drop
  REQUIRE(b->Drop(ObjectId::Of(RandomBytes(9, 9))));  // unknown: no-op
  REQUIRE(b->Drop(yid));
  REQUIRE(b->Put(ObjectType::kChunk, y));  // y is wanted again: stays
  auto zid = *b->Put(ObjectType::kChunk, z);
  REQUIRE(b->Drop(zid));  // put and dropped in one batch: dead on arrival
  CHECK(*s->Has(xid));    // nothing visible before Commit
  CommitOk(*b);
  CHECK_FALSE(*s->Has(xid));
  CHECK(*s->Has(yid));
  CHECK_FALSE(*s->Has(zid));
  CHECK(*s->Removals() == 1);
  fsck::FsckReport rep;
  FsckClean(*s, &rep);
  CHECK(rep.dead_records == 2);

  // An abandoned batch drops nothing.
  { auto ab = *s->BeginBatch(); REQUIRE(ab->Drop(yid)); }
  CHECK(*s->Has(yid));
  CHECK(*s->Removals() == 1);
  // A dropped object can come back.
  b = *s->BeginBatch();
  REQUIRE(b->Put(ObjectType::kChunk, x));
  CommitOk(*b);
  CHECK(*s->Get(xid) == x);
  FsckClean(*s);
  // Compaction moves objects, removes none; the count survives reopening.
  CHECK(s->Compact({.min_dead_fraction = 0.0})->packs_rewritten >= 1);
  s = OpenStore(t.str() + "/s", Store::Mode::kOpen);
  CHECK(*s->Removals() == 1);
}

TEST_CASE("store gc: fully dead packs go without copying and pack numbers are never reused") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  auto id = *b->Put(ObjectType::kChunk, RandomBytes(70000, 1));
  CommitOk(*b);
  uint32_t pack = s->Stat(id)->pack;
  b = *s->BeginBatch();
  REQUIRE(b->Drop(id));
  CommitOk(*b);
  auto r = s->Compact({});
  REQUIRE(r);
  CHECK(r->packs_rewritten == 1);
  CHECK(r->objects_moved == 0);
  CHECK(s->Stats()->packs == 0);
  CHECK(store::ListPackFiles(s->dir())->empty());
  b = *s->BeginBatch();
  auto id2 = *b->Put(ObjectType::kChunk, RandomBytes(70000, 2));
  CommitOk(*b);
  CHECK(s->Stat(id2)->pack > pack);
  FsckClean(*s);
}

constexpr int kKillObjects = 300;
std::vector<uint8_t> KillObject(int i) { return RandomBytes(100000 + i, 5000 + i); }

TEST_CASE("store gc: compaction killed at random points leaves a consistent store") {
  TempDir t;
  std::string dir = t.str() + "/s";
  {
    auto s = OpenStore(dir, Store::Mode::kCreate);
    auto b = *s->BeginBatch();
    for (int i = 0; i < kKillObjects; ++i) REQUIRE(b->Put(ObjectType::kChunk, KillObject(i)));
    CommitOk(*b);
  }
  std::set<int> dropped;
  std::mt19937 rng(77);
  for (int round = 0; round < 6; ++round) {
    {
      auto s = OpenStore(dir, Store::Mode::kOpen);
      auto b = *s->BeginBatch();
      for (int i = round; i < kKillObjects; i += 7) {
        if (dropped.insert(i).second) REQUIRE(b->Drop(ObjectId::Of(KillObject(i))));
      }
      CommitOk(*b);
    }
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      auto s = Store::Open(dir, Store::Mode::kOpen);
      if (!s) _exit(2);
      _exit((*s)->Compact(store::CompactOptions{.min_dead_fraction = 0.01}) ? 0 : 3);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 150000));
    ::kill(pid, SIGKILL);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    INFO("round " << round << (WIFSIGNALED(status) ? ": killed" : ": finished"));
    if (WIFEXITED(status)) CHECK(WEXITSTATUS(status) == 0);

    auto s = OpenStore(dir, Store::Mode::kOpen);
    FsckClean(*s);
    for (int i = 0; i < kKillObjects; ++i) {
      ObjectId id = ObjectId::Of(KillObject(i));
      if (dropped.count(i)) {
        REQUIRE_FALSE(*s->Has(id));
      } else {
        auto got = s->Get(id);
        INFO((got ? "" : got.error().message));
        REQUIRE(got);
      }
    }
  }
  // A clean compaction at the end frees everything dropped.
  auto s = OpenStore(dir, Store::Mode::kOpen);
  REQUIRE(s->Compact(store::CompactOptions{.min_dead_fraction = 0.01}));
  fsck::FsckReport rep;
  FsckClean(*s, &rep);
  CHECK(rep.dead_records == 0);
}

// Pack files the process `pid` still holds open after they were deleted.
int DeletedPacksHeld(pid_t pid) {
  std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return -1;
  int n = 0;
  while (dirent* e = ::readdir(d)) {
    char target[4096];
    ssize_t len = ::readlink((dir + "/" + e->d_name).c_str(), target, sizeof target - 1);
    if (len <= 0) continue;
    std::string s(target, len);
    n += s.find(".pack") != std::string::npos && s.find("(deleted)") != std::string::npos;
  }
  ::closedir(d);
  return n;
}

TEST_CASE("store gc: a reader process keeps reading while another compacts") {
  TempDir t;
  std::string dir = t.str() + "/s";
  constexpr int kObjects = 400;
  auto obj = [](int i) { return RandomBytes(20000 + i, 900 + i); };
  auto s = OpenStore(dir, Store::Mode::kCreate);
  {
    auto b = *s->BeginBatch();
    for (int i = 0; i < kObjects; ++i) REQUIRE(b->Put(ObjectType::kChunk, obj(i)));
    CommitOk(*b);
  }
  // Survivors are the odd ids; the reader reads only those.
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    std::unique_ptr<Store> rs;
    for (int pass = 0; std::chrono::steady_clock::now() < end; ++pass) {
      // A long-lived store (cached fds) and, every other pass, a fresh one
      // (lookups that race the unlink of the old pack).
      if (!rs || pass % 2) {
        auto o = Store::Open(dir, Store::Mode::kOpen);
        if (!o) _exit(2);
        rs = std::move(*o);
      }
      for (int i = 1; i < kObjects; i += 2) {
        auto got = rs->Get(ObjectId::Of(obj(i)));
        if (!got || got->size() != size_t(20000 + i)) _exit(3);
      }
    }
    _exit(0);
  }
  int rounds = 0;
  for (int k = 0; k < 4; ++k, ++rounds) {
    auto b = *s->BeginBatch();
    for (int i = 2 * k; i < kObjects; i += 8) REQUIRE(b->Drop(ObjectId::Of(obj(i))));
    CommitOk(*b);
    auto r = s->Compact(store::CompactOptions{.min_dead_fraction = 0.01});
    INFO((r ? "" : r.error().message));
    REQUIRE(r);
    CHECK(r->packs_rewritten == 1);
  }
  // The reader lets go of deleted packs within about a second (its checks
  // are timed by the store, not by us: polled, with a deadline).
  CHECK(WaitFor([&] { return DeletedPacksHeld(pid) == 0; }, 2000));
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  FsckClean(*s);
}

TEST_CASE("store gc: batches from another process interleave with a compaction") {
  TempDir t;
  std::string dir = t.str() + "/s";
  auto s = OpenStore(dir, Store::Mode::kCreate);
  std::vector<ObjectId> live;
  {
    auto b = *s->BeginBatch();
    for (int i = 0; i < 200; ++i) {
      auto id = *b->Put(ObjectType::kChunk, RandomBytes(100000, 3000 + i));
      if (i % 2) REQUIRE(b->Drop(id));
      else live.push_back(id);
    }
    CommitOk(*b);
  }
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    auto ws = Store::Open(dir, Store::Mode::kOpen);
    if (!ws) _exit(2);
    for (int k = 0; k < 20; ++k) {
      auto b = (*ws)->BeginBatch();
      if (!b || !(*b)->Put(ObjectType::kChunk, RandomBytes(50000, 7000 + k)) || !(*b)->Commit()) _exit(3);
    }
    _exit(0);
  }
  auto r = s->Compact(store::CompactOptions{.min_dead_fraction = 0.3});
  INFO((r ? "" : r.error().message));
  REQUIRE(r);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (auto& id : live) CHECK(s->Get(id));
  for (int k = 0; k < 20; ++k) CHECK(*s->Has(ObjectId::Of(RandomBytes(50000, 7000 + k))));
  FsckClean(*s);
}

TEST_CASE("store gc: fsck while another process compacts reports nothing") {
  TempDir t;
  std::string dir = t.str() + "/s";
  auto s = OpenStore(dir, Store::Mode::kCreate);
  auto obj = [](int i) { return RandomBytes(30000 + i, 400 + i); };
  {
    auto b = *s->BeginBatch();
    for (int i = 0; i < 600; ++i) REQUIRE(b->Put(ObjectType::kChunk, obj(i)));
    CommitOk(*b);
  }
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // Drop a few, compact, repeat: the pack moves under the checker.
    auto cs = Store::Open(dir, Store::Mode::kOpen);
    if (!cs) _exit(2);
    for (int k = 0; k < 12; ++k) {
      auto b = (*cs)->BeginBatch();
      if (!b) _exit(3);
      for (int i = k; i < 600; i += 40) {
        if (!(*b)->Drop(ObjectId::Of(obj(i)))) _exit(4);
      }
      if (!(*b)->Commit() || !(*cs)->Compact({.min_dead_fraction = 0.01})) _exit(5);
    }
    _exit(0);
  }
  int checks = 0;
  for (int status = 0; ::waitpid(pid, &status, WNOHANG) == 0; ++checks) {
    // Errors only: the compaction's pack in the making is a known warning.
    std::vector<fsck::FsckFinding> findings;
    fsck::FsckCallbacks cb;
    cb.finding = [&](const fsck::FsckFinding& f) {
      if (f.severity == fsck::Severity::kError) findings.push_back(f);
    };
    auto r = fsck::CheckStore(*s, {}, cb);
    INFO((r ? "" : r.error().message));
    REQUIRE(r);
    std::string all;
    for (auto& f : findings) all += f.message + "\n";
    INFO(all);
    CHECK(findings.empty());
    if (!findings.empty()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
  }
  INFO(checks << " checks");
  CHECK(checks > 1);
  FsckClean(*s);
}

}  // namespace
}  // namespace agentenv::test
