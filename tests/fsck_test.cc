// fsck finds flipped bytes, truncated packs and leftovers, with locations.
#include <fcntl.h>
#include <sys/stat.h>

#include <set>

#include "store/inspect.h"
#include "store/manifest.h"
#include "store/store_impl.h"
#include "store_testutil.h"
#include "testutil.h"

namespace agentenv::test {
namespace {

using store::ObjectType;
using store::Store;

bool Has(const std::vector<fsck::FsckFinding>& fs, const std::string& kind) {
  for (auto& f : fs)
    if (f.kind == kind) return true;
  return false;
}

TEST_CASE("fsck: a clean store has no findings") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  WriteFile(t.str() + "/f", RandomBytes(2 << 20, 1));
  auto b = *s->BeginBatch();
  PutPath(*b, t.str() + "/f");
  REQUIRE(b->Put(ObjectType::kTree, std::vector<uint8_t>(5000, 'x')));
  CommitOk(*b);
  fsck::FsckReport rep;
  std::vector<fsck::FsckProgress> progress;
  fsck::FsckCallbacks cb;
  cb.progress = [&](const fsck::FsckProgress& p) { progress.push_back(p); };
  auto r = fsck::CheckStore(*s, {}, cb);
  REQUIRE(r);
  CHECK(r->ok());
  CHECK(r->objects == s->Stats()->objects);
  CHECK(r->records == r->objects);
  REQUIRE(!progress.empty());
  CHECK(progress.back().bytes_done == progress.back().bytes_total);
}

TEST_CASE("fsck: a flipped byte in stored data is reported with its id and location") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto raw = RandomBytes(100000, 2);  // incompressible: stored raw
  auto text = std::vector<uint8_t>(100000, 'a');  // stored zstd
  auto b = *s->BeginBatch();
  auto raw_id = *b->Put(ObjectType::kChunk, raw);
  auto text_id = *b->Put(ObjectType::kChunk, text);
  CommitOk(*b);
  for (auto id : {raw_id, text_id}) PokeRecord(*s, id, store::kRecordHeaderSize + s->Stat(id)->stored_size / 2, 0x10);
  CHECK(s->Stat(raw_id)->codec == store::Codec::kRaw);
  CHECK(s->Stat(text_id)->codec == store::Codec::kZstd);
  auto findings = Fsck(*s);
  for (auto id : {raw_id, text_id}) {
    INFO(id.Hex());
    bool found = false;
    for (auto& f : findings) {
      if (f.id == id && f.severity == fsck::Severity::kError) {
        found = true;
        CHECK(f.pack == s->Stat(id)->pack);
        CHECK(f.offset == s->Stat(id)->offset);
        CHECK(f.message.find(id.Hex()) != std::string::npos);
      }
    }
    CHECK(found);
    auto got = s->Get(id);  // reads verify too
    REQUIRE(!got);
    CHECK(got.error().code == ErrorCode::kCorrupt);
  }
}

TEST_CASE("fsck: truncated packs, damaged headers and leftover pack files") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  auto b = *s->BeginBatch();
  std::vector<store::ObjectId> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(*b->Put(ObjectType::kChunk, RandomBytes(50000, 10 + i)));
  CommitOk(*b);
  auto first = *s->Stat(ids[0]);
  std::string pack = store::PackPath(s->dir(), first.pack);

  SECTION("damaged header") {
    UniqueFd fd(::open(pack.c_str(), O_RDWR));
    uint8_t junk = 0xee;
    REQUIRE(::pwrite(fd.get(), &junk, 1, first.offset + 30) == 1);  // inside the id
    auto f = Fsck(*s);
    CHECK(Has(f, "bad-record"));
    CHECK(Has(f, "missing-record"));
    bool located = false;
    for (auto& x : f) located |= x.kind == "missing-record" && x.id == ids[0];
    CHECK(located);
  }
  SECTION("truncated pack") {
    struct stat st;
    REQUIRE(::stat(pack.c_str(), &st) == 0);
    REQUIRE(::truncate(pack.c_str(), st.st_size - 1000) == 0);
    auto f = Fsck(*s);
    CHECK(Has(f, "pack-short"));
    CHECK(Has(f, "missing-record"));
  }
  SECTION("leftover pack file is a warning only") {
    WriteFile(store::PackPath(s->dir(), 999), RandomBytes(100, 1));
    fsck::FsckReport rep;
    auto f = Fsck(*s, &rep);
    CHECK(Has(f, "unknown-pack-file"));
    CHECK(rep.ok());
    // A writer removes it.
    auto b2 = *s->BeginBatch();
    CommitOk(*b2);
    CHECK(Fsck(*s).empty());
  }
}


// fsck looks index entries up while it reads the packs instead of loading
// them first: every kind of damage is still found, naming every object.
TEST_CASE("fsck: index entries against records, in both directions, for every object") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  WriteFile(t.str() + "/big", RandomBytes(3 << 20, 7));
  auto b = *s->BeginBatch();
  std::vector<store::ObjectId> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(*b->Put(ObjectType::kChunk, RandomBytes(20000, 60 + i)));
  auto big = PutPath(*b, t.str() + "/big");
  CommitOk(*b);
  auto& index = static_cast<store::StoreImpl&>(*s).index();
  auto errors_about = [](const std::vector<fsck::FsckFinding>& f, const std::string& kind) {
    std::set<store::ObjectId> out;
    for (auto& x : f)
      if (x.kind == kind && x.id) out.insert(*x.id);
    return out;
  };

  SECTION("an index entry that disagrees with its record") {
    auto info = *s->Stat(ids[3]);
    info.size += 1;
    store::Index::Update u;
    u.objects.push_back({ids[3], info});
    REQUIRE(index.Apply(u));
    auto f = Fsck(*s);
    CHECK(errors_about(f, "index-mismatch") == std::set<store::ObjectId>{ids[3]});
  }
  SECTION("pack accounting off") {
    auto packs = *store::ListPacks(*s);
    REQUIRE(!packs.empty());
    store::Index::Update u;
    u.packs.push_back(packs[0]);
    u.packs[0].dead_objects += 1;
    REQUIRE(index.Apply(u));
    CHECK(Has(Fsck(*s), "pack-accounting"));
  }
  SECTION("an index entry pointing past every record, and one into a pack the table lacks") {
    auto a = *s->Stat(ids[1]), c = *s->Stat(ids[2]);
    a.offset += 8;
    c.pack = 4242;
    store::Index::Update u;
    u.objects = {{ids[1], a}, {ids[2], c}};
    REQUIRE(index.Apply(u));
    fsck::FsckReport rep;
    auto f = Fsck(*s, &rep);
    CHECK(errors_about(f, "missing-record") == std::set<store::ObjectId>{ids[1], ids[2]});
    CHECK(rep.objects == s->Stats()->objects);
  }
  SECTION("a lost chunk names its file's manifest") {
    auto chunks = *store::DecodeManifest(*s->Get(big.id));
    PokeRecord(*s, chunks[2].id, store::kRecordHeaderSize + 7, 1);
    auto f = Fsck(*s);
    CHECK(errors_about(f, "hash-mismatch") == std::set<store::ObjectId>{chunks[2].id});
    CHECK(errors_about(f, "missing-chunk") == std::set<store::ObjectId>{big.id});
  }
  SECTION("a deleted pack: every object in it is reported") {
    uint32_t pack = s->Stat(ids[0])->pack;
    std::set<store::ObjectId> in_pack;
    for (auto& id : ids)
      if (s->Stat(id)->pack == pack) in_pack.insert(id);
    REQUIRE(::unlink(store::PackPath(s->dir(), pack).c_str()) == 0);
    auto f = Fsck(*s);
    CHECK(Has(f, "pack-missing"));
    auto missing = errors_about(f, "missing-record");
    for (auto& id : in_pack) CHECK(missing.count(id));
  }
}


// The entries go in groups of packs, one index walk each: with groups of
// one object (every pack its own group) the same damage is found as with
// the whole store in one group.
TEST_CASE("fsck: index entries matched with records in groups of packs") {
  TempDir t;
  auto s = OpenStore(t.str() + "/s", Store::Mode::kCreate);
  std::vector<store::ObjectId> ids;
  for (int batch = 0; batch < 3; ++batch) {
    auto b = *s->BeginBatch();
    for (int i = 0; i < 5; ++i) ids.push_back(*b->Put(ObjectType::kChunk, RandomBytes(3000, 100 * batch + i)));
    // A full pack (random bytes do not compress): the next batch starts
    // another one.
    if (batch == 0)
      for (int i = 0; i < 17; ++i) REQUIRE(b->Put(ObjectType::kChunk, RandomBytes(4 << 20, 900 + i)));
    CommitOk(*b);
  }
  auto packs = *store::ListPacks(*s);
  REQUIRE(packs.size() >= 2);
  // Damage in two packs: an entry pointing between records, one whose
  // header fields disagree, and a flipped payload byte.
  auto& index = static_cast<store::StoreImpl&>(*s).index();
  auto a = *s->Stat(ids[1]), c = *s->Stat(ids[12]);
  REQUIRE(a.pack != c.pack);
  a.offset += 8;
  c.size += 1;
  store::Index::Update u;
  u.objects = {{ids[1], a}, {ids[12], c}};
  REQUIRE(index.Apply(u));
  PokeRecord(*s, ids[7], store::kRecordHeaderSize + 3, 0x40);

  auto summary = [](const std::vector<fsck::FsckFinding>& f) {
    std::set<std::pair<std::string, std::string>> out;
    for (auto& x : f) out.insert({x.kind, x.id ? x.id->Hex() : ""});
    return out;
  };
  fsck::FsckReport whole_rep, grouped_rep;
  auto whole = Fsck(*s, &whole_rep);
  fsck::FsckOptions one;
  one.group_entries = 1;
  auto grouped = Fsck(*s, &grouped_rep, one);
  CHECK(summary(whole).count({"missing-record", ids[1].Hex()}));
  CHECK(summary(whole).count({"index-mismatch", ids[12].Hex()}));
  CHECK(summary(whole).count({"hash-mismatch", ids[7].Hex()}));
  CHECK(summary(grouped) == summary(whole));
  CHECK(grouped_rep.objects == whole_rep.objects);
  CHECK(grouped_rep.objects == s->Stats()->objects);
  CHECK(grouped_rep.packs == packs.size());
  CHECK(grouped_rep.errors == whole_rep.errors);
  CHECK(grouped_rep.dead_records == whole_rep.dead_records);
}

}  // namespace
}  // namespace agentenv::test
