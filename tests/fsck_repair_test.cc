// fsck modes (subset sampling, structure only) and repair: after each kind
// of damage, repair reports exactly the lost ids and leaves a clean store.
#include <fcntl.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <set>

#include "store/inspect.h"
#include "store/manifest.h"
#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::ObjectId;
using store::ObjectType;
using store::Store;

struct Damaged {
  TempDir t;
  std::unique_ptr<Store> s;
  std::vector<std::vector<uint8_t>> data;
  std::vector<ObjectId> ids;

  Damaged() {
    s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
    auto b = *s->BeginBatch();
    for (int i = 0; i < 20; ++i) {
      // Alternate incompressible (raw) and compressible (zstd) objects.
      data.push_back(i % 2 ? RandomBytes(60000, 40 + i) : std::vector<uint8_t>(60000 + i, uint8_t(i)));
      ids.push_back(*b->Put(ObjectType::kChunk, data.back()));
    }
    CommitOk(*b);
  }
  std::string PackOf(const ObjectId& id) const {
    return store::PackPath(s->dir(), s->Stat(id)->pack);
  }
  void Poke(const ObjectId& id, uint64_t rel, uint8_t x) { PokeRecord(*s, id, rel, x); }
  // Repairs, then checks: the lost ids are exactly `expect`, fsck is
  // clean, every other object reads back intact.
  void RepairAndCheck(const std::set<ObjectId>& expect) {
    auto r = fsck::RepairStore(*s, {});
    INFO((r ? "" : r.error().message));
    REQUIRE(r);
    CHECK_FALSE(r->before.ok());
    std::set<ObjectId> lost;
    for (auto& l : r->lost) {
      lost.insert(l.id);
      CHECK(!l.why.empty());
    }
    CHECK(lost == expect);
    auto findings = Fsck(*s);
    for (auto& f : findings) INFO(f.message);
    CHECK(findings.empty());
    for (size_t i = 0; i < ids.size(); ++i) {
      if (expect.count(ids[i])) {
        CHECK_FALSE(*s->Has(ids[i]));
      } else {
        auto got = s->Get(ids[i]);
        REQUIRE(got);
        CHECK(*got == data[i]);
      }
    }
  }
};

bool Has(const std::vector<fsck::FsckFinding>& fs, const std::string& kind) {
  for (auto& f : fs)
    if (f.kind == kind) return true;
  return false;
}

TEST_CASE("fsck repair: a flipped byte loses exactly that object") {
  Damaged d;
  d.Poke(d.ids[3], store::kRecordHeaderSize + 1000, 0x40);
  d.Poke(d.ids[4], store::kRecordHeaderSize + 10, 0x01);
  auto f = Fsck(*d.s);
  CHECK(Has(f, "hash-mismatch"));
  d.RepairAndCheck({d.ids[3], d.ids[4]});
}

TEST_CASE("fsck repair: an index entry whose record is gone") {
  Damaged d;
  // Zero the whole record: it reads as padding, the index still names it.
  auto info = *d.s->Stat(d.ids[7]);
  UniqueFd fd(::open(d.PackOf(d.ids[7]).c_str(), O_RDWR));
  std::vector<uint8_t> zeros(store::kRecordHeaderSize + info.stored_size, 0);
  REQUIRE(::pwrite(fd.get(), zeros.data(), zeros.size(), info.offset) == ssize_t(zeros.size()));
  auto f = Fsck(*d.s);
  CHECK(Has(f, "missing-record"));
  d.RepairAndCheck({d.ids[7]});
}

TEST_CASE("fsck repair: a truncated pack loses the objects past the cut") {
  Damaged d;
  auto cut_at = d.s->Stat(d.ids[15])->offset + 100;
  std::set<ObjectId> lost;
  for (auto& id : d.ids)
    if (d.s->Stat(id)->offset + store::kRecordHeaderSize > cut_at - 100) lost.insert(id);
  REQUIRE(lost.size() == 5);
  REQUIRE(::truncate(d.PackOf(d.ids[0]).c_str(), off_t(cut_at)) == 0);
  auto f = Fsck(*d.s);
  CHECK(Has(f, "pack-short"));
  d.RepairAndCheck(lost);
}

TEST_CASE("fsck repair: a damaged record header") {
  Damaged d;
  d.Poke(d.ids[9], 30, 0xff);  // inside the id: the header check fails
  auto f = Fsck(*d.s);
  CHECK(Has(f, "bad-record"));
  d.RepairAndCheck({d.ids[9]});
}

TEST_CASE("fsck repair: a deleted pack file loses its objects, not the store") {
  Damaged d;
  WriteFile(d.t.str() + "/later", RandomBytes(70000, 77));
  REQUIRE(::unlink(d.PackOf(d.ids[0]).c_str()) == 0);
  auto f = Fsck(*d.s);
  CHECK(Has(f, "pack-missing"));
  d.RepairAndCheck({d.ids.begin(), d.ids.end()});
  // The store takes new objects afterwards.
  auto b = *d.s->BeginBatch();
  auto later = PutPath(*b, d.t.str() + "/later");
  CommitOk(*b);
  CHECK(ReadBack(*d.s, later) == RandomBytes(70000, 77));
  CHECK(Fsck(*d.s).empty());
}

TEST_CASE("fsck repair: a file whose chunk is lost is dropped with it") {
  Damaged d;
  WriteFile(d.t.str() + "/big", RandomBytes(3 << 20, 5));
  auto b = *d.s->BeginBatch();
  auto big = PutPath(*b, d.t.str() + "/big");
  CommitOk(*b);
  auto chunks = *store::DecodeManifest(*d.s->Get(big.id));
  d.Poke(chunks[1].id, store::kRecordHeaderSize + 5, 0x80);
  d.RepairAndCheck({chunks[1].id, big.id});
  for (size_t i = 0; i < chunks.size(); ++i) CHECK(*d.s->Has(chunks[i].id) == (i != 1));
}

TEST_CASE("fsck: subset sampling is deterministic and structure mode skips payloads") {
  Damaged d;
  fsck::FsckOptions half;
  half.subset_percent = 50;
  auto r1 = fsck::CheckStore(*d.s, half, {});
  auto r2 = fsck::CheckStore(*d.s, half, {});
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->objects_verified == r2->objects_verified);
  CHECK(r1->objects_verified > 0);
  CHECK(r1->objects_verified < d.ids.size());
  auto full = *fsck::CheckStore(*d.s, {}, {});
  CHECK(full.objects_verified == d.ids.size());
  CHECK(full.bytes_verified == d.s->Stats()->logical_bytes);

  // A flipped payload byte: found by a full check, by a subset check
  // exactly when the object is sampled, never by a structure check.
  d.Poke(d.ids[1], store::kRecordHeaderSize + 7, 0x02);
  std::vector<fsck::FsckFinding> found;
  fsck::FsckCallbacks cb;
  cb.finding = [&](const fsck::FsckFinding& f) { found.push_back(f); };
  CHECK_FALSE(fsck::CheckStore(*d.s, {}, cb)->ok());
  fsck::FsckOptions none;
  none.subset_percent = 0;
  CHECK(fsck::CheckStore(*d.s, none, {})->ok());
  fsck::FsckOptions structure;
  structure.verify_content = false;
  auto st = fsck::CheckStore(*d.s, structure, {});
  CHECK(st->ok());
  CHECK(st->objects_verified == 0);
  // Structure mode still sees structural damage.
  REQUIRE(::truncate(d.PackOf(d.ids[0]).c_str(), 1000) == 0);
  CHECK_FALSE(fsck::CheckStore(*d.s, structure, {})->ok());
}

// Throughput of a full check; hidden (run with "[.perf]").
TEST_CASE("fsck: verify throughput", "[.perf]") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  // Half random, half compressible text-like data, 512 MiB logical.
  auto b = *s->BeginBatch();
  for (int i = 0; i < 256; ++i) {
    auto part = RandomBytes(1 << 20, 10000 + i);
    auto f = t.str() + "/f";
    std::vector<uint8_t> file = part;
    for (auto& c : part) c &= 0x0f;  // compressible (~2:1)
    file.insert(file.end(), part.begin(), part.end());
    WriteFile(f, file);
    PutPath(*b, f);
  }
  CommitOk(*b);
  for (bool content : {true, false}) {
    fsck::FsckOptions o;
    o.verify_content = content;
    auto start = std::chrono::steady_clock::now();
    std::clock_t cpu_start = std::clock();
    auto r = fsck::CheckStore(*s, o, {});
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = double(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    REQUIRE(r);
    REQUIRE(r->ok());
    // CPU seconds too: on a shared machine they tell the 2-core speed.
    WARN((content ? "full" : "structure") << " check: " << s->Stats()->logical_bytes / secs / 1e6
                                          << " MB/s logical, " << secs << " s wall, " << cpu
                                          << " s CPU");
  }
  auto start = std::chrono::steady_clock::now();
  b = *s->BeginBatch();
  int n = 0;
  REQUIRE(s->ForEach([&](const ObjectId& id, const store::ObjectInfo&) -> Result<void> {
    if (n++ % 2) return b->Drop(id);
    return {};
  }));
  CommitOk(*b);
  auto r = s->Compact({.min_dead_fraction = 0.3});
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(r);
  WARN("drop half + compact: " << r->packs_rewritten << " packs, " << r->bytes_freed / 1e6
                               << " MB freed, " << r->objects_moved << " moved, " << secs << " s");
}

}  // namespace
}  // namespace agentenv::test
