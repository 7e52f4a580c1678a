// Reference-counted gc: counts equal a naive recount after snapshots that
// share subtrees and chunks, dropping a node frees exactly what only it
// reached (and du goes down), the cost follows what was dropped, kill -9
// during snapshots and gc loses nothing and never undercounts, fsck finds
// and repairs a wrong count, an older repository gets counted once, and
// the references snapshots defer are counted before anything relies on them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <lmdb.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "fsck/fsck.h"
#include "snap/fsops.h"
#include "snap/refcount.h"
#include "snap/repo.h"
#include "store/manifest.h"
#include "tests/history_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;
using store::ObjectId;
using Counts = std::map<ObjectId, uint64_t>;

constexpr int64_t kMs = 1'000'000, kDay = 24 * 3600 * 1000 * kMs;

void Write(const std::string& path, const std::string& data) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Sets the mtime of the paths under `w` to one in 2023 (not following
// symlinks), and settles them (their ctimes: Settle), so that the next
// snapshot's stat and entry caches take them.
void AgeForCaches(Repo& repo, const std::string& w, std::initializer_list<const char*> paths) {
  for (const char* f : paths) {
    struct timespec ts[2] = {{1'700'000'000, 0}, {1'700'000'000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (w + "/" + f).c_str(), ts, AT_SYMLINK_NOFOLLOW) == 0);
  }
  Settle(repo);
}

// Midnight-aligned, 400 days ago: retention's daily bucket holds the nodes
// of a test in one window.
int64_t OldDay() {
  int64_t now = snap::NowNs();
  return (now - 400 * kDay) / kDay * kDay + 3600 * 1000 * kMs;
}

ObjectId SnapAt(Repo& repo, int64_t time_ns, const std::string& msg = "") {
  // Files written within 50 ms of a scan are not stat-cached (racy-clean
  // rule); settled, they all are, so the stat cache, and with it the
  // counts, is deterministic.
  Settle(repo);
  snap::SnapOptions o;
  o.time_ns = time_ns;
  o.message = msg;
  return SnapNode(repo, o);
}

// Every reference of the repository, counted naively in memory by the
// rules of snap/refcount.h (children of an object counted once).
void CountTree(const store::Store& s, const ObjectId& id, store::ObjectType type, Counts& c) {
  if (c[id]++ > 0) return;
  if (type == store::ObjectType::kManifest) {
    auto chunks = store::DecodeManifest(*s.Get(id));
    REQUIRE(chunks);
    for (const auto& ch : *chunks) c[ch.id]++;
    return;
  }
  if (type != store::ObjectType::kTree) return;
  auto t = snap::LoadTree(s, id);
  REQUIRE(t);
  for (const auto& e : *t) {
    if (e.kind == snap::Kind::kDir) CountTree(s, e.id, store::ObjectType::kTree, c);
    else if (e.kind == snap::Kind::kFile) CountTree(s, e.id, e.content, c);
  }
}

Counts NaiveCounts(Repo& repo) {
  Counts c;
  auto nodes = AllNodes(repo.meta());
  REQUIRE(nodes);
  for (const auto& r : *nodes) {
    c[r.id]++;
    CountTree(repo.store(), r.tree, store::ObjectType::kTree, c);
  }
  REQUIRE(repo.meta().ForEachStat([&](const snap::StatEntry& e) { CountTree(repo.store(), e.ref.id, e.ref.type, c); }));
  return c;
}

// The table equals the naive count for every stored and every counted id.
void CheckExactCounts(Repo& repo) {
  REQUIRE(repo.CountDeferred());
  Counts want = NaiveCounts(repo);
  REQUIRE(repo.store().ForEach([&](const ObjectId& id, const store::ObjectInfo&) -> Result<void> {
    want.try_emplace(id, 0);
    return {};
  }));
  uint64_t rows = 0;
  for (const auto& [id, n] : want) {
    INFO("object " << id.Hex());
    CHECK(*repo.meta().RefCount(id) == n);
    rows += n > 0;
  }
  CHECK(*repo.meta().CountedObjects() == rows);
}

std::set<ObjectId> StoredIds(Repo& repo) {
  std::set<ObjectId> ids;
  REQUIRE(repo.store().ForEach([&](const ObjectId& id, const store::ObjectInfo&) -> Result<void> {
    ids.insert(id);
    return {};
  }));
  return ids;
}

uint64_t HistoryErrors(Repo& repo, std::vector<std::string>* kinds = nullptr) {
  auto r = repo.CheckHistory([&](const snap::HistoryFinding& f) {
    UNSCOPED_INFO(f.kind << ": " << f.message);
    if (kinds) kinds->push_back(f.kind);
  });
  REQUIRE(r);
  return *r;
}

TEST_CASE("refcount: counts equal a recount after snapshots sharing subtrees and chunks", "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  std::string big = RandomString(1 << 20, 1);  // a manifest of FastCDC chunks
  Write(w + "/a/f1", "one");
  Write(w + "/a/big", big);
  Write(w + "/b/f1", "one");  // b/ equals a/: one shared subtree
  Write(w + "/b/big", big);
  Write(w + "/c/big2", big + RandomString(8192, 2));  // shares most chunks with big
  for (std::string f : {"a/f1", "a/big", "b/f1", "b/big"}) {
    struct timespec ts[2] = {{1'700'000'000, 0}, {1'700'000'000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, (w + "/" + f).c_str(), ts, 0) == 0);
  }
  int64_t t0 = OldDay();
  ObjectId n1 = SnapAt(*repo, t0);
  auto rec1 = *repo->Record(n1);
  ObjectId sub = TreeEntryId(*repo, rec1.tree, "a");
  CHECK(sub == TreeEntryId(*repo, rec1.tree, "b"));
  CHECK(*repo->meta().RefCount(sub) == 0);  // deferred (refcount.h) ...
  REQUIRE(repo->CountDeferred());           // ... until counted
  CHECK(*repo->meta().RefCount(sub) == 2);  // named by the root twice
  CHECK(*repo->meta().RefCount(n1) == 1);
  CHECK(*repo->meta().RefCount(rec1.tree) == 1);
  CheckExactCounts(*repo);

  Write(w + "/a/f1", "changed");
  ObjectId n2 = SnapAt(*repo, t0 + kMs);
  REQUIRE(repo->CountDeferred());
  CHECK(*repo->meta().RefCount(sub) == 3);  // root 1 (a, b) and root 2 (b)
  CheckExactCounts(*repo);

  // A deleted file's stat entry goes with it, and so does its reference.
  std::filesystem::remove(w + "/c/big2");
  SnapAt(*repo, t0 + 2 * kMs);
  auto stats = repo->meta().ReadStats();
  REQUIRE(stats);
  CHECK_FALSE((*stats)->Get("c/big2"));
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);
  static_cast<void>(n2);
}

uint64_t DeferredNodes(Repo& repo) {
  auto txn = *repo.meta().Begin();
  auto n = txn->DeferredNodes();
  REQUIRE(n);
  return *n;
}

TEST_CASE("refcount: snapshots defer their tree references and gc, retain and fsck count them first",
          "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  std::string x = RandomString(300000, 21);  // a manifest with chunks
  int64_t t0 = OldDay();
  Write(w + "/d/f", x);
  Write(w + "/d/keep", "k");
  ObjectId n1 = SnapAt(*repo, t0, "n1");
  CHECK(DeferredNodes(*repo) == 1);
  ObjectId fx = TreeEntryId(*repo, TreeEntryId(*repo, repo->Record(n1)->tree, "d"), "f");
  CHECK(*repo->meta().RefCount(fx) == 1);  // the stat cache's, counted at once
  // The stat cache moves to new content: x reaches 0 and is garbage, but
  // n1's deferred tree still names it, so gc must keep it.
  Write(w + "/d/f", "y");
  SnapAt(*repo, t0 + kMs, "n2");
  CHECK(DeferredNodes(*repo) == 2);
  CHECK(*repo->meta().RefCount(fx) == 0);
  CHECK(HistoryErrors(*repo) == 0);  // fsck counts the deferred rows (and changes nothing)
  CHECK(DeferredNodes(*repo) == 2);
  auto gc = repo->Gc(store::CompactOptions{0.0});
  REQUIRE(gc);
  CHECK(gc->dropped_objects == 0);
  CHECK(DeferredNodes(*repo) == 0);
  CHECK(*repo->meta().RefCount(fx) == 1);
  REQUIRE(repo->Restore(n1.Hex()));
  CHECK(ReadString(w + "/d/f") == x);
  CheckExactCounts(*repo);

  // Retain drops a node whose references are still deferred: counted
  // first, then released, never below 0.
  Write(w + "/d/f", "z");
  SnapAt(*repo, t0 + 2 * kMs, "n3");
  Write(w + "/d/f", "w");
  SnapAt(*repo, t0 + 3 * kMs, "n4");
  Write(w + "/d/f", "v");
  SnapAt(*repo, t0 + 3 * kMs + 1, "n5");  // n4 is neither a window's oldest nor the last
  CHECK(DeferredNodes(*repo) > 0);
  snap::RetentionPolicy keep;
  keep.keep_last = 1;
  keep.keep_within = std::chrono::seconds(0);
  auto ret = repo->Retain(keep, false, snap::NowNs());
  REQUIRE(ret);
  CHECK_FALSE(ret->dropped.empty());
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);

  // A node made without being counted or deferred (what a binary older
  // than deferral does when it sees counts it does not know): the counts
  // are no longer trusted, and the next gc builds them again.
  {
    auto txn = *repo->meta().Begin();
    REQUIRE(txn->NextSeq());  // as a node record would take
    REQUIRE(txn->Commit());
  }
  {
    auto txn = *repo->meta().Begin();
    CHECK_FALSE(*txn->Counted());
  }
  auto regc = repo->Gc();
  REQUIRE(regc);
  CHECK(regc->counted);
  {
    auto txn = *repo->meta().Begin();
    CHECK(*txn->Counted());
  }
  CheckExactCounts(*repo);

  // The kDeferredNodesMax-th deferred snapshot counts them all itself.
  for (uint64_t i = 0; i < snap::kDeferredNodesMax; ++i) {
    Write(w + "/d/f", "v" + std::to_string(i));
    SnapAt(*repo, t0 + int64_t(4 + i) * kMs);
    INFO("snapshot " << i);
    CHECK(DeferredNodes(*repo) == (i + 1) % snap::kDeferredNodesMax);
  }
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);
}

TEST_CASE("refcount: a restore drops the stat and entry rows of what it removes, and keeps a new file's",
          "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  int64_t t0 = OldDay();
  Write(w + "/keep", "k");
  REQUIRE(::symlink("keep", (w + "/link").c_str()) == 0);
  ObjectId n0 = SnapAt(*repo, t0, "n0");
  // Snapshots run inside the racy window of these writes: age them so that
  // the stat and entry caches take them.
  Write(w + "/gone/big", RandomString(300000, 31));
  Write(w + "/gone/small", "s");
  REQUIRE(::unlink((w + "/link").c_str()) == 0);
  Write(w + "/link", "now a file");
  AgeForCaches(*repo, w, {"gone/big", "gone/small", "link", "keep"});
  SnapAt(*repo, t0 + kMs, "n1");
  {
    auto stats = *repo->meta().ReadStats();
    REQUIRE(stats->Get("gone/big"));
    REQUIRE(stats->Get("link"));
    REQUIRE(stats->GetEntry("gone"));
  }
  REQUIRE(repo->Restore(n0.Hex()));
  CHECK_FALSE(std::filesystem::exists(w + "/gone"));
  auto stats = *repo->meta().ReadStats();
  CHECK_FALSE(stats->Get("gone/big"));  // before: kept, and its content with it, for ever
  CHECK_FALSE(stats->Get("gone/small"));
  CHECK_FALSE(stats->GetEntry("gone"));
  CHECK_FALSE(stats->Get("link"));  // a file again a symlink: its row goes
  CHECK(stats->Get("keep"));        // unchanged: stays
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);

  // The other way (a symlink becomes a file): the restore writes the file's row.
  Write(w + "/x", "x");
  REQUIRE(::symlink("keep", (w + "/y").c_str()) == 0);
  ObjectId n2 = SnapAt(*repo, t0 + 2 * kMs, "n2");
  REQUIRE(::unlink((w + "/y").c_str()) == 0);
  Write(w + "/y", "a file at y");
  ObjectId n3 = SnapAt(*repo, t0 + 3 * kMs, "n3");
  REQUIRE(repo->Restore(n2.Hex()));
  REQUIRE(repo->Restore(n3.Hex()));
  CHECK(ReadString(w + "/y") == "a file at y");
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);
}

TEST_CASE("refcount: gc drops the cache rows of paths gone or changed since, and then their content",
          "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  int64_t t0 = OldDay();
  SnapAt(*repo, t0 - kMs, "root");  // a root node is always kept: n0 is not one
  Write(w + "/gone/big", RandomString(300000, 41));
  Write(w + "/edited", RandomString(200000, 42));
  Write(w + "/keep", "k");
  REQUIRE(::symlink("keep", (w + "/link").c_str()) == 0);
  AgeForCaches(*repo, w, {"gone/big", "edited", "keep", "link", "gone"});
  ObjectId n0 = SnapAt(*repo, t0, "n0");
  ObjectId big = TreeEntryId(*repo, TreeEntryId(*repo, repo->Record(n0)->tree, "gone"), "big");
  ObjectId edited = TreeEntryId(*repo, repo->Record(n0)->tree, "edited");
  // A snapshot drops the rows of what it no longer finds.
  std::filesystem::remove_all(w + "/gone");
  REQUIRE(::unlink((w + "/link").c_str()) == 0);
  SnapAt(*repo, t0 + kMs, "n1");
  {
    auto stats = *repo->meta().ReadStats();
    CHECK_FALSE(stats->Get("gone/big"));
    CHECK_FALSE(stats->GetEntry("link"));
    REQUIRE(stats->Get("edited"));
  }
  // What no snapshot cleans: a file changed since (its row never matches
  // again), and rows a restore by swap leaves for paths it took away
  // (written here as it leaves them).
  Write(w + "/edited", "after");
  {
    auto txn = *repo->meta().Begin();
    snap::RefCounter refs(repo->store(), *txn, *txn->Counted());
    snap::StatEntry row = **txn->GetStat("edited");
    REQUIRE(refs.PutStat("swapped/away", row));
    snap::EntryStat dir;
    dir.mode = S_IFDIR | 0755;
    REQUIRE(txn->PutEntry("swapped", dir));
    REQUIRE(txn->Commit());
  }
  snap::RetentionPolicy keep;
  keep.keep_last = 1;
  keep.keep_within = std::chrono::seconds(0);
  keep.buckets.clear();
  auto ret = repo->Retain(keep, false, snap::NowNs());
  REQUIRE(ret);
  REQUIRE(ret->dropped.size() == 1);
  REQUIRE(ret->dropped[0].id == n0);

  auto gc = repo->Gc(store::CompactOptions{0.0});
  REQUIRE(gc);
  CHECK(gc->stale_cache_rows == 3);
  auto stats = *repo->meta().ReadStats();
  CHECK_FALSE(stats->Get("edited"));
  CHECK_FALSE(stats->Get("swapped/away"));
  CHECK_FALSE(stats->GetEntry("swapped"));
  CHECK(stats->Get("keep"));  // unchanged: stays
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);
  CHECK_FALSE(*repo->store().Has(big));  // only n0 had it
  CHECK(*repo->store().Has(edited));     // n1 still has it
  // Once no node has it either, the content goes.
  REQUIRE(repo->Snapshot({}));
  ret = repo->Retain(keep, false, snap::NowNs());
  REQUIRE(ret);
  REQUIRE(repo->Gc(store::CompactOptions{0.0}));
  CHECK_FALSE(*repo->store().Has(edited));
  CheckExactCounts(*repo);
  auto again = repo->Gc(store::CompactOptions{0.0});
  REQUIRE(again);
  CHECK(again->stale_cache_rows == 0);
}

TEST_CASE("refcount: dropping a node frees exactly what only it reached, shared chunks stay, du goes down",
          "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  std::string r1 = RandomString(1 << 20, 11), r2 = RandomString(1 << 20, 12), r3 = RandomString(1 << 20, 13);
  int64_t t0 = OldDay();
  Write(w + "/shared.bin", r1);
  Write(w + "/etc/conf", "v0");
  ObjectId n0 = SnapAt(*repo, t0, "n0");
  Write(w + "/etc/conf", "v1");
  ObjectId n1 = SnapAt(*repo, t0 + kMs, "n1");
  Write(w + "/unique.bin", r2 + r3);  // only n2 has it; its r3 chunks reappear in n3
  ObjectId n2 = SnapAt(*repo, t0 + 2 * kMs, "n2");
  std::filesystem::remove(w + "/unique.bin");
  Write(w + "/tail.bin", r3 + "tail");
  Write(w + "/etc/conf", "v3");
  ObjectId n3 = SnapAt(*repo, t0 + 3 * kMs, "n3");
  CheckExactCounts(*repo);

  // What only n2 reaches: its node object and reachable ids that neither
  // another node nor the stat cache reaches.
  Counts all = NaiveCounts(*repo), others;
  for (ObjectId n : {n0, n1, n3}) {
    others[n]++;
    CountTree(repo->store(), repo->Record(n)->tree, store::ObjectType::kTree, others);
  }
  REQUIRE(repo->meta().ForEachStat([&](const snap::StatEntry& e) {
    CountTree(repo->store(), e.ref.id, e.ref.type, others);
  }));
  std::set<ObjectId> expect;
  for (const auto& [id, n] : all)
    if (!others.count(id)) expect.insert(id);
  ObjectId unique = TreeEntryId(*repo, repo->Record(n2)->tree, "unique.bin");
  CHECK(expect.count(unique));
  CHECK(expect.count(n2));
  auto chunks = *store::DecodeManifest(*repo->store().Get(unique));
  size_t shared_chunks = 0;
  for (const auto& c : chunks) shared_chunks += others.count(c.id);
  CHECK(shared_chunks > 0);  // r3's chunks are in tail.bin too
  CHECK(shared_chunks < chunks.size());

  snap::RetentionPolicy keep;
  keep.keep_last = 1;
  keep.keep_within = std::chrono::seconds(0);
  auto ret = repo->Retain(keep, false, snap::NowNs());
  REQUIRE(ret);
  REQUIRE(ret->dropped.size() == 1);
  CHECK(ret->dropped[0].id == n2);
  CHECK(ret->released == expect.size());
  CheckExactCounts(*repo);

  std::set<ObjectId> before = StoredIds(*repo);
  uint64_t du_before = DiskBytes(t.str() + "/r/store");
  auto gc = repo->Gc(store::CompactOptions{0.0});
  REQUIRE(gc);
  CHECK_FALSE(gc->counted);
  CHECK(gc->objects_read == 0);
  std::set<ObjectId> after = StoredIds(*repo), gone;
  for (const auto& id : before)
    if (!after.count(id)) gone.insert(id);
  CHECK(gone == expect);
  CHECK(gc->dropped_objects == expect.size());
  uint64_t du_after = DiskBytes(t.str() + "/r/store");
  INFO("store " << du_before << " -> " << du_after << " bytes");
  CHECK(du_after + (1 << 20) < du_before);  // at least r2's MiB is gone from disk
  CHECK(repo->meta().Garbage(10)->empty());
  CHECK(HistoryErrors(*repo) == 0);
  auto st = fsck::CheckStore(repo->store(), {}, {});
  REQUIRE(st);
  CHECK(st->errors == 0);

  // The survivors restore exactly, shared chunks included.
  REQUIRE(repo->Restore(n1.Hex()));
  CHECK(ReadString(w + "/shared.bin") == r1);
  CHECK(ReadString(w + "/etc/conf") == "v1");
  CHECK_FALSE(std::filesystem::exists(w + "/unique.bin"));
  REQUIRE(repo->Restore(n3.Hex()));
  CHECK(ReadString(w + "/tail.bin") == r3 + "tail");
  CHECK(ReadString(w + "/shared.bin") == r1);
  CHECK(ReadString(w + "/etc/conf") == "v3");
  CheckExactCounts(*repo);
}

TEST_CASE("refcount: gc after dropping 1 node of many reads only what that node alone reached", "[refcount]") {
  ::setenv("TMPDIR", "/dev/shm", 1);  // hundreds of durable commits
  TempDir t;
  ::unsetenv("TMPDIR");
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  // 40 directories of 10 files; each node changes one file.
  for (int d = 0; d < 40; ++d)
    for (int f = 0; f < 10; ++f) Write(w + "/d" + std::to_string(d) + "/f" + std::to_string(f), RandomString(512, d * 10 + f));
  int64_t t0 = OldDay();
  const int nodes = 200;
  for (int i = 0; i < nodes; ++i) {
    if (i) Write(w + "/d" + std::to_string(i % 40) + "/f0", "state " + std::to_string(i));
    snap::SnapOptions o;
    o.time_ns = t0 + i * kMs;
    o.allow_empty = true;
    if (i) o.paths = std::vector<std::string>{"d" + std::to_string(i % 40) + "/f0"};
    REQUIRE(repo->Snapshot(o));
  }
  snap::RetentionPolicy keep;
  keep.keep_last = nodes - 3;  // the root, the day's first node and the newest: one node goes
  keep.keep_within = std::chrono::seconds(0);
  auto ret = repo->Retain(keep, false, snap::NowNs());
  REQUIRE(ret);
  REQUIRE(ret->dropped.size() == 1);
  // Its root tree and the one directory it changed: read to release them;
  // everything else only decremented.
  CHECK(ret->objects_read <= 2);
  CHECK(ret->released <= 4);  // node, root tree, d2 tree, d2/f0's content
  auto gc = repo->Gc();
  REQUIRE(gc);
  CHECK(gc->objects_read == 0);
  CHECK(gc->dropped_objects == ret->released);
  // The mark it replaces reads every unique tree: here 199 roots and
  // 240 directory trees.
  auto full = repo->Gc({}, true);
  REQUIRE(full);
  INFO("full recount read " << full->objects_read);
  CHECK(full->objects_read > 400);
  CHECK(full->dropped_objects == 0);
  CheckExactCounts(*repo);
}

TEST_CASE("refcount: fsck finds a wrong count and repair recounts", "[refcount][fsck]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  Write(w + "/d/f", "x");
  Write(w + "/g", RandomString(300000, 3));
  ObjectId n = SnapAt(*repo, snap::NowNs());
  ObjectId sub = TreeEntryId(*repo, repo->Record(n)->tree, "d");
  CHECK(HistoryErrors(*repo) == 0);
  REQUIRE(repo->CountDeferred());
  for (int64_t delta : {+1, -1}) {
    {
      auto txn = *repo->meta().Begin();
      REQUIRE(txn->AdjustRef(snap::MetaDb::Txn::Counts::kLive, sub, delta));
      REQUIRE(txn->Commit());
    }
    std::vector<std::string> kinds;
    CHECK(HistoryErrors(*repo, &kinds) == 1);
    CHECK(kinds == std::vector<std::string>{"refcount"});
    auto rep = repo->RepairHistory();
    REQUIRE(rep);
    CHECK(rep->counts_fixed == 1);
    CHECK(rep->marked.empty());
    CHECK(HistoryErrors(*repo) == 0);
    CHECK(*repo->meta().RefCount(sub) == 1);
  }
  CheckExactCounts(*repo);
}

TEST_CASE("refcount: fsck finds a wrong count while snapshots' references wait deferred", "[refcount][fsck]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  Write(w + "/d/f", "x");
  Write(w + "/e/g", "y");
  ObjectId n1 = SnapAt(*repo, snap::NowNs());
  REQUIRE(repo->CountDeferred());
  ObjectId d = TreeEntryId(*repo, repo->Record(n1)->tree, "d");
  // n2 shares d/ with n1; its references wait in the deferred table, so
  // the live count of d/ is 1 and a count with them applied would be 2.
  Write(w + "/e/g", "z");
  SnapAt(*repo, snap::NowNs());
  REQUIRE(DeferredNodes(*repo) == 1);
  CHECK(HistoryErrors(*repo) == 0);
  {
    auto txn = *repo->meta().Begin();
    REQUIRE(txn->AdjustRef(snap::MetaDb::Txn::Counts::kLive, d, +1));
    REQUIRE(txn->Commit());
  }
  std::vector<std::string> kinds;
  CHECK(HistoryErrors(*repo, &kinds) == 1);
  CHECK(kinds == std::vector<std::string>{"refcount"});
  CHECK(DeferredNodes(*repo) == 1);  // fsck changed nothing
  CHECK(*repo->meta().RefCount(d) == 2);
  auto rep = repo->RepairHistory();
  REQUIRE(rep);
  CHECK(rep->counts_fixed == 1);
  CHECK(HistoryErrors(*repo) == 0);
  CHECK(DeferredNodes(*repo) == 0);  // the rebuilt counts hold every node
  CHECK(*repo->meta().RefCount(d) == 2);
  CheckExactCounts(*repo);
}

TEST_CASE("refcount: gc drops ids of appended garbage rows and of the older id-keyed table once each",
          "[refcount]") {
  TempDir t;
  std::string root = t.str() + "/r";
  ObjectId x, y;
  {
    auto repo = *Repo::Create(root);
    std::string w = repo->work_dir();
    std::string rx = RandomString(200000, 31), ry = RandomString(200000, 32);
    SnapAt(*repo, OldDay() - kMs);  // a root node is always kept: n1 is not one
    Write(w + "/f", rx);
    Write(w + "/g", ry);
    ObjectId n1 = SnapAt(*repo, OldDay());
    x = TreeEntryId(*repo, repo->Record(n1)->tree, "f");
    y = TreeEntryId(*repo, repo->Record(n1)->tree, "g");
    Write(w + "/f", "new f");
    Write(w + "/g", "new g");
    SnapAt(*repo, OldDay() + kMs);
    REQUIRE(repo->CountDeferred());
    snap::RetentionPolicy keep;
    keep.keep_last = 1;
    keep.keep_within = std::chrono::seconds(0);
    keep.buckets.clear();
    REQUIRE(repo->Retain(keep, false, snap::NowNs())->dropped.size() == 1);
    auto rows = *repo->meta().Garbage(1000);
    std::set<ObjectId> ids;
    for (const auto& r : rows) {
      CHECK(r.logged);
      ids.insert(r.id);
    }
    CHECK(ids.count(x));
    CHECK(ids.count(y));
    // x is also named by a row of the id-keyed table older repositories
    // have, y by a second appended row (released twice).
    auto txn = *repo->meta().Begin();
    REQUIRE(txn->PutGarbage(y));
    REQUIRE(txn->Commit());
  }
  {
    MDB_env* env;
    REQUIRE(mdb_env_create(&env) == 0);
    REQUIRE(mdb_env_set_maxdbs(env, 16) == 0);
    REQUIRE(mdb_env_open(env, (root + "/meta").c_str(), 0, 0644) == 0);
    MDB_txn* txn;
    MDB_dbi dbi;
    REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
    REQUIRE(mdb_dbi_open(txn, "garbage", 0, &dbi) == 0);
    MDB_val k{32, x.bytes.data()}, v{0, nullptr};
    REQUIRE(mdb_put(txn, dbi, &k, &v, 0) == 0);
    REQUIRE(mdb_txn_commit(txn) == 0);
    mdb_env_close(env);
  }
  auto repo = *Repo::Open(root);
  auto rows = *repo->meta().Garbage(1000);
  REQUIRE_FALSE(rows.empty());
  CHECK_FALSE(rows[0].logged);
  CHECK(rows[0].id == x);
  REQUIRE(*repo->store().Has(x));
  auto gc = repo->Gc(store::CompactOptions{0.0});
  REQUIRE(gc);
  std::set<ObjectId> unique;
  for (const auto& r : rows) unique.insert(r.id);
  CHECK(unique.size() < rows.size());
  CHECK(gc->dropped_objects == unique.size());  // each id once, from either table
  CHECK_FALSE(*repo->store().Has(x));
  CHECK_FALSE(*repo->store().Has(y));
  CHECK(repo->meta().Garbage(10)->empty());
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);
}

TEST_CASE("refcount: a lost tree stored again by a scan gets its children counted", "[refcount][fsck]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  Write(w + "/d/f1", "one");
  Write(w + "/d/f2", RandomString(300000, 6));
  ObjectId n = SnapAt(*repo, snap::NowNs());
  ObjectId sub = TreeEntryId(*repo, repo->Record(n)->tree, "d");
  LoseObject(*repo, sub);
  // Repair marks the node and recounts: d/ is counted but cannot be
  // opened, so its files are counted by the stat cache only.
  auto rep = repo->RepairHistory();
  REQUIRE(rep);
  REQUIRE(rep->marked.size() == 1);
  CHECK(*repo->meta().RefCount(sub) == 1);
  // A status scan stores d/ again (the live tree still has it): its
  // children count from now on, as a recount says.
  REQUIRE(repo->Status());
  REQUIRE(*repo->store().Has(sub));
  CHECK(HistoryErrors(*repo) == 0);
  CheckExactCounts(*repo);
}

TEST_CASE("refcount: a repository without counts is counted once, gc --full drops unreferenced objects",
          "[refcount]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  Write(w + "/a", "a");
  Write(w + "/big", RandomString(600000, 4));
  int64_t t0 = OldDay();
  SnapAt(*repo, t0);
  // As made before reference counting: no table, no flag.
  {
    auto txn = *repo->meta().Begin();
    REQUIRE(txn->ClearCounts(snap::MetaDb::Txn::Counts::kLive));
    REQUIRE(txn->Commit());
  }
  Write(w + "/a", "a2");
  SnapAt(*repo, t0 + kMs);
  Write(w + "/a", "a3");
  SnapAt(*repo, t0 + 2 * kMs);
  CHECK(*repo->meta().CountedObjects() == 0);
  CHECK(HistoryErrors(*repo) == 0);  // nothing to compare yet
  // What a snapshot killed before its node commit leaves: stored, unnamed.
  auto orphan_bytes = RandomBytes(5000, 5);
  ObjectId orphan;
  {
    auto b = *repo->store().BeginBatch();
    orphan = *b->Put(store::ObjectType::kChunk, orphan_bytes);
    REQUIRE(b->Commit());
  }
  auto gc = repo->Gc();
  REQUIRE(gc);
  CHECK(gc->counted);
  CHECK(gc->objects_read > 0);
  CHECK(gc->dropped_objects == 1);  // the orphan: every node's objects stay
  CHECK_FALSE(*repo->store().Has(orphan));
  CheckExactCounts(*repo);
  CHECK(HistoryErrors(*repo) == 0);

  // Counted now: a new orphan is not garbage (nothing released it) until
  // gc --full recounts.
  {
    auto b = *repo->store().BeginBatch();
    orphan = *b->Put(store::ObjectType::kChunk, orphan_bytes);
    REQUIRE(b->Commit());
  }
  auto again = repo->Gc();
  REQUIRE(again);
  CHECK_FALSE(again->counted);
  CHECK(again->dropped_objects == 0);
  CHECK(*repo->store().Has(orphan));
  auto full = repo->Gc({}, true);
  REQUIRE(full);
  CHECK(full->counted);
  CHECK(full->dropped_objects == 1);
  CHECK_FALSE(*repo->store().Has(orphan));
  CheckExactCounts(*repo);
}

// The child: snapshots forever (each node's content derives from its
// message), thinning and collecting every few nodes. It reports each
// committed node on `out` as a line of hex, and "g" / "G" around retain
// and gc, so the parent knows where the kill landed.
[[noreturn]] void SnapshotAndCollect(const std::string& root, int out, int round) {
  auto repo = Repo::Open(root);
  if (!repo) ::_exit(3);
  std::string w = (*repo)->work_dir();
  for (int i = 0;; ++i) {
    std::string tag = std::to_string(round) + "." + std::to_string(i);
    Write(w + "/big", RandomString(300000, uint64_t(round) * 1000 + uint64_t(i)));
    Write(w + "/dir" + std::to_string(i % 4) + "/f", tag);
    snap::SnapOptions o;
    o.message = tag;
    auto r = (*repo)->Snapshot(o);
    if (!r || !r->node) ::_exit(4);
    std::string line = r->node->Hex() + "\n";
    if (::write(out, line.data(), line.size()) != ssize_t(line.size())) ::_exit(5);
    if (i % 3 == 2) {
      if (::write(out, "g\n", 2) != 2) ::_exit(5);
      snap::RetentionPolicy keep;
      keep.keep_last = 2;
      keep.keep_within = std::chrono::seconds(0);
      if (!(*repo)->Retain(keep, false, snap::NowNs())) ::_exit(6);
      if (!(*repo)->Gc(store::CompactOptions{0.2})) ::_exit(7);
      if (::write(out, "G\n", 2) != 2) ::_exit(5);
    }
  }
}

TEST_CASE("refcount: kill -9 during snapshots and gc loses no committed node and never undercounts",
          "[refcount][crash]") {
  ::setenv("TMPDIR", "/dev/shm", 1);
  TempDir t;
  ::unsetenv("TMPDIR");
  std::string root = t.str() + "/r";
  REQUIRE(Repo::Create(root));
  std::mt19937 rng(42);
  // Until kills have landed in retain/gc and in snapshots a few times each.
  int in_gc = 0, elsewhere = 0;
  for (int round = 0; round < 40 && (in_gc < 3 || elsewhere < 3); ++round) {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(p[0]);
      SnapshotAndCollect(root, p[1], round);
    }
    ::close(p[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds((100 + rng() % 400) * kSanitizerSlowdown));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    INFO("round " << round);
    REQUIRE(WIFSIGNALED(status));
    std::string reported;
    char buf[4096];
    for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) reported.append(buf, size_t(n));
    ::close(p[0]);
    std::vector<std::string> lines;
    for (size_t at = 0, nl; (nl = reported.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(reported.substr(at, nl - at));
    (!lines.empty() && lines.back() == "g" ? in_gc : elsewhere)++;

    auto repo = *Repo::Open(root);
    // The newest committed node is HEAD or older than it: never lost.
    for (auto l = lines.rbegin(); l != lines.rend(); ++l) {
      if (l->size() != 64) continue;
      CHECK(*repo->meta().GetNode(*ObjectId::FromHex(*l)));
      break;
    }
    // History whole, counts equal to a recount (none too low), store sound.
    CHECK(HistoryErrors(*repo) == 0);
    auto st = fsck::CheckStore(repo->store(), {}, {});
    REQUIRE(st);
    CHECK(st->errors == 0);
    // Every node the child made restores exactly what its snapshot saw
    // (restore's own "uncommitted changes" nodes have other titles).
    auto nodes = *AllNodes(repo->meta());
    for (const auto& r : nodes) {
      uint64_t rr = 0, i = 0;
      if (std::sscanf(r.title.c_str(), "%lu.%lu", &rr, &i) != 2) continue;
      REQUIRE(repo->Restore(r.id.Hex()));
      CHECK(ReadString(repo->work_dir() + "/big") == RandomString(300000, rr * 1000 + i));
      CHECK(ReadString(repo->work_dir() + "/dir" + std::to_string(i % 4) + "/f") == r.title);
    }
  }
  INFO(in_gc << " kills in retain or gc, " << elsewhere << " elsewhere");
  CHECK(in_gc >= 3);
  CHECK(elsewhere >= 3);
  // Leftovers of killed snapshots are only unreferenced objects.
  auto repo = *Repo::Open(root);
  auto full = repo->Gc({}, true);
  REQUIRE(full);
  CHECK(HistoryErrors(*repo) == 0);
  CheckExactCounts(*repo);
}

}  // namespace
}  // namespace agentenv::test
