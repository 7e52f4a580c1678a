// The metadata index's time index (snap/time_index.h): what its sums,
// buckets and lookups say, checked against the node records themselves
// through adds, rewrites and drops, and its build for an index an older
// binary wrote to. Records are written straight into a MetaDb (no store):
// thousands of nodes in milliseconds.
#include <lmdb.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "snap/meta.h"
#include "tests/history_testutil.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::MetaDb;
using snap::NodeRecord;
using store::ObjectId;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kStart = 1'700'000'000 * kSecond;

ObjectId IdOf(uint64_t n) {
  ObjectId id;
  for (int i = 0; i < 8; ++i) id.bytes[size_t(i)] = uint8_t(n >> (8 * i));
  id.bytes[31] = 0x5a;
  return id;
}

// Adds a node in its own transaction (or in `txn` when given).
NodeRecord AddNode(MetaDb& db, uint64_t n, int64_t time_ns, std::optional<ObjectId> parent, uint64_t changes,
                   uint64_t thinned = 0) {
  auto txn = db.Begin();
  REQUIRE(txn);
  NodeRecord r;
  r.id = IdOf(n);
  auto seq = (*txn)->NextSeq();
  REQUIRE(seq);
  r.seq = *seq;
  r.time_ns = time_ns;
  r.parent = parent;
  r.tree = IdOf(1'000'000 + n);
  r.changes = changes;
  r.title = "n" + std::to_string(n);
  if (thinned) {
    snap::Provenance p;
    p.thinned = snap::Thinned{};
    p.thinned->nodes = thinned;
    p.thinned->first_ns = p.thinned->last_ns = time_ns - 1;
    r.provenance = p;
  }
  REQUIRE((*txn)->PutNode(r));
  if (parent) REQUIRE((*txn)->AddChild(*parent, r.id));
  REQUIRE((*txn)->Commit());
  return r;
}

uint64_t ThinnedOf(const NodeRecord& r) {
  return r.provenance && r.provenance->thinned ? r.provenance->thinned->nodes : 0;
}

// The nodes of [from, to], summed from the records.
snap::TimeSum Brute(const std::vector<NodeRecord>& all, int64_t from, int64_t to) {
  snap::TimeSum s;
  for (const NodeRecord& r : all) {
    if (r.time_ns < from || r.time_ns > to) continue;
    ++s.nodes;
    s.changes += r.changes;
    s.thinned += ThinnedOf(r);
  }
  return s;
}

// Checks sums, buckets and time lookups of random ranges against the records.
void CheckAgainstRecords(MetaDb& db, std::mt19937_64& rng) {
  REQUIRE(db.EnsureTimeIndex());
  auto indexed = db.TimeIndexed();
  REQUIRE(indexed);
  CHECK(*indexed);
  auto all = AllNodes(db);
  REQUIRE(all);
  std::vector<NodeRecord> by_time = *all;
  std::sort(by_time.begin(), by_time.end(),
            [](const NodeRecord& a, const NodeRecord& b) { return std::pair(a.time_ns, a.seq) < std::pair(b.time_ns, b.seq); });
  auto reader = db.ReadTime();
  REQUIRE(reader);
  auto everything = (*reader)->Sum(INT64_MIN, INT64_MAX);
  REQUIRE(everything);
  CHECK(everything->nodes == all->size());
  uint64_t lanes = 0;
  for (uint64_t c : everything->lanes) lanes += c;
  CHECK(lanes == all->size());
  auto first = (*reader)->First();
  auto last = (*reader)->Last();
  REQUIRE(first);
  REQUIRE(last);
  REQUIRE(*first);
  CHECK((*first)->id == by_time.front().id);
  CHECK((*last)->id == by_time.back().id);
  const int64_t lo = by_time.front().time_ns - 100 * kSecond, span = by_time.back().time_ns - lo + 200 * kSecond;
  for (int i = 0; i < 60; ++i) {
    // Ranges from a few seconds to all of it, at any alignment.
    const int64_t width = std::max<int64_t>(1, int64_t(double(span) * std::pow(10.0, -double(rng() % 50) / 10)));
    const int64_t from = lo + int64_t(rng() % uint64_t(span)), to = from + width;
    INFO("range [" << from << ", " << to << "]");
    auto sum = (*reader)->Sum(from, to);
    REQUIRE(sum);
    snap::TimeSum want = Brute(*all, from, to);
    CHECK(sum->nodes == want.nodes);
    CHECK(sum->changes == want.changes);
    CHECK(sum->thinned == want.thinned);
    const uint32_t max_buckets = uint32_t(1 + rng() % 300);
    auto bk = (*reader)->Bucketize(from, to, max_buckets, i % 2 ? 0 : 1000);
    REQUIRE(bk);
    CHECK(bk->buckets.size() <= max_buckets);
    uint64_t total = 0;
    int64_t prev_end = from;
    for (const snap::TimeBucket& b : bk->buckets) {
      CHECK(b.t0 >= prev_end);
      CHECK(b.t1 > b.t0);
      prev_end = b.t1;
      snap::TimeSum in = Brute(*all, b.t0, b.t1 - 1);
      CHECK(b.sum.nodes == in.nodes);
      CHECK(b.sum.changes == in.changes);
      CHECK(b.sum.nodes > 0);
      total += b.sum.nodes;
      // Its oldest and newest node.
      auto f = std::find_if(by_time.begin(), by_time.end(), [&](const NodeRecord& r) { return r.time_ns >= b.t0; });
      auto l = std::find_if(by_time.rbegin(), by_time.rend(), [&](const NodeRecord& r) { return r.time_ns < b.t1; });
      REQUIRE(f != by_time.end());
      REQUIRE(l != by_time.rend());
      CHECK(b.first.id == f->id);
      CHECK(b.last.id == l->id);
    }
    CHECK(prev_end <= (to == INT64_MAX ? INT64_MAX : to + 1));
    CHECK(total == want.nodes);
    // A time ref: the newest node made at or before `to` (of one time, the last made).
    auto at = (*reader)->AtOrBefore(to);
    REQUIRE(at);
    auto l = std::find_if(by_time.rbegin(), by_time.rend(), [&](const NodeRecord& r) { return r.time_ns <= to; });
    if (l == by_time.rend()) {
      CHECK_FALSE(*at);
    } else {
      REQUIRE(*at);
      CHECK((*at)->id == l->id);
    }
  }
  // The nodes of a span, oldest first, records whole.
  const int64_t from = by_time[by_time.size() / 3].time_ns, to = by_time[by_time.size() / 2].time_ns;
  std::vector<ObjectId> seen, want;
  REQUIRE(db.NodesInTime(from, to, [&](const NodeRecord& r) -> Result<bool> {
    seen.push_back(r.id);
    return true;
  }));
  for (const NodeRecord& r : by_time)
    if (r.time_ns >= from && r.time_ns <= to) want.push_back(r.id);
  CHECK(seen == want);
}

TEST_CASE("time index: sums, buckets and time refs agree with the records through adds, rewrites and drops",
          "[time-index]") {
  TempDir t;
  auto db = MetaDb::Open(t.str() + "/meta", true);
  REQUIRE(db);
  std::mt19937_64 rng(7);
  // Three days of captures, bursts and quiet hours, with forks off older
  // nodes and nodes of one time.
  std::vector<NodeRecord> made;
  int64_t now = kStart;
  for (uint64_t n = 1; n <= 3000; ++n) {
    now += rng() % 10 == 0 ? int64_t(rng() % 7200) * kSecond : int64_t(rng() % 20) * kSecond;
    std::optional<ObjectId> parent;
    if (!made.empty()) parent = rng() % 20 == 0 ? made[rng() % made.size()].id : made.back().id;
    made.push_back(AddNode(**db, n, now, parent, rng() % 50, rng() % 30 == 0 ? 1 + rng() % 100 : 0));
  }
  CheckAgainstRecords(**db, rng);

  // Rewrites (retention's reparenting: new change and thinned counts) and
  // drops, in a few large transactions.
  for (int round = 0; round < 3; ++round) {
    auto txn = (*db)->Begin();
    REQUIRE(txn);
    for (NodeRecord& r : made) {
      if (r.seq == 0) continue;  // dropped before
      const uint64_t pick = rng() % 10;
      if (pick < 3) {
        REQUIRE((*txn)->DeleteNode(r));
        r.seq = 0;
      } else if (pick < 5) {
        r.changes = rng() % 1000;
        snap::Provenance p;
        p.thinned = snap::Thinned{};
        p.thinned->nodes = 1 + rng() % 10;
        r.provenance = p;
        REQUIRE((*txn)->PutNode(r));
      }
    }
    REQUIRE((*txn)->Commit());
    CheckAgainstRecords(**db, rng);
  }
}

TEST_CASE("time index: a node continues its parent's lane when it is the lane's tip, else takes a free one",
          "[time-index]") {
  TempDir t;
  auto db = MetaDb::Open(t.str() + "/meta", true);
  REQUIRE(db);
  auto a = AddNode(**db, 1, kStart, std::nullopt, 1);
  auto b = AddNode(**db, 2, kStart + 10 * kSecond, a.id, 1);
  auto c = AddNode(**db, 3, kStart + 20 * kSecond, b.id, 1);
  auto d = AddNode(**db, 4, kStart + 30 * kSecond, b.id, 1);  // a fork off b: b is not lane 0's tip
  auto e = AddNode(**db, 5, kStart + 40 * kSecond, d.id, 1);  // continues d's lane
  auto f = AddNode(**db, 6, kStart + 50 * kSecond, a.id, 1);  // lane 1 is busy since a: a new lane
  auto g = AddNode(**db, 7, kStart + 60 * kSecond, c.id, 1);  // back on lane 0
  auto h = AddNode(**db, 8, kStart + 70 * kSecond, g.id, 1);
  auto i = AddNode(**db, 9, kStart + 80 * kSecond, h.id, 1);
  auto j = AddNode(**db, 10, kStart + 90 * kSecond, i.id, 1);  // lane 0's tip now
  auto k = AddNode(**db, 11, kStart + 100 * kSecond, i.id, 1);  // lanes 1 and 2 ended before i: lane 1
  auto reader = (*db)->ReadTime();
  REQUIRE(reader);
  std::map<char, uint32_t> lane;
  for (auto [name, r] : std::vector<std::pair<char, NodeRecord>>{
           {'a', a}, {'b', b}, {'c', c}, {'d', d}, {'e', e}, {'f', f}, {'g', g}, {'j', j}, {'k', k}}) {
    auto row = (*reader)->Row(r);
    REQUIRE(row);
    REQUIRE(*row);
    lane[name] = (*row)->lane;
  }
  CHECK(lane == std::map<char, uint32_t>{{'a', 0}, {'b', 0}, {'c', 0}, {'d', 1}, {'e', 1}, {'f', 2}, {'g', 0},
                                          {'j', 0}, {'k', 1}});
  auto lanes = (*reader)->Lanes();
  REQUIRE(lanes);
  CHECK(*lanes == 3);
}

// Opens the index's environment with the LMDB C API (no MetaDb open on it)
// and runs fn in a write transaction.
void RawWrite(const std::string& dir, const std::function<void(MDB_txn*, MDB_dbi info)>& fn) {
  MDB_env* env;
  REQUIRE(mdb_env_create(&env) == 0);
  REQUIRE(mdb_env_set_maxdbs(env, 32) == 0);
  REQUIRE(mdb_env_set_mapsize(env, size_t(1) << 32) == 0);
  REQUIRE(mdb_env_open(env, dir.c_str(), MDB_NOTLS, 0644) == 0);
  MDB_txn* txn;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  MDB_dbi info;
  REQUIRE(mdb_dbi_open(txn, "info", 0, &info) == 0);
  fn(txn, info);
  REQUIRE(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

TEST_CASE("time index: an index an older binary wrote to is built again on first use", "[time-index]") {
  TempDir t;
  const std::string dir = t.str() + "/meta";
  std::mt19937_64 rng(11);
  uint64_t n = 0;
  auto add = [&](int count) {
    auto db = MetaDb::Open(dir, n == 0);
    REQUIRE(db);
    for (int i = 0; i < count; ++i, ++n) {
      std::optional<ObjectId> parent;
      if (n) parent = IdOf(n);
      AddNode(**db, n + 1, kStart + int64_t(n) * 3 * kSecond, parent, 1 + n % 7);
    }
  };
  SECTION("a repository from before the index: no tables, no info rows") {
    add(MetaDb::kTimeChunk + 500);  // more than one build transaction
    RawWrite(dir, [](MDB_txn* txn, MDB_dbi info) {
      for (const char* name : {"time", "timeline", "lanes"}) {
        MDB_dbi dbi;
        REQUIRE(mdb_dbi_open(txn, name, 0, &dbi) == 0);
        REQUIRE(mdb_drop(txn, dbi, 1) == 0);
      }
      for (std::string key : {"time_next", "time_nodes"}) {
        MDB_val k{key.size(), key.data()};
        REQUIRE(mdb_del(txn, info, &k, nullptr) == 0);
      }
    });
  }
  SECTION("an older binary dropped a node without unindexing it") {
    add(300);
    RawWrite(dir, [](MDB_txn* txn, MDB_dbi) {
      // Its record only: a seq row whose node is gone is skipped by every reader.
      MDB_dbi nodes;
      REQUIRE(mdb_dbi_open(txn, "nodes", 0, &nodes) == 0);
      MDB_val k, v;
      MDB_cursor* c;
      REQUIRE(mdb_cursor_open(txn, nodes, &c) == 0);
      REQUIRE(mdb_cursor_get(c, &k, &v, MDB_FIRST) == 0);
      REQUIRE(mdb_cursor_del(c, 0) == 0);
      mdb_cursor_close(c);
    });
  }
  {
    auto db = MetaDb::Open(dir, false);
    REQUIRE(db);
    auto whole = (*db)->TimeIndexed();
    REQUIRE(whole);
    CHECK_FALSE(*whole);
    CheckAgainstRecords(**db, rng);  // builds it
  }
  // Nodes added after the build are indexed as they come.
  add(10);
  auto db = MetaDb::Open(dir, false);
  REQUIRE(db);
  auto whole = (*db)->TimeIndexed();
  REQUIRE(whole);
  CHECK(*whole);
  CheckAgainstRecords(**db, rng);
}

}  // namespace
}  // namespace agentenv::test
