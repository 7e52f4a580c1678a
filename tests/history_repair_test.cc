// fsck repair above the store: after a flipped byte, a missing object, a
// dangling ref and a truncated pack, repair marks exactly the affected
// nodes damaged (never deleting one), the store and history pass fsck,
// restore refuses damaged nodes and works for the others, gc still runs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <thread>

#include "fsck/fsck.h"
#include "snap/repo.h"
#include "store/inspect.h"
#include "tests/history_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::Repo;
using store::ObjectId;

void Write(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

ObjectId Snap(Repo& repo, const std::string& msg) {
  snap::SnapOptions o;
  o.message = msg;
  return SnapNode(repo, o);
}

// The id of entry `name` in the root tree of node `n`.
ObjectId EntryId(Repo& repo, const ObjectId& n, const std::string& name) {
  return TreeEntryId(repo, repo.Record(n)->tree, name);
}

// Errors (not known damage) and the known-damaged node messages.
uint64_t CheckHistory(Repo& repo, std::vector<std::string>* known = nullptr) {
  auto r = repo.CheckHistory([&](const snap::HistoryFinding& f) {
    UNSCOPED_INFO(f.kind << ": " << f.message);
    if (f.known && known) known->push_back(f.message);
  });
  REQUIRE(r);
  return *r;
}

uint64_t StoreErrors(Repo& repo) {
  auto r = fsck::CheckStore(repo.store(), {}, {});
  REQUIRE(r);
  return r->errors;
}

}  // namespace

TEST_CASE("fsck repair marks the nodes that lost objects and keeps history usable", "[fsck][history]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  Write(w + "/keep", "keep\n");
  ObjectId a = Snap(*repo, "A");
  Write(w + "/flip.bin", RandomString(200000, 1));  // one raw chunk, only in B
  ObjectId b = Snap(*repo, "B");
  ::unlink((w + "/flip.bin").c_str());
  std::filesystem::create_directories(w + "/gone");
  Write(w + "/gone/g", "only in C\n");
  ObjectId c = Snap(*repo, "C");
  std::filesystem::remove_all(w + "/gone");
  Write(w + "/keep", "keep, changed\n");
  ObjectId d = Snap(*repo, "D");
  REQUIRE(repo->Tag("ok", d.Hex()));
  Write(w + "/tail.bin", RandomString(100000, 2));
  Settle(*repo);  // past the racy window: the stat cache keeps it
  ObjectId e = Snap(*repo, "E");
  REQUIRE(CheckHistory(*repo) == 0);
  REQUIRE(StoreErrors(*repo) == 0);

  // 1. A flipped byte in B's only chunk.
  ObjectId flipped = EntryId(*repo, b, "flip.bin");
  {
    auto info = *repo->store().Stat(flipped);
    UniqueFd fd(::open(store::PackPath(repo->store().dir(), info.pack).c_str(), O_RDWR));
    REQUIRE(fd);
    off_t at = off_t(info.offset + store::kRecordHeaderSize + 1000);
    uint8_t x;
    REQUIRE(::pread(fd.get(), &x, 1, at) == 1);
    x ^= 0x40;
    REQUIRE(::pwrite(fd.get(), &x, 1, at) == 1);
  }
  // 2. A missing object: C's tree of gone/.
  ObjectId gone = EntryId(*repo, c, "gone");
  LoseObject(*repo, gone);
  // 3. A dangling ref.
  ObjectId ghost = ObjectId::Of(std::vector<uint8_t>{1, 2, 3});
  {
    auto txn = *repo->meta().Begin();
    REQUIRE(txn->SetRef("tag/ghost", ghost));
    REQUIRE(txn->Commit());
  }
  // 4. A truncated pack: everything E wrote after its new content is cut.
  ObjectId tail = EntryId(*repo, e, "tail.bin");
  {
    auto info = *repo->store().Stat(tail);
    REQUIRE(::truncate(store::PackPath(repo->store().dir(), info.pack).c_str(), off_t(info.offset + 100)) == 0);
  }
  CHECK(StoreErrors(*repo) > 0);
  CHECK(CheckHistory(*repo) >= 3);

  // Repair: the store first, then history.
  auto sr = fsck::RepairStore(repo->store(), {});
  REQUIRE(sr);
  std::set<ObjectId> lost;
  for (const auto& l : sr->lost) lost.insert(l.id);
  CHECK(lost.count(flipped));
  CHECK(lost.count(tail));
  CHECK(lost.count(e));  // E's node object was past the cut
  auto hr = repo->RepairHistory();
  REQUIRE(hr);
  std::set<ObjectId> marked;
  for (const auto& r : hr->marked) {
    marked.insert(r.id);
    CHECK(r.damaged());
    CHECK_FALSE(r.damage.empty());
  }
  CHECK(marked == std::set<ObjectId>{b, c, e});
  CHECK(hr->stat_cleared > 0);  // the stat cache named tail.bin's lost content
  REQUIRE(hr->fixed.size() == 1);
  CHECK(hr->fixed[0].find("tag/ghost") != std::string::npos);
  CHECK(repo->Record(b)->damage.find(flipped.Hex()) != std::string::npos);
  CHECK(repo->Record(c)->damage.find(gone.Hex()) != std::string::npos);

  // Never deletes history; afterwards both checks pass, damage is known.
  CHECK(*repo->meta().NodeCount() == 5);
  CHECK(StoreErrors(*repo) == 0);
  std::vector<std::string> known;
  CHECK(CheckHistory(*repo, &known) == 0);
  CHECK(known.size() == 3);
  CHECK_FALSE(*repo->meta().GetRef("tag/ghost"));
  // A second repair changes nothing.
  auto again = repo->RepairHistory();
  REQUIRE(again);
  CHECK(again->marked.empty());
  CHECK(again->healed.empty());
  CHECK(again->fixed.empty());

  // Restore refuses damaged nodes, naming what is missing, changing nothing.
  for (const auto& id : {b, c, e}) {
    auto r = repo->Restore(id.Hex());
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kCorrupt);
    CHECK(r.error().message.find("damaged") != std::string::npos);
    CHECK(r.error().message.find(repo->Record(id)->damage) != std::string::npos);
  }
  CHECK(*repo->Resolve("HEAD") == e);
  // Intact nodes restore, from a damaged HEAD too.
  auto to_d = repo->Restore("ok");
  INFO((to_d ? "" : to_d.error().message));
  REQUIRE(to_d);
  CHECK(ReadString(w + "/keep") == "keep, changed\n");
  CHECK_FALSE(std::filesystem::exists(w + "/tail.bin"));
  REQUIRE(repo->Restore(a.Hex()));
  CHECK(ReadString(w + "/keep") == "keep\n");
  // Snapshots go on; gc runs past the damaged nodes and leaves fsck clean.
  Write(w + "/new", "after repair\n");
  ObjectId f = Snap(*repo, "F");
  CHECK_FALSE(repo->Record(f)->damaged());
  auto gc = repo->Gc();
  INFO((gc ? "" : gc.error().message));
  REQUIRE(gc);
  CHECK(StoreErrors(*repo) == 0);
  CHECK(CheckHistory(*repo) == 0);
  REQUIRE(repo->Restore(d.Hex()));
  CHECK(ReadString(w + "/keep") == "keep, changed\n");
}

TEST_CASE("fsck repair clears the mark of a node whose objects came back", "[fsck][history]") {
  TempDir t;
  auto repo = *Repo::Create(t.str() + "/r");
  std::string w = repo->work_dir();
  std::string data = RandomString(50000, 9);
  Write(w + "/f", data);
  Settle(*repo);  // past the racy window: the stat cache keeps it
  ObjectId a = Snap(*repo, "A");
  ObjectId content = EntryId(*repo, a, "f");
  LoseObject(*repo, content);
  auto hr = repo->RepairHistory();
  REQUIRE(hr);
  REQUIRE(hr->marked.size() == 1);
  CHECK(hr->stat_cleared > 0);
  CHECK(repo->Record(a)->damaged());
  // The live tree still has the file: the next snapshot reads and stores it
  // again (the stat cache was forgotten), and the mark can go.
  Write(w + "/other", "x");
  Snap(*repo, "B");
  CHECK(*repo->store().Has(content));
  auto healed = repo->RepairHistory();
  REQUIRE(healed);
  REQUIRE(healed->healed.size() == 1);
  CHECK(healed->healed[0].id == a);
  CHECK_FALSE(repo->Record(a)->damaged());
  CHECK(CheckHistory(*repo) == 0);
}

}  // namespace agentenv::test
