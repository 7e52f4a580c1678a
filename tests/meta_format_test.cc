// The metadata index's byte formats (docs/meta-format.md) against fixed
// vectors: node records, stat rows, entry rows, and the raw LMDB tables as
// MetaDb writes them. An index outlives the binary that wrote it, so any
// change to these bytes must break a test here, not only a round trip. The
// expected bytes were computed by a separate re-implementation of the
// documented layout (LEB128, zigzag, length-prefixed strings, SHA-256 of a
// long path), not by printing what the encoders produce.
#include <lmdb.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "snap/meta.h"
#include "snap/meta_internal.h"
#include "snap/oplog.h"
#include "snap/provenance.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using snap::EntryStat;
using snap::MetaDb;
using snap::NodeRecord;
using snap::StatEntry;
using store::ObjectId;
namespace mi = snap::meta_internal;

std::string Hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

std::string Hex(std::string_view s) { return Hex({reinterpret_cast<const uint8_t*>(s.data()), s.size()}); }

std::vector<uint8_t> Unhex(const std::string& h) {
  REQUIRE(h.size() % 2 == 0);
  std::vector<uint8_t> b;
  for (size_t i = 0; i < h.size(); i += 2) b.push_back(uint8_t(std::stoul(h.substr(i, 2), nullptr, 16)));
  return b;
}

ObjectId Filled(uint8_t v) {
  ObjectId id;
  id.bytes.fill(v);
  return id;
}

// 32 bytes of `v` as hex.
std::string Id(const char* v) {
  std::string s;
  for (int i = 0; i < 32; ++i) s += v;
  return s;
}

// ------------------------------------------------------------- vectors

NodeRecord WithParent() {
  NodeRecord r;
  r.id = Filled(0x11);
  r.seq = 300;
  r.time_ns = 1700000000123456789;
  r.parent = Filled(0x22);
  r.tree = Filled(0x33);
  r.flags = NodeRecord::kPinned;
  r.changes = 70000;
  r.title = "snap: 3 files";
  return r;
}
const std::string kWithParentHex = "ac02"                  // seq 300
                                   "aab4aed8c7bfce972f"    // time, zigzag
                                   "01" + Id("22") +       // parent
                                   Id("33") +              // tree
                                   "01"                    // flags: pinned
                                   "f0a204"                // changes 70000
                                   "0d736e61703a20332066696c6573";  // title

NodeRecord Root() {
  NodeRecord r;
  r.id = Filled(0xbb);
  r.seq = 1;
  r.time_ns = -5;
  r.tree = Filled(0x44);
  r.title = "init";
  return r;
}
const std::string kRootHex = "01"          // seq 1
                             "09"          // time -5, zigzag
                             "00" +        // no parent
                             Id("44") +    // tree
                             "00"          // flags
                             "00"          // changes
                             "04696e6974";  // title

NodeRecord Damaged() {
  NodeRecord r;
  r.id = Filled(0x12);
  r.seq = 7;
  r.parent = Filled(0x55);
  r.tree = Filled(0x66);
  r.flags = NodeRecord::kPinned | NodeRecord::kDamaged;
  r.changes = 2;
  r.title = "t";
  r.damage = "file a: object 77 is missing";
  return r;
}
const std::string kDamagedHex = "07"        // seq 7
                                "00"        // time 0
                                "01" + Id("55") + Id("66") +
                                "03"        // flags: pinned, damaged
                                "02"        // changes
                                "0174"      // title
                                "1c66696c6520613a206f626a656374203737206973206d697373696e67";  // damage

// A record with a provenance section (tag 2) and a section of a newer
// writer (tag 9), its title rendered from the provenance (flag 4).
NodeRecord WithProvenance() {
  NodeRecord r;
  r.id = Filled(0xbc);
  r.seq = 2;
  r.tree = Filled(0x44);
  r.flags = NodeRecord::kTitleRendered;
  r.title = "t";
  snap::Provenance& p = r.provenance.emplace();
  p.kind = snap::ProvenanceKind::kExec;
  p.argv = {"make", "test"};
  p.cwd = "/src";
  p.outcome.exit_code = 2;
  p.outcome.duration_ms = 1500;
  p.workspace = "ws";
  p.who = {snap::Origin::kMcp, "claude", "s1"};
  r.unknown_sections = {{9, {0xaa, 0xbb}}};
  return r;
}
const std::string kProvenanceBodyHex = "010104"            // kind 4, exec
                                       "02046d616b65"      // arg "make"
                                       "020474657374"      // arg "test"
                                       "05042f737263"      // cwd "/src"
                                       "060104"            // exit code 2, zigzag
                                       "0902dc0b"          // duration 1500 ms
                                       "0a027773"          // workspace "ws"
                                       "0e0103"            // origin 3, mcp
                                       "0f06636c61756465"  // client "claude"
                                       "10027331";         // session "s1"
const std::string kWithProvenanceHex = "02"         // seq 2
                                       "00"         // time 0
                                       "00" +       // no parent
                                       Id("44") +   // tree
                                       "04"         // flags: title rendered
                                       "00"         // changes
                                       "0174"       // title "t"
                                       "022f" +     // section 2, 47 bytes
                                       kProvenanceBodyHex +
                                       "0902aabb";  // section 9 (unknown), kept

StatEntry FileStat() {
  StatEntry e;
  e.dev = 2049;
  e.ino = 131073;
  e.size = 70000;
  e.mode = 0100644;
  e.uid = 1000;
  e.gid = 0;
  e.mtime_ns = 1700000000123456789;
  e.ctime_ns = -1;
  e.xattrs = {{"security.capability", std::string("\x01\x00\x00\x02", 4)}, {"user.a", "1"}};
  e.ref = {Filled(0x77), store::ObjectType::kManifest, 70000};
  return e;
}
const std::string kFileStatHex = "8110"                // dev 2049
                                 "818008"              // ino 131073
                                 "f0a204"              // size 70000
                                 "a48302"              // mode 0100644
                                 "e807"                // uid 1000
                                 "00"                  // gid
                                 "aab4aed8c7bfce972f"  // mtime
                                 "01"                  // ctime -1
                                 "02"                  // 2 xattrs
                                 "1373656375726974792e6361706162696c697479" "0401000002"
                                 "06757365722e61" "0131" +
                                 Id("77") +            // content
                                 "02"                  // manifest
                                 "f0a204";             // file size 70000

EntryStat Symlink() {
  EntryStat e;
  e.dev = 1;
  e.ino = 2;
  e.size = 6;
  e.mode = 0120777;
  e.mtime_ns = 10;
  e.ctime_ns = 20;
  e.target = "../bin";
  return e;
}
const std::string kSymlinkHex = "010206"      // dev, ino, size
                                "ffc302"      // mode 0120777
                                "0000"        // uid, gid
                                "1428"        // mtime 10, ctime 20
                                "00"          // no xattrs
                                "062e2e2f62696e";  // target, and no tree hint

EntryStat Dir() {
  EntryStat e;
  e.dev = 64769;
  e.ino = 128;
  e.size = 4096;
  e.mode = 040755;
  e.uid = 1000;
  e.gid = 1000;
  e.mtime_ns = -2;
  e.ctime_ns = 3;
  e.xattrs = {{"user.k", "v"}};
  e.tree = Filled(0x88);
  e.tree_removals = 5;
  return e;
}
const std::string kDirPrefixHex = "81fa03"    // dev 64769
                                  "8001"      // ino 128
                                  "8020"      // size 4096
                                  "ed8301"    // mode 040755
                                  "e807e807"  // uid, gid
                                  "0306"      // mtime -2, ctime 3
                                  "01" "06757365722e6b" "0176"
                                  "00";       // empty target
const std::string kDirHex = kDirPrefixHex + Id("88") + "05";  // tree hint, removals

// ------------------------------------------------------------- checks

void CheckSameNode(const NodeRecord& got, const NodeRecord& want) {
  CHECK(got.id == want.id);
  CHECK(got.seq == want.seq);
  CHECK(got.time_ns == want.time_ns);
  CHECK(got.parent == want.parent);
  CHECK(got.tree == want.tree);
  CHECK(got.flags == want.flags);
  CHECK(got.changes == want.changes);
  CHECK(got.title == want.title);
  CHECK(got.damage == want.damage);
}

void CheckSameFields(const snap::StatFields& got, const snap::StatFields& want) {
  CHECK(got.Matches(want));
  CHECK(got.xattrs == want.xattrs);
}

void CheckSameEntry(const EntryStat& got, const EntryStat& want) {
  CheckSameFields(got, want);
  CHECK(got.target == want.target);
  CHECK(got.tree == want.tree);
  CHECK(got.tree_removals == want.tree_removals);
}

// Every proper prefix of `bytes` (the empty one too) decodes to nullopt,
// but those in `allowed`.
template <class Decode>
void CheckTruncationsRefused(const std::vector<uint8_t>& bytes, Decode decode, std::vector<size_t> allowed = {}) {
  for (size_t n = 0; n < bytes.size(); ++n) {
    if (std::find(allowed.begin(), allowed.end(), n) != allowed.end()) continue;
    INFO("prefix of " << n << " of " << bytes.size() << " bytes");
    CHECK_FALSE(decode(std::span<const uint8_t>(bytes.data(), n)));
  }
}

TEST_CASE("meta format: node records, exact bytes both ways", "[meta-format]") {
  for (const auto& [r, hex] : {std::pair{WithParent(), kWithParentHex}, std::pair{Root(), kRootHex},
                               std::pair{Damaged(), kDamagedHex}}) {
    INFO(r.title);
    CHECK(Hex(mi::EncodeRecord(r)) == hex);
    const auto bytes = Unhex(hex);
    auto d = mi::DecodeRecord(r.id, bytes);
    REQUIRE(d);
    CheckSameNode(*d, r);
    CheckTruncationsRefused(bytes, [&](std::span<const uint8_t> b) { return mi::DecodeRecord(r.id, b); });
  }
  // Sections: provenance (tag 2) and one this binary does not know, which
  // is kept and written back.
  {
    const NodeRecord r = WithProvenance();
    CHECK(Hex(mi::EncodeRecord(r)) == kWithProvenanceHex);
    const auto bytes = Unhex(kWithProvenanceHex);
    auto d = mi::DecodeRecord(r.id, bytes);
    REQUIRE(d);
    CheckSameNode(*d, r);
    REQUIRE(d->provenance);
    CHECK(*d->provenance == *r.provenance);
    CHECK(d->unknown_sections == r.unknown_sections);
    CHECK(mi::EncodeRecord(*d) == bytes);
    // Every cut inside a section is refused; the cut that drops only the
    // last section leaves a record that has just the provenance.
    const size_t before_unknown = bytes.size() - 4, before_sections = before_unknown - 2 - 47;
    CheckTruncationsRefused(bytes, [&](std::span<const uint8_t> b) { return mi::DecodeRecord(r.id, b); },
                            {before_sections, before_unknown});
    // A provenance section that does not decode makes the record corrupt.
    auto broken = bytes;
    broken[before_sections + 3] = 0x7f;  // the kind field's length, past the section
    CHECK_FALSE(mi::DecodeRecord(r.id, broken));
  }
  // A record without sections (every record an older binary wrote) has
  // no provenance: "not recorded".
  auto old_record = mi::DecodeRecord(Filled(0x11), Unhex(kWithParentHex));
  REQUIRE(old_record);
  CHECK_FALSE(old_record->provenance);
  CHECK(old_record->title == "snap: 3 files");
  // An intact node's record ends at its title, whatever `damage` holds.
  NodeRecord healed = WithParent();
  healed.damage = "stale";
  CHECK(Hex(mi::EncodeRecord(healed)) == kWithParentHex);
}

TEST_CASE("meta format: stat rows, exact bytes both ways", "[meta-format]") {
  const StatEntry e = FileStat();
  CHECK(Hex(mi::EncodeStat(e)) == kFileStatHex);
  auto bytes = Unhex(kFileStatHex);
  auto d = mi::DecodeStat(bytes);
  REQUIRE(d);
  CheckSameFields(*d, e);
  CHECK(d->ref.id == e.ref.id);
  CHECK(d->ref.type == store::ObjectType::kManifest);
  CHECK(d->ref.size == 70000);
  CheckTruncationsRefused(bytes, [](std::span<const uint8_t> b) { return mi::DecodeStat(b); });

  // The type byte sits before the last varint: 1 and 2 decode, others not.
  const size_t type_at = bytes.size() - 4;
  REQUIRE(bytes[type_at] == 2);
  bytes[type_at] = 1;
  auto chunk = mi::DecodeStat(bytes);
  REQUIRE(chunk);
  CHECK(chunk->ref.type == store::ObjectType::kChunk);
  for (uint8_t bad : {0, 3, 4, 255}) {
    bytes[type_at] = bad;
    CHECK_FALSE(mi::DecodeStat(bytes));
  }
}

TEST_CASE("meta format: entry rows with and without a tree hint, exact bytes both ways", "[meta-format]") {
  const EntryStat link = Symlink();
  CHECK(Hex(mi::EncodeEntry(link)) == kSymlinkHex);
  const auto link_bytes = Unhex(kSymlinkHex);
  auto dl = mi::DecodeEntry(link_bytes);
  REQUIRE(dl);
  CheckSameEntry(*dl, link);
  CheckTruncationsRefused(link_bytes, [](std::span<const uint8_t> b) { return mi::DecodeEntry(b); });

  const EntryStat dir = Dir();
  CHECK(Hex(mi::EncodeEntry(dir)) == kDirHex);
  const auto dir_bytes = Unhex(kDirHex);
  auto dd = mi::DecodeEntry(dir_bytes);
  REQUIRE(dd);
  CheckSameEntry(*dd, dir);
  // The hint is optional: the prefix that ends at the target is the row
  // without one. Every other truncation is refused.
  const size_t without_hint = kDirPrefixHex.size() / 2;
  CheckTruncationsRefused(dir_bytes, [](std::span<const uint8_t> b) { return mi::DecodeEntry(b); },
                          {without_hint});
  auto plain = mi::DecodeEntry(std::span<const uint8_t>(dir_bytes.data(), without_hint));
  REQUIRE(plain);
  EntryStat no_hint = dir;
  no_hint.tree.reset();
  no_hint.tree_removals = 0;
  CheckSameEntry(*plain, no_hint);
  CHECK(Hex(mi::EncodeEntry(no_hint)) == kDirPrefixHex);
}

// ------------------------------------------------------------- raw LMDB

// The environment MetaDb wrote, opened read-only with LMDB's C API (after
// the MetaDb is closed: one process must not open an environment twice).
class RawEnv {
 public:
  explicit RawEnv(const std::string& dir) {
    REQUIRE(mdb_env_create(&env_) == 0);
    REQUIRE(mdb_env_set_maxdbs(env_, 32) == 0);
    REQUIRE(mdb_env_open(env_, dir.c_str(), MDB_RDONLY | MDB_NOTLS, 0644) == 0);
    REQUIRE(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn_) == 0);
  }
  ~RawEnv() {
    if (txn_) mdb_txn_abort(txn_);
    if (env_) mdb_env_close(env_);
  }
  RawEnv(const RawEnv&) = delete;
  RawEnv& operator=(const RawEnv&) = delete;

  // Every row of a named database (nullptr: the main one, whose keys are
  // the names), duplicates included, as (key hex, value hex) in key order.
  std::vector<std::pair<std::string, std::string>> Rows(const char* name) {
    MDB_dbi dbi;
    REQUIRE(mdb_dbi_open(txn_, name, 0, &dbi) == 0);
    MDB_cursor* c;
    REQUIRE(mdb_cursor_open(txn_, dbi, &c) == 0);
    std::vector<std::pair<std::string, std::string>> out;
    MDB_val k, v;
    for (int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(c, &k, &v, MDB_NEXT))
      out.emplace_back(Hex({static_cast<const uint8_t*>(k.mv_data), k.mv_size}),
                       Hex({static_cast<const uint8_t*>(v.mv_data), v.mv_size}));
    mdb_cursor_close(c);
    return out;
  }
  std::vector<std::string> Names() {
    std::vector<std::string> out;
    for (const auto& [k, v] : Rows(nullptr)) {
      auto b = Unhex(k);
      out.emplace_back(b.begin(), b.end());
    }
    return out;
  }

 private:
  MDB_env* env_ = nullptr;
  MDB_txn* txn_ = nullptr;
};

using Rows = std::vector<std::pair<std::string, std::string>>;

const std::vector<std::string> kTables = {"children", "deferred", "entries",  "garbage", "garbage_log", "info",
                                          "lanes",    "nodes",    "oplog",    "oplog_nodes", "recount", "refcount",
                                          "refs",     "seq",      "stat",     "time",    "timeline"};

TEST_CASE("meta format: rows as MetaDb writes them, read with the LMDB C API", "[meta-format]") {
  // info's u64s and the count rows are in host byte order.
  if constexpr (std::endian::native != std::endian::little) Skip("expected bytes are little-endian");
  TempDir t;
  const std::string dir = t.str() + "/meta";
  const NodeRecord root = Root();
  const std::string long_path = "d/" + std::string(500, 'x');
  {
    auto db = MetaDb::Open(dir, true);
    REQUIRE(db);
    auto txn = (*db)->Begin();
    REQUIRE(txn);
    auto seq = (*txn)->NextSeq();
    REQUIRE(seq);
    REQUIRE(*seq == root.seq);
    REQUIRE((*txn)->PutNode(root));
    REQUIRE((*txn)->AddChild(root.id, Filled(0xcc)));
    REQUIRE((*txn)->AddChild(root.id, Filled(0x0c)));
    for (const std::string& ref : std::vector<std::string>{"HEAD", "tag/v1", "lease/ws/a-1", "tip/" + root.id.Hex()})
      REQUIRE((*txn)->SetRef(ref, root.id));
    REQUIRE((*txn)->PutStat("usr/bin/x", FileStat()));
    REQUIRE((*txn)->PutStat(long_path, FileStat()));
    REQUIRE((*txn)->PutEntry("etc", Dir()));
    REQUIRE((*txn)->AdjustRef(MetaDb::Txn::Counts::kLive, Filled(0x77), 2));
    REQUIRE((*txn)->SetPending(MetaDb::Txn::Counts::kLive, Filled(0x77), true));
    REQUIRE((*txn)->AdjustRef(MetaDb::Txn::Counts::kLive, Filled(0x78), 1));
    REQUIRE((*txn)->AdjustRef(MetaDb::Txn::Counts::kLive, Filled(0x78), -1));  // 0: no row
    REQUIRE((*txn)->DeferNode(root.seq, root.id, root.tree));
    REQUIRE((*txn)->PutGarbage(Filled(0x99)));
    REQUIRE((*txn)->PutGarbage(Filled(0x99)));
    snap::Operation op;
    op.time_ns = 1700000000000000000;
    op.kind = snap::OpKind::kRestore;
    op.from = Filled(0x33);
    op.to = Filled(0x44);
    op.saved = Filled(0x55);
    op.who = {snap::Origin::kWeb, "dvr", ""};
    auto at = (*txn)->PutOperation(op);
    REQUIRE(at);
    CHECK(*at == op.time_ns);
    op.saved.reset();
    op.from = Filled(0x44);
    at = (*txn)->PutOperation(op);  // the same nanosecond: stored at the next
    REQUIRE(at);
    CHECK(*at == op.time_ns + 1);
    REQUIRE((*txn)->Commit());
  }
  RawEnv raw(dir);
  CHECK(raw.Names() == kTables);
  CHECK(raw.Rows("nodes") == Rows{{Id("bb"), kRootHex}});
  CHECK(raw.Rows("seq") == Rows{{"0000000000000001", Id("bb")}});
  CHECK(raw.Rows("children") == Rows{{Id("bb"), Id("0c")}, {Id("bb"), Id("cc")}});
  CHECK(raw.Rows("refs") == Rows{{Hex("HEAD"), Id("bb")},
                                 {Hex("lease/ws/a-1"), Id("bb")},
                                 {Hex("tag/v1"), Id("bb")},
                                 {Hex("tip/") + Hex(std::string(64, 'b')), Id("bb")}});
  // A path over 480 bytes is keyed "\x01long:" + its SHA-256 in hex.
  CHECK(raw.Rows("stat") ==
        Rows{{"01" + Hex("long:b2c9ce6ddf968b707d14c8cc85b7cb50afbc3dc36c01cd135dd2ba4334c9f527"), kFileStatHex},
             {Hex("usr/bin/x"), kFileStatHex}});
  CHECK(raw.Rows("entries") == Rows{{Hex("etc"), kDirHex}});
  CHECK(raw.Rows("info") == Rows{{Hex("counted_through"), "0200000000000000"},
                                 {Hex("next_seq"), "0200000000000000"},
                                 {Hex("refcount"), Hex("2")},
                                 {Hex("time_next"), "0200000000000000"},
                                 {Hex("time_nodes"), "0100000000000000"}});
  // The time index: time -5 with the sign bit flipped, then the seq; lane
  // 0, no changes, nothing thinned.
  CHECK(raw.Rows("time") == Rows{{"7ffffffffffffffb" "0000000000000001", Id("bb") + "000000"}});
  // One sum row per level: bucket = flipped time >> (33 + 3 level); 1
  // node, 0 changes, 0 thinned, 1 lane slot: slot 0 holds 1 node.
  Rows sums;
  for (int level = 0; level < 11; ++level) {
    const uint64_t bucket = 0x7ffffffffffffffbULL >> (33 + 3 * level);
    char key[19];
    std::snprintf(key, sizeof key, "%02x%016llx", level, static_cast<unsigned long long>(bucket));
    sums.emplace_back(key, "010000010001");
  }
  CHECK(raw.Rows("timeline") == sums);
  // Lane 0's tip: time -5 (zigzag 9), seq 1, the node.
  CHECK(raw.Rows("lanes") == Rows{{"00000000", "0901" + Id("bb")}});
  CHECK(raw.Rows("refcount") == Rows{{Id("77"), "0200000000000080"}});
  CHECK(raw.Rows("recount").empty());
  CHECK(raw.Rows("garbage").empty());
  CHECK(raw.Rows("garbage_log") == Rows{{"0000000000000000", Id("99")}, {"0000000000000001", Id("99")}});
  CHECK(raw.Rows("deferred") == Rows{{"0000000000000001", Id("bb") + Id("44")}});
  // Keyed by time, be64 with the sign bit flipped; tagged fields.
  CHECK(raw.Rows("oplog") == Rows{{"97979cfe362a0000", "010101"              // kind 1, restore
                                                       "0220" + Id("33") +   // from
                                                       "0320" + Id("44") +   // to
                                                       "0420" + Id("55") +   // saved
                                                       "050104"              // origin 4, web
                                                       "0603647672"},        // client "dvr"
                                  {"97979cfe362a0001", "010101"
                                                       "0220" + Id("44") + "0320" + Id("44") + "050104" "0603647672"}});
  CHECK(raw.Rows("oplog_nodes") == Rows{{Id("33"), "97979cfe362a0000"},
                                        {Id("44"), "97979cfe362a0000"},
                                        {Id("44"), "97979cfe362a0001"},
                                        {Id("55"), "97979cfe362a0000"}});
}

// Writes a raw environment with only the named tables, then closes it.
void MakeRawIndex(const std::string& dir, const std::vector<std::pair<const char*, unsigned>>& tables) {
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  MDB_env* env;
  REQUIRE(mdb_env_create(&env) == 0);
  REQUIRE(mdb_env_set_maxdbs(env, 16) == 0);
  REQUIRE(mdb_env_open(env, dir.c_str(), MDB_NOTLS, 0644) == 0);
  MDB_txn* txn;
  REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
  for (const auto& [name, flags] : tables) {
    MDB_dbi dbi;
    REQUIRE(mdb_dbi_open(txn, name, MDB_CREATE | flags, &dbi) == 0);
    if (std::string_view(name) == "refs") {
      const ObjectId head = Filled(0xab);
      MDB_val k{4, const_cast<char*>("HEAD")}, v{32, const_cast<uint8_t*>(head.bytes.data())};
      REQUIRE(mdb_put(txn, dbi, &k, &v, 0) == 0);
    }
  }
  REQUIRE(mdb_txn_commit(txn) == 0);
  mdb_env_close(env);
}

TEST_CASE("meta format: opening an index of the first format adds the later tables", "[meta-format]") {
  TempDir t;
  const std::string dir = t.str() + "/meta";
  MakeRawIndex(dir, {{"nodes", 0}, {"seq", 0}, {"children", MDB_DUPSORT}, {"refs", 0}, {"stat", 0}, {"info", 0}});
  {
    auto db = MetaDb::Open(dir, false);
    INFO((db ? "" : db.error().message));
    REQUIRE(db);
    auto head = (*db)->GetRef("HEAD");
    REQUIRE(head);
    CHECK(*head == Filled(0xab));
    auto counted = (*db)->CountedObjects();
    REQUIRE(counted);
    CHECK(*counted == 0);
  }
  RawEnv raw(dir);
  CHECK(raw.Names() == kTables);
}

TEST_CASE("meta format: an environment without the first tables is not an index", "[meta-format]") {
  TempDir t;
  const std::string dir = t.str() + "/meta";
  MakeRawIndex(dir, {{"nodes", 0}, {"seq", 0}});
  auto db = MetaDb::Open(dir, false);
  REQUIRE_FALSE(db);
  CHECK(db.error().code == ErrorCode::kNotFound);
  CHECK(db.error().message == dir + ": not an agentenv metadata index");
}

}  // namespace
}  // namespace agentenv::test
