// MapTrimmer: unmapping an LMDB map's pages from the process keeps every
// value readable, for live read transactions and across write transactions.
#include <fcntl.h>
#include <lmdb.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "store/inspect.h"
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

// A mapped pack scan keeps about keep_behind + 8 MiB of the pack mapped
// (fsck held whole 64 MiB packs, two at once), and a payload span behind
// that still reads its bytes: the page comes back from page cache.
TEST_CASE("store: a mapped pack scan unmaps the pages behind it and keeps every payload readable",
          "[store][trim]") {
  TempDir t;
  const std::string path = t.str() + "/00000001.pack";
  constexpr int kRecords = 48;  // of 1 MiB: 48 MiB
  std::vector<uint8_t> pack;
  for (int i = 0; i < kRecords; ++i) {
    std::vector<uint8_t> p(1 << 20);
    for (size_t j = 0; j < p.size(); ++j) p[j] = uint8_t((j * 131 + i * 7) >> 3);
    store::RecordHeader h;
    h.size = h.stored_size = p.size();
    h.id = store::ObjectId::Of(p);
    auto hb = store::EncodeRecordHeader(h);
    pack.insert(pack.end(), hb.begin(), hb.end());
    pack.insert(pack.end(), p.begin(), p.end());
    while (pack.size() % 8) pack.push_back(0);
  }
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    REQUIRE(::write(fd.get(), pack.data(), pack.size()) == ssize_t(pack.size()));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  const long kMiB = (1 << 20) / ::sysconf(_SC_PAGESIZE);
  for (uint64_t keep_behind : {uint64_t{8} << 20, uint64_t{1} << 40}) {
    INFO("keep_behind " << keep_behind);
    auto m = store::PackMapping::Map(fd.get(), pack.size());
    REQUIRE(m);
    long before = SharedPages(), at_end = 0;
    std::span<const uint8_t> first;
    int records = 0;
    auto r = store::ScanPackMapping(
        **m, pack.size(), keep_behind,
        [&](const store::ScannedRecord& rec) -> Result<void> {
          if (records++ == 0) first = rec.payload;
          if (records == kRecords) at_end = SharedPages();
          return {};
        },
        [&](uint64_t, const std::string& what) -> Result<void> {
          FAIL(what);
          return {};
        });
    REQUIRE(r);
    CHECK(records == kRecords);
    INFO("pack pages mapped at the end of the scan: " << (at_end - before) / kMiB << " MiB");
    if (keep_behind < pack.size()) {
      CHECK(at_end - before < 24 * kMiB);  // 8 behind + up to 8 ahead + the window rounding
      // The first payload, unmapped long ago, reads back intact.
      CHECK(store::ObjectId::Of(first) == store::ObjectId::Of(std::span(pack.data() + store::kRecordHeaderSize, 1 << 20)));
    } else {
      CHECK(at_end - before > 40 * kMiB);  // the control: all of it stays mapped
    }
  }
}

}  // namespace
}  // namespace agentenv::test
