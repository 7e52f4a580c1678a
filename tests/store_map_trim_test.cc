// MapTrimmer: unmapping an LMDB map's pages from the process keeps every
// value readable, for live read transactions and across write transactions.
#include <lmdb.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>

#include "store/map_trim.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

// The process's resident file-backed pages (statm's third field).
long SharedPages() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0, shared = 0;
  f >> size >> resident >> shared;
  return shared;
}

std::string Key(int i) { return "key" + std::to_string(i); }
std::string Value(int i, int round) { return std::string(200, char('a' + round)) + std::to_string(i); }

void Put(MDB_env* env, MDB_dbi dbi, int n, int round) {
  MDB_txn* w;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &w) == 0);
  for (int i = 0; i < n; ++i) {
    std::string k = Key(i), v = Value(i, round);
    MDB_val kv{k.size(), k.data()}, vv{v.size(), v.data()};
    REQUIRE(mdb_put(w, dbi, &kv, &vv, 0) == 0);
  }
  REQUIRE(mdb_txn_commit(w) == 0);
}

std::string Get(MDB_txn* txn, MDB_dbi dbi, int i) {
  std::string k = Key(i);
  MDB_val kv{k.size(), k.data()}, vv;
  if (mdb_get(txn, dbi, &kv, &vv) != 0) return "";
  return std::string(static_cast<const char*>(vv.mv_data), vv.mv_size);
}

TEST_CASE("store: map trim: pages leave the process, values stay readable across writes", "[store][trim]") {
  TempDir t;
  constexpr int kN = 40000;  // ~10 MB of leaf pages
  MDB_env* env;
  REQUIRE(mdb_env_create(&env) == 0);
  REQUIRE(mdb_env_set_mapsize(env, size_t{1} << 30) == 0);
  REQUIRE(mdb_env_open(env, t.str().c_str(), MDB_NOTLS, 0644) == 0);
  MDB_txn* txn;
  MDB_dbi dbi;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  REQUIRE(mdb_dbi_open(txn, nullptr, 0, &dbi) == 0);
  REQUIRE(mdb_txn_commit(txn) == 0);
  Put(env, dbi, kN, 0);

  store::MapTrimmer trim(env);
  // A reader that keeps a pointer into the map across everything below.
  MDB_txn* old_reader;
  REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &old_reader) == 0);
  std::string k7 = Key(7);
  MDB_val kv{k7.size(), k7.data()}, held;
  REQUIRE(mdb_get(old_reader, dbi, &kv, &held) == 0);

  long before = SharedPages();
  for (int i = 0; i < kN; ++i) REQUIRE(Get(old_reader, dbi, i) == Value(i, 0));
  long walked = SharedPages();
  trim.Trim();
  long trimmed = SharedPages();
  INFO("file-backed pages: " << before << " before the walk, " << walked << " after, " << trimmed
                             << " after the trim");
  CHECK(walked - before > 1000);          // the walk mapped the table
  CHECK(walked - trimmed > 1000);         // the trim unmapped it
  CHECK(std::string(static_cast<const char*>(held.mv_data), held.mv_size) == Value(7, 0));

  // A write transaction rewrites every value; trims during and after it.
  MDB_txn* w;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &w) == 0);
  for (int i = 0; i < kN; ++i) {
    std::string k = Key(i), v = Value(i, 1);
    MDB_val a{k.size(), k.data()}, b{v.size(), v.data()};
    REQUIRE(mdb_put(w, dbi, &a, &b, 0) == 0);
    if (i % 5000 == 0) trim.Trim();
  }
  trim.Trim();
  CHECK(Get(w, dbi, 9) == Value(9, 1));
  REQUIRE(mdb_txn_commit(w) == 0);
  trim.Trim();

  // The old reader still sees its snapshot, through the pointer it held too.
  CHECK(std::string(static_cast<const char*>(held.mv_data), held.mv_size) == Value(7, 0));
  for (int i = 0; i < kN; i += 7) REQUIRE(Get(old_reader, dbi, i) == Value(i, 0));
  mdb_txn_abort(old_reader);
  MDB_txn* reader;
  REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &reader) == 0);
  for (int i = 0; i < kN; i += 7) REQUIRE(Get(reader, dbi, i) == Value(i, 1));
  mdb_txn_abort(reader);

  // Tick trims by itself once file-backed memory passes the budget.
  store::MapTrimmer ticking(env, 0);
  REQUIRE(mdb_txn_begin(env, nullptr, MDB_RDONLY, &reader) == 0);
  for (int i = 0; i < kN; ++i) Get(reader, dbi, i);
  long mapped = SharedPages();
  for (uint64_t i = 0; i < store::MapTrimmer::kCheckEvery; ++i) ticking.Tick();
  CHECK(mapped - SharedPages() > 1000);
  CHECK(Get(reader, dbi, 11) == Value(11, 1));
  mdb_txn_abort(reader);
  mdb_env_close(env);
}

}  // namespace
}  // namespace agentenv::test
