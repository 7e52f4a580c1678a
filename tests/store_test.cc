// Round trips, dedup and sparse output of the object store.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "store/inspect.h"
#include "store/manifest.h"
#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::Codec;
using store::ObjectId;
using store::ObjectType;
using store::Store;

constexpr size_t kSmallMax = 256 * 1024;  // the store's single-chunk threshold
constexpr size_t kMaxChunk = 256 * 1024;

std::vector<uint8_t> Compressible(size_t n) {
  std::vector<uint8_t> v(n);
  std::string line = "2026-11-22T10:00:00Z INFO request served path=/api/items status=200\n";
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(line[i % line.size()]);
  return v;
}

TEST_CASE("store: files round trip at every size class", "[slow]") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  struct Case {
    std::string name;
    std::vector<uint8_t> data;
  };
  std::vector<Case> cases = {
      {"empty", {}},
      {"one-byte", {0x42}},
      {"threshold", RandomBytes(kSmallMax, 1)},
      {"threshold+1", RandomBytes(kSmallMax + 1, 2)},
      {"random-100M", RandomBytes(100 << 20, 3)},
      {"compressible-40M", Compressible(40 << 20)},
  };
  auto b = *s->BeginBatch();
  std::vector<store::FileRef> refs;
  for (auto& c : cases) {
    WriteFile(t.str() + "/" + c.name, c.data);
    refs.push_back(PutPath(*b, t.str() + "/" + c.name));
  }
  CommitOk(*b);
  b.reset();

  s = OpenStore(t.str() + "/s", Store::Mode::kOpen);  // read back after reopening
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].name);
    CHECK(refs[i].size == cases[i].data.size());
    CHECK(refs[i].type == (cases[i].data.size() <= kSmallMax ? ObjectType::kChunk : ObjectType::kManifest));
    CHECK(ReadBack(*s, refs[i]) == cases[i].data);
  }
  // A small file's id is the sha256 of its content.
  CHECK(refs[1].id == ObjectId::Of(cases[1].data));
  CHECK(refs[1].id.Hex() == "df7e70e5021544f4834bbee64a9e3789febc4be81470df629cad6ddb03320a5c");
  auto st = *s->Stats();
  CHECK(st.stored_bytes < (100u << 20) + (kSmallMax * 3) + (4u << 20));  // text compressed well
  auto info = s->Stat(refs[3].id);
  REQUIRE(info);
  CHECK(Fsck(*s).empty());
}

TEST_CASE("store: object ids parse and print") {
  auto id = ObjectId::Of({});
  CHECK(id.Hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  auto back = ObjectId::FromHex(id.Hex());
  REQUIRE(back);
  CHECK(*back == id);
  CHECK(!ObjectId::FromHex("xyz"));
  CHECK(!ObjectId::FromHex(std::string(64, 'g')));
}

TEST_CASE("store: a damaged index file is reported as corruption, as the metadata index's is") {
  TempDir t;
  std::string dir = t.str() + "/s";
  { auto s = OpenStore(dir, Store::Mode::kCreate); }
  // Both meta pages overwritten: LMDB finds no valid header (MDB_INVALID).
  {
    std::ofstream f(dir + "/index/data.mdb", std::ios::binary | std::ios::trunc);
    f << std::string(16384, 'x');
  }
  auto s = Store::Open(dir, Store::Mode::kOpen);
  REQUIRE(!s);
  CHECK(s.error().code == ErrorCode::kCorrupt);
  CHECK(s.error().message.find(dir + "/index") == 0);
}

TEST_CASE("store: Put, Get, Has and missing objects") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto tree = RandomBytes(1000, 7);
  auto b = *s->BeginBatch();
  auto id = b->Put(ObjectType::kTree, tree);
  REQUIRE(id);
  CHECK(!*s->Has(*id));  // not visible before Commit
  CommitOk(*b);
  CHECK(*s->Has(*id));
  CHECK(*s->Get(*id) == tree);
  CHECK(s->Stat(*id)->type == ObjectType::kTree);
  auto missing = s->Get(ObjectId::Of(RandomBytes(5, 1)));
  REQUIRE(!missing);
  CHECK(missing.error().code == ErrorCode::kNotFound);
  CHECK(missing.error().message.find("not found") != std::string::npos);
  // Create refuses an existing store; Open refuses a non-store.
  CHECK(Store::Open(t.str() + "/s", Store::Mode::kCreate).error().code == ErrorCode::kExists);
  CHECK(!Store::Open(t.str(), Store::Mode::kOpen));
}

TEST_CASE("store: a batch reads back what it wrote and has not committed, and only that") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto before = RandomBytes(1000, 11);
  {
    auto b = *s->BeginBatch();
    REQUIRE(b->Put(ObjectType::kChunk, before));
    CommitOk(*b);
  }
  auto b = *s->BeginBatch();
  auto small = Compressible(3000), raw = RandomBytes(8192, 12);  // a zstd record and a raw aligned one
  auto a = b->Put(ObjectType::kChunk, small), r = b->Put(ObjectType::kChunk, raw);
  REQUIRE(a);
  REQUIRE(r);
  auto large = Compressible(3 << 20);
  WriteFile(t.str() + "/large", large);
  store::FileRef f = PutPath(*b, t.str() + "/large");
  REQUIRE(f.type == ObjectType::kManifest);
  CHECK(!*s->Has(*a));  // the store does not see them yet; the batch does
  CHECK(*b->GetPending(*a) == small);
  CHECK(*b->GetPending(*r) == raw);
  auto manifest = b->GetPending(f.id);
  REQUIRE(manifest);
  auto chunks = store::DecodeManifest(*manifest);
  REQUIRE(chunks);
  std::vector<uint8_t> joined;
  for (const auto& c : *chunks) {
    auto part = b->GetPending(c.id);
    REQUIRE(part);
    joined.insert(joined.end(), part->begin(), part->end());
  }
  CHECK(joined == large);
  // What the store had before is the store's to read.
  auto old = b->GetPending(ObjectId::Of(before));
  REQUIRE_FALSE(old);
  CHECK(old.error().code == ErrorCode::kNotFound);
  CommitOk(*b);
  auto after = b->GetPending(*a);
  REQUIRE_FALSE(after);
  CHECK(after.error().code == ErrorCode::kNotFound);
  CHECK(*s->Get(*a) == small);
  auto h = s->HashingBatch();
  REQUIRE(h->Put(ObjectType::kChunk, RandomBytes(10, 13)));
  CHECK(h->GetPending(ObjectId::Of(RandomBytes(10, 13))).error().code == ErrorCode::kNotFound);
}

TEST_CASE("store: Put says whether the store had the object before the batch") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto tree = RandomBytes(1000, 7), other = RandomBytes(1000, 8);
  {
    auto b = *s->BeginBatch();
    bool was = true;
    auto id = b->Put(ObjectType::kTree, tree, &was);
    REQUIRE(id);
    CHECK(!was);
    REQUIRE(b->Put(ObjectType::kTree, tree, &was));
    CHECK(!was);  // pending in this batch: not readable from the store yet
    CommitOk(*b);
  }
  auto b = *s->BeginBatch();
  bool was = false;
  REQUIRE(b->Put(ObjectType::kTree, tree, &was));
  CHECK(was);
  REQUIRE(b->Put(ObjectType::kTree, other, &was));
  CHECK(!was);
  // A batch that only hashes answers the same.
  auto h = s->HashingBatch();
  REQUIRE(h->Put(ObjectType::kTree, tree, &was));
  CHECK(was);
  REQUIRE(h->Put(ObjectType::kTree, RandomBytes(10, 9), &was));
  CHECK(!was);
}

TEST_CASE("store: Missing names the ids of a sorted list that are not stored") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  std::vector<ObjectId> stored, absent;
  for (int i = 0; i < 3000; ++i) stored.push_back(*b->Put(ObjectType::kChunk, RandomBytes(40, i)));
  CommitOk(*b);
  for (int i = 0; i < 500; ++i) absent.push_back(ObjectId::Of(RandomBytes(41, i)));
  std::vector<ObjectId> all = stored;
  all.insert(all.end(), absent.begin(), absent.end());
  all.push_back(stored[17]);  // repeats are allowed
  all.push_back(absent[3]);
  std::sort(all.begin(), all.end());
  auto missing = s->Missing(all);
  REQUIRE(missing);
  std::vector<ObjectId> want = absent;
  want.push_back(absent[3]);
  std::sort(want.begin(), want.end());
  CHECK(*missing == want);
  CHECK(s->Missing({})->empty());
  std::sort(stored.begin(), stored.end());
  CHECK(s->Missing(stored)->empty());
}

TEST_CASE("store: the same content twice is stored once") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto data = RandomBytes(5 << 20, 11);
  WriteFile(t.str() + "/a", data);
  WriteFile(t.str() + "/b", data);
  auto b = *s->BeginBatch();
  auto ra = PutPath(*b, t.str() + "/a");
  auto rb = PutPath(*b, t.str() + "/b");  // same batch
  CommitOk(*b);
  uint64_t after_one = StoredBytes(*s);
  CHECK(ra.id == rb.id);
  b = *s->BeginBatch();
  CHECK(PutPath(*b, t.str() + "/a").id == ra.id);  // later batch
  CHECK(b->new_bytes() == 0);
  CommitOk(*b);
  CHECK(StoredBytes(*s) == after_one);
  CHECK(after_one < data.size() + 64 * 1024);
}

TEST_CASE("store: small raw objects are packed tight, block-sized ones are block aligned") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  // Random bytes do not compress, so every object is stored raw.
  std::vector<ObjectId> big;
  for (int i = 0; i < 200; ++i) REQUIRE(b->Put(ObjectType::kChunk, RandomBytes(1000, 100 + i)));
  for (int i = 0; i < 4; ++i) big.push_back(*b->Put(ObjectType::kChunk, RandomBytes(5000, 500 + i)));
  CommitOk(*b);
  auto st = s->Stats();
  REQUIRE(st);
  CHECK(st->stored_bytes == 200 * 1000 + 4 * 5000);
  // Headers (64 bytes) and 8-byte alignment for the small ones; at most a
  // block of padding before each block-sized one.
  CHECK(st->pack_bytes <= st->stored_bytes + 204 * (64 + 8) + 4 * 4096);
  for (const auto& id : big) {
    auto info = s->Stat(id);
    REQUIRE(info);
    CHECK(info->codec == Codec::kRaw);
    CHECK((info->offset + 64) % 4096 == 0);
  }
}

TEST_CASE("store: a one-byte edit in a large file adds about one chunk") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto data = RandomBytes(50 << 20, 21);
  WriteFile(t.str() + "/f", data);
  auto b = *s->BeginBatch();
  PutPath(*b, t.str() + "/f");
  CommitOk(*b);
  uint64_t before = StoredBytes(*s);
  data[data.size() / 2] ^= 0xff;
  WriteFile(t.str() + "/f", data);
  b = *s->BeginBatch();
  auto r = PutPath(*b, t.str() + "/f");
  CommitOk(*b);
  uint64_t added = StoredBytes(*s) - before;
  uint64_t manifest = (data.size() / (16 * 1024)) * 40 + 64;
  CHECK(added <= 2 * kMaxChunk + manifest);
  CHECK(ReadBack(*s, r) == data);
}

TEST_CASE("store: an appended log adds only its tail") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto log = RandomBytes(20 << 20, 31);
  WriteFile(t.str() + "/log", log);
  auto b = *s->BeginBatch();
  PutPath(*b, t.str() + "/log");
  CommitOk(*b);
  uint64_t before = StoredBytes(*s);
  auto tail = RandomBytes(1 << 20, 32);
  log.insert(log.end(), tail.begin(), tail.end());
  WriteFile(t.str() + "/log", log);
  b = *s->BeginBatch();
  auto r = PutPath(*b, t.str() + "/log");
  CommitOk(*b);
  uint64_t added = StoredBytes(*s) - before;
  uint64_t manifest = (log.size() / (16 * 1024)) * 40 + 64;
  CHECK(added <= tail.size() + kMaxChunk + manifest);
  CHECK(ReadBack(*s, r) == log);
}

TEST_CASE("store: PutFile from many threads in one batch") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  constexpr int kFiles = 200;
  std::vector<std::vector<uint8_t>> data(kFiles);
  for (int i = 0; i < kFiles; ++i) {
    // Every 10th file is large; half of the rest repeat content.
    size_t n = i % 10 == 0 ? (3 << 20) : 1000 + i * 37;
    data[i] = RandomBytes(n, i % 20 < 10 ? i : 0x1000 + i % 10);
    WriteFile(t.str() + "/f" + std::to_string(i), data[i]);
  }
  auto b = *s->BeginBatch();
  std::vector<store::FileRef> refs(kFiles);
  std::vector<std::thread> threads;
  std::atomic<int> next{0}, errors{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < kFiles;) {
        std::string p = t.str() + "/f" + std::to_string(i);
        UniqueFd fd(::open(p.c_str(), O_RDONLY));
        auto r = b->PutFile(fd.get(), p);
        if (!r) ++errors; else refs[i] = *r;
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(errors == 0);
  CommitOk(*b);
  for (int i = 0; i < kFiles; ++i) CHECK(ReadBack(*s, refs[i]) == data[i]);
  CHECK(Fsck(*s).empty());
}

// Puts `count` random chunks of `size` bytes (seeds seed, seed+1, ...)
// into `b` from 4 threads at once.
void PutFromThreads(store::Batch& b, int count, size_t size, uint64_t seed) {
  std::vector<std::thread> threads;
  std::atomic<int> next{0}, errors{0};
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < count;) {
        if (!b.Put(ObjectType::kChunk, RandomBytes(size, seed + uint64_t(i)))) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(errors == 0);
}

TEST_CASE("store: a small batch from many threads appends to one pack") {
  // Each pack a batch writes costs its commit an fsync: a snapshot of a
  // few changed files hashed by two walkers wrote two.
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  PutFromThreads(*b, 80, 50000, 5000);
  CommitOk(*b);
  CHECK(store::ListPackFiles(s->dir())->size() == 1);
  CHECK(Fsck(*s).empty());
}

TEST_CASE("store: a parallel batch leaves at most one open pack per writer, later batches fill them") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto packs = [&] { return store::ListPackFiles(s->dir())->size(); };
  auto b = *s->BeginBatch();
  // 16 MB: past the first 8 MiB (one pack) appends go in parallel.
  PutFromThreads(*b, 400, 40000, 7000);
  CommitOk(*b);
  size_t after_parallel = packs();
  CHECK(after_parallel >= 1);
  CHECK(after_parallel <= 4);  // one per thread appending at the same time, at most
  for (int i = 0; i < 5; ++i) {  // small batches reuse the packs with room
    b = *s->BeginBatch();
    REQUIRE(b->Put(ObjectType::kChunk, RandomBytes(5000, 9000 + i)));
    CommitOk(*b);
  }
  CHECK(packs() == after_parallel);
  CHECK(Fsck(*s).empty());
}

TEST_CASE("store: WriteFileTo keeps zero blocks as holes") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  std::vector<uint8_t> data(8 << 20, 0);
  auto head = RandomBytes(1 << 20, 41);
  std::copy(head.begin(), head.end(), data.begin());
  data[data.size() - 1] = 1;  // non-zero last byte; 7 MiB of zeros in between
  WriteFile(t.str() + "/f", data);
  auto b = *s->BeginBatch();
  auto r = PutPath(*b, t.str() + "/f");
  CommitOk(*b);
  std::string out = t.str() + "/out";
  UniqueFd fd(::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644));
  REQUIRE(fd);
  auto w = s->WriteFileTo(r, fd.get());
  INFO((w ? "" : w.error().message));
  REQUIRE(w);
  struct stat st;
  REQUIRE(::fstat(fd.get(), &st) == 0);
  CHECK(uint64_t(st.st_size) == data.size());
  CHECK(uint64_t(st.st_blocks) * 512 <= (1 << 20) + 256 * 1024);  // 7 MiB of zeros were not written
  std::vector<uint8_t> back(data.size());
  REQUIRE(::pread(fd.get(), back.data(), back.size(), 0) == ssize_t(back.size()));
  CHECK(back == data);
}

TEST_CASE("store: the index map grows past its initial size") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  std::vector<ObjectId> ids;
  for (uint32_t i = 0; i < 120000; ++i) {
    auto id = b->Put(ObjectType::kChunk, std::span(reinterpret_cast<const uint8_t*>(&i), 4));
    REQUIRE(id);
    if (i % 10007 == 0) ids.push_back(*id);
  }
  CommitOk(*b);
  b.reset();
  s = OpenStore(t.str() + "/s", Store::Mode::kOpen);
  CHECK(s->Stats()->objects == 120000);
  for (auto& id : ids) CHECK(*s->Has(id));
}

// Lookups reuse reset read transactions: a renewed one must see commits
// made since, by another process too, and adopt a map that process grew.
TEST_CASE("store: lookups see what another process committed since and adopt the map it grew") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  auto first = *b->Put(ObjectType::kChunk, RandomBytes(1000, 61));
  CommitOk(*b);
  b.reset();
  for (int i = 0; i < 4; ++i) REQUIRE(*s->Has(first));  // leaves spare transactions
  const uint32_t kMark = 0xfeedface;
  ObjectId last = ObjectId::Of(std::span(reinterpret_cast<const uint8_t*>(&kMark), 4));
  CHECK(!*s->Has(last));
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // another process: 120k objects grow the map past its first size
    auto other = Store::Open(t.str() + "/s", Store::Mode::kOpen);
    if (!other) ::_exit(2);
    auto ob = (*other)->BeginBatch();
    if (!ob) ::_exit(3);
    for (uint32_t i = 0; i < 120000; ++i)
      if (!(*ob)->Put(ObjectType::kChunk, std::span(reinterpret_cast<const uint8_t*>(&i), 4))) ::_exit(4);
    if (!(*ob)->Put(ObjectType::kChunk, std::span(reinterpret_cast<const uint8_t*>(&kMark), 4))) ::_exit(5);
    ::_exit((*ob)->Commit() ? 0 : 6);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(*s->Has(last));
  CHECK(*s->Has(first));
  CHECK(s->Stats()->objects == 120002);
}

TEST_CASE("store: an abandoned batch leaves nothing behind") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto keep = RandomBytes(100000, 51), drop = RandomBytes(100000, 52);
  auto b = *s->BeginBatch();
  auto kid = *b->Put(ObjectType::kChunk, keep);
  CommitOk(*b);
  b = *s->BeginBatch();
  auto did = *b->Put(ObjectType::kChunk, drop);
  b.reset();
  CHECK(*s->Has(kid));
  CHECK(!*s->Has(did));
  CHECK(Fsck(*s).empty());
  b = *s->BeginBatch();  // the lock was released
  CommitOk(*b);
}

// Puts objects 0..n-1 (with ids repeating every `distinct`) from 4 threads;
// returns the ids in order of value.
std::vector<ObjectId> PutMany(store::Batch& b, int n, int distinct) {
  std::vector<ObjectId> ids(distinct);
  std::atomic<int> next{0}, errors{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&] {
      for (int i; (i = next++) < n;) {
        std::string v = "object " + std::to_string(i % distinct);
        auto r = b.Put(ObjectType::kChunk, std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size()));
        if (!r) ++errors; else ids[i % distinct] = *r;
      }
    });
  }
  for (auto& th : threads) th.join();
  REQUIRE(errors == 0);
  return ids;
}

TEST_CASE("store: a large batch commits in steps and an abandoned one keeps only whole steps") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  constexpr int kDistinct = 80000;  // several steps of 8k and a rest
  SECTION("committed: every object once, however the steps fell") {
    auto b = *s->BeginBatch();
    std::vector<ObjectId> ids = PutMany(*b, 2 * kDistinct, kDistinct);  // each id put twice, across steps
    CommitOk(*b);
    b.reset();
    s = OpenStore(t.str() + "/s", Store::Mode::kOpen);
    for (int i = 0; i < kDistinct; i += 997) {
      std::string v = "object " + std::to_string(i);
      CHECK(*s->Get(ids[i]) == std::vector<uint8_t>(v.begin(), v.end()));
    }
    CHECK(s->Stats()->objects == kDistinct);
    CHECK(Fsck(*s).empty());
  }
  SECTION("abandoned: the committed steps stay, readable; the rest is gone") {
    auto b = *s->BeginBatch();
    std::vector<ObjectId> ids = PutMany(*b, kDistinct, kDistinct);
    b.reset();
    s = OpenStore(t.str() + "/s", Store::Mode::kOpen);
    int have = 0;
    for (int i = 0; i < kDistinct; ++i) have += *s->Has(ids[i]);
    INFO(have << " of " << kDistinct << " objects committed by steps");
    CHECK(have >= 2 * 32768);
    CHECK(have < kDistinct);
    CHECK(s->Stats()->objects == uint64_t(have));
    CHECK(Fsck(*s).empty());
    b = *s->BeginBatch();  // the lock was released
    CommitOk(*b);
  }
}

}  // namespace
}  // namespace agentenv::test
