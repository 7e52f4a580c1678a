// The operation log (snap/oplog.h): the rows restores write with the HEAD
// they move, read back newest first and by time range in bounded pages,
// the row codec against hostile bytes, and retention removing the rows of
// the nodes it drops.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "snap/fsops.h"
#include "snap/oplog.h"
#include "snap/repo.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::OpKind;
using snap::Operation;
using store::ObjectId;

void Write(const std::string& path, const std::string& data) { std::ofstream(path, std::ios::binary) << data; }

ObjectId Filled(uint8_t v) {
  ObjectId id;
  id.bytes.fill(v);
  return id;
}

ObjectId Snap(snap::Repo& repo, const std::string& file, const std::string& data, int64_t time_ns = 0) {
  Write(repo.work_dir() + "/" + file, data);
  snap::SnapOptions o;
  o.time_ns = time_ns;
  auto s = repo.Snapshot(o);
  REQUIRE(s);
  REQUIRE(s->node);
  return *s->node;
}

TEST_CASE("oplog: restores log each HEAD move with the node that saved, read newest first and by time", "[oplog]") {
  TempDir t;
  auto repo = *snap::Repo::Create(t.str() + "/r");
  ObjectId a = Snap(*repo, "f", "a");
  ObjectId b = Snap(*repo, "f", "b");
  CHECK(*repo->meta().OperationCount() == 0);  // snapshots are nodes, not operations

  const int64_t before = snap::NowNs();
  snap::OpOptions who;
  who.who = {snap::Origin::kWeb, "dvr", ""};
  REQUIRE(repo->Restore(a.Hex(), std::nullopt, snap::RestoreMode::kInPlace, who));
  Write(repo->work_dir() + "/f", "unsaved");
  snap::OpOptions apply;
  apply.kind = OpKind::kTournamentApply;
  apply.tournament = "t1a2b3c";
  auto second = repo->Restore(b.Hex(), std::nullopt, snap::RestoreMode::kSwapIfUnused, apply);
  REQUIRE(second);
  REQUIRE(second->saved);
  auto partial = repo->RestorePaths(a.Hex(), {"f"});
  REQUIRE(partial);
  const int64_t after = snap::NowNs();

  auto recent = repo->meta().RecentOperations(10);
  REQUIRE(recent);
  REQUIRE(recent->size() == 3);
  const Operation& p = (*recent)[0];
  const Operation& s = (*recent)[1];
  const Operation& r = (*recent)[2];
  CHECK(r.kind == OpKind::kRestore);
  CHECK(r.from == b);
  CHECK(r.to == a);
  CHECK_FALSE(r.saved);  // nothing was unsaved
  CHECK(r.who.origin == snap::Origin::kWeb);
  CHECK(r.who.client == "dvr");
  CHECK(s.kind == OpKind::kTournamentApply);
  CHECK(s.tournament == "t1a2b3c");
  CHECK(s.from == a);  // HEAD before the save
  CHECK(s.saved == second->saved);
  CHECK(s.to == b);
  CHECK(p.kind == OpKind::kPartialRestore);
  CHECK(p.from == b);
  CHECK(p.to == partial->node);
  CHECK(*repo->Head() == partial->node);
  CHECK(r.time_ns >= before);
  CHECK(r.time_ns < s.time_ns);
  CHECK(s.time_ns < p.time_ns);
  CHECK(p.time_ns <= after + 1);

  // Paging: newest first by `before`, oldest first by range.
  auto page = repo->meta().RecentOperations(2);
  REQUIRE(page);
  REQUIRE(page->size() == 2);
  auto rest = repo->meta().RecentOperations(2, page->back().time_ns);
  REQUIRE(rest);
  REQUIRE(rest->size() == 1);
  CHECK((*rest)[0] == r);
  auto range = repo->meta().Operations(r.time_ns, p.time_ns, 10);  // [r, p)
  REQUIRE(range);
  REQUIRE(range->size() == 2);
  CHECK((*range)[0] == r);
  CHECK((*range)[1] == s);
  auto one = repo->meta().Operations(r.time_ns + 1, p.time_ns + 1, 1);
  REQUIRE(one);
  REQUIRE(one->size() == 1);
  CHECK((*one)[0] == s);
  CHECK(repo->meta().Operations(after + 2, after + 100, 10)->empty());
  CHECK(repo->meta().Operations(p.time_ns, r.time_ns, 10)->empty());  // an empty range
}

TEST_CASE("oplog: a long log is read in bounded pages, in time order", "[oplog]") {
  TempDir t;
  auto db = snap::MetaDb::Open(t.str() + "/meta", true);
  REQUIRE(db);
  constexpr int kRows = 5000;
  {
    auto txn = (*db)->Begin();
    REQUIRE(txn);
    for (int i = 0; i < kRows; ++i) {
      Operation op;
      // Times out of order, and many rows on the same nanosecond.
      op.time_ns = int64_t(1000) * ((i * 7919) % kRows) + (i % 3 == 0 ? 0 : 1);
      op.time_ns -= op.time_ns % 2000;  // pairs collide: the later one takes the next free nanosecond
      op.kind = OpKind::kRestore;
      op.to = Filled(uint8_t(i));
      REQUIRE((*txn)->PutOperation(op));
    }
    REQUIRE((*txn)->Commit());
  }
  CHECK(*(*db)->OperationCount() == kRows);
  int64_t from = INT64_MIN;
  size_t seen = 0;
  int64_t last = INT64_MIN;
  for (;;) {
    auto page = (*db)->Operations(from, INT64_MAX, 128);
    REQUIRE(page);
    if (page->empty()) break;
    CHECK(page->size() <= 128);
    for (const Operation& op : *page) {
      CHECK(op.time_ns > last);
      last = op.time_ns;
    }
    seen += page->size();
    from = page->back().time_ns + 1;
  }
  CHECK(seen == kRows);
  size_t back = 0;
  std::optional<int64_t> before;
  for (;;) {
    auto page = (*db)->RecentOperations(500, before);
    REQUIRE(page);
    if (page->empty()) break;
    back += page->size();
    before = page->back().time_ns;
  }
  CHECK(back == kRows);
}

TEST_CASE("oplog: rows with fields of a newer writer decode, hostile rows are refused", "[oplog]") {
  Operation op;
  op.kind = OpKind(77);
  op.to = Filled(0x44);
  op.tournament = std::string(1000, 't');
  auto bytes = snap::EncodeOperation(op);
  auto back = snap::DecodeOperation(5, bytes, "row");
  REQUIRE(back);
  CHECK(snap::OpKindName(back->kind) == "unknown");
  CHECK(back->tournament.size() == snap::Provenance::kMaxName);
  CHECK(back->time_ns == 5);
  bytes.insert(bytes.end(), {0x30, 0x02, 0x01, 0x02});  // field 48: skipped
  CHECK(snap::DecodeOperation(5, bytes, "row"));
  for (size_t n = 0; n + 4 < bytes.size(); ++n) {
    // A row cut anywhere before `to` is whole misses `to` or runs past its end.
    auto cut = snap::DecodeOperation(5, std::span(bytes.data(), n), "row");
    if (n < 3 + 2 + 32) CHECK_FALSE(cut);
  }
  CHECK_FALSE(snap::DecodeOperation(5, std::vector<uint8_t>{0x03, 0x20}, "row"));
  CHECK_FALSE(snap::DecodeOperation(5, std::vector<uint8_t>{0x01, 0x01, 0x01, 0x01, 0x01, 0x01}, "row"));
  // Keys sort as the signed times do.
  uint8_t lo[8], hi[8];
  snap::OperationKey(-5, lo);
  snap::OperationKey(3, hi);
  CHECK(std::memcmp(lo, hi, 8) < 0);
  CHECK(snap::OperationTime(std::span<const uint8_t>(lo, 8)) == -5);
  CHECK(snap::OpKindFromName("tournament_apply") == OpKind::kTournamentApply);
}

TEST_CASE("oplog: retention drops the rows of the nodes it drops, past its horizon", "[oplog]") {
  TempDir t;
  auto repo = *snap::Repo::Create(t.str() + "/r");
  const int64_t t0 = int64_t(1700000000) * 1000000000;
  constexpr int64_t kSecond = 1000000000;
  Snap(*repo, "f", "0", t0);
  Snap(*repo, "f", "1", t0 + kSecond);  // kept: the oldest of its time slot
  ObjectId mid = Snap(*repo, "f", "2", t0 + 2 * kSecond);
  ObjectId tip = Snap(*repo, "f", "3", t0 + 3 * kSecond);
  // root <- x <- mid <- tip; restore writes two rows naming mid and tip,
  // and an old row names them too.
  REQUIRE(repo->Restore(mid.Hex()));
  REQUIRE(repo->Restore(tip.Hex()));
  {
    auto txn = repo->meta().Begin();
    REQUIRE(txn);
    Operation old;
    old.time_ns = t0 + 4 * kSecond;
    old.kind = OpKind::kRestore;
    old.from = tip;
    old.to = mid;
    REQUIRE((*txn)->PutOperation(old));
    REQUIRE((*txn)->Commit());
  }
  REQUIRE(*repo->meta().OperationCount() == 3);
  snap::RetentionPolicy p;
  p.keep_last = 0;
  p.keep_within = std::chrono::seconds(60);
  p.buckets = {{std::chrono::hours(24 * 365), std::chrono::hours(24 * 365 * 100)}};
  // mid is dropped (one child, not HEAD, not its slot's oldest). The two
  // rows restore wrote are younger than the horizon: they stay; the old
  // row goes.
  const int64_t now = snap::NowNs();
  auto res = repo->Retain(p, false, now);
  REQUIRE(res);
  REQUIRE(res->dropped.size() == 1);
  CHECK(res->dropped[0].id == mid);
  CHECK(res->operations_dropped == 1);
  auto left = repo->meta().RecentOperations(10);
  REQUIRE(left);
  REQUIRE(left->size() == 2);
  for (const Operation& op : *left) CHECK(op.time_ns > t0 + 4 * kSecond);
  // Those rows no longer name mid in the index: a later retention never
  // looks for them by it, and removes nothing more.
  auto again = repo->Retain(p, false, now + int64_t(3600) * kSecond);
  REQUIRE(again);
  CHECK(again->operations_dropped == 0);
  CHECK(*repo->meta().OperationCount() == 2);
}

TEST_CASE("oplog: fsck's repair logs the HEAD it moves", "[oplog]") {
  TempDir t;
  auto repo = *snap::Repo::Create(t.str() + "/r");
  Snap(*repo, "f", "a");
  ObjectId newest = Snap(*repo, "f", "b");
  {
    auto txn = repo->meta().Begin();
    REQUIRE(txn);
    REQUIRE((*txn)->SetRef("HEAD", Filled(0x66)));  // a node not in history
    REQUIRE((*txn)->Commit());
  }
  auto repaired = repo->RepairHistory();
  REQUIRE(repaired);
  CHECK(*repo->Head() == newest);
  auto ops = repo->meta().RecentOperations(10);
  REQUIRE(ops);
  REQUIRE(ops->size() == 1);
  CHECK((*ops)[0].kind == OpKind::kRepair);
  CHECK_FALSE((*ops)[0].from);
  CHECK((*ops)[0].to == newest);
}

}  // namespace
}  // namespace agentenv::test
