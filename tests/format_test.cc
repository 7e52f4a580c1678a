// Byte formats against fixed vectors: varints, tree and node objects,
// pack record headers, manifests and FastCDC cut points. Each of these is
// stored on disk or decides object ids, so any change to them must break a
// test here, not only a round trip. The expected bytes follow
// docs/design.md, docs/store-format.md and the header comments (the field
// order from the encoders where the docs name fields but not their order)
// and were computed by a separate re-implementation of LEB128, FNV-1a and
// FastCDC, not by printing what the encoders produce.
#include <fcntl.h>
#include <unistd.h>

#include <lmdb.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "common/unique_fd.h"
#include "snap/meta.h"
#include "snap/node.h"
#include "snap/packages.h"
#include "snap/tree.h"
#include "snap/varint.h"
#include "store/fastcdc.h"
#include "store/inspect.h"
#include "store/manifest.h"
#include "tests/testutil.h"

namespace agentenv::test {
namespace {

using store::ObjectId;
using store::ObjectType;

std::string Hex(std::span<const uint8_t> b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t c : b) {
    s += d[c >> 4];
    s += d[c & 15];
  }
  return s;
}

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

std::vector<uint8_t> VarBytes(uint64_t v) {
  snap::ByteWriter w;
  w.Var(v);
  return std::move(w).bytes();
}

std::vector<uint8_t> SignedBytes(int64_t v) {
  snap::ByteWriter w;
  w.Signed(v);
  return std::move(w).bytes();
}

// ---------------------------------------------------------------- varints

TEST_CASE("format: varints are LEB128, signed ones zigzag", "[format]") {
  struct V {
    uint64_t v;
    const char* hex;
  };
  for (const V& c : {V{0, "00"}, V{1, "01"}, V{127, "7f"}, V{128, "8001"}, V{300, "ac02"},
                     V{uint64_t{1} << 32, "8080808010"},
                     V{std::numeric_limits<uint64_t>::max(), "ffffffffffffffffff01"}}) {
    INFO(c.v);
    CHECK(Hex(VarBytes(c.v)) == c.hex);
    auto b = Unhex(c.hex);
    snap::ByteReader r(b);
    uint64_t got = 1;
    REQUIRE(r.Var(&got));
    CHECK(got == c.v);
    CHECK(r.done());
  }
  struct S {
    int64_t v;
    const char* hex;
  };
  for (const S& c : {S{0, "00"}, S{-1, "01"}, S{1, "02"}, S{-2, "03"}, S{63, "7e"}, S{-64, "7f"},
                     S{64, "8001"}, S{1700000000123456789, "aab4aed8c7bfce972f"},
                     S{std::numeric_limits<int64_t>::min(), "ffffffffffffffffff01"},
                     S{std::numeric_limits<int64_t>::max(), "feffffffffffffffff01"}}) {
    INFO(c.v);
    CHECK(Hex(SignedBytes(c.v)) == c.hex);
    auto b = Unhex(c.hex);
    snap::ByteReader r(b);
    int64_t got = 1;
    REQUIRE(r.Signed(&got));
    CHECK(got == c.v);
    CHECK(r.done());
  }
  snap::ByteWriter w;
  w.Str("ab");
  w.Str("");
  w.U8(0xfe);
  CHECK(Hex(std::move(w).bytes()) == "02616200fe");
}

TEST_CASE("format: varint readers refuse truncated, overlong and oversized input", "[format]") {
  uint64_t v = 0;
  for (const char* hex : {"", "80", "ff",
                          "80808080",            // 2^32 without its last byte
                          "ffffffffffffffffff",  // UINT64_MAX without its last byte
                          "ffffffffffffffffffff01"}) {  // 11 bytes: past 64 bits
    auto b = Unhex(hex);
    INFO(hex);
    snap::ByteReader r(b);
    CHECK_FALSE(r.Var(&v));
  }
  {
    auto b = Unhex("80");
    snap::ByteReader r(b);
    int64_t s = 0;
    CHECK_FALSE(r.Signed(&s));
  }
  {
    // Length-prefixed strings: whole ones read, one byte short do not, and
    // a length of 2^64-1 is refused rather than trusted.
    for (const char* hex : {"00", "0161", "03616263"}) {
      INFO(hex);
      auto b = Unhex(hex);
      snap::ByteReader r(b);
      std::string s;
      REQUIRE(r.Str(&s));
      CHECK(r.done());
      b.pop_back();
      snap::ByteReader cut(b);
      CHECK_FALSE(cut.Str(&s));
    }
    auto b = Unhex("ffffffffffffffffff01");
    snap::ByteReader r(b);
    std::string s;
    CHECK_FALSE(r.Str(&s));
  }
  {
    auto b = Unhex("0102");
    snap::ByteReader r(b);
    uint8_t raw[3];
    CHECK_FALSE(r.Raw(raw, 3));
    uint8_t u = 0;
    REQUIRE(r.U8(&u));
    REQUIRE(r.U8(&u));
    CHECK(u == 2);
    CHECK(r.done());
    CHECK_FALSE(r.U8(&u));
  }
}

// ---------------------------------------------------------------- trees

// One entry of each shape that encodes differently: a file (id, content
// type, xattr, negative mtime), a symlink (target, no id), a char device
// (rdev) and a directory (id, no content type, sticky bit).
snap::Tree FixedTree() {
  snap::Tree t(4);
  t[0].name = "hello.txt";
  t[0].kind = snap::Kind::kFile;
  t[0].meta = {0644, 1000, 1000, -1500000000, {{"user.k", "v"}}};
  t[0].size = 6;
  t[0].id = Filled(0x22);
  t[0].content = ObjectType::kChunk;
  t[1].name = "link";
  t[1].kind = snap::Kind::kSymlink;
  t[1].meta = {0777, 0, 0, 0, {}};
  t[1].target = "hello.txt";
  t[2].name = "null";
  t[2].kind = snap::Kind::kChar;
  t[2].meta = {0666, 0, 0, 1, {}};
  t[2].rdev = (1 << 8) | 3;  // makedev(1, 3) in glibc's encoding
  t[3].name = "tmp";
  t[3].kind = snap::Kind::kDir;
  t[3].meta = {01777, 0, 0, 1700000000123456789, {}};
  t[3].id = Filled(0x11);
  return t;
}

// name, kind u8, mode, uid, gid, zigzag mtime, size, [32-byte id: file and
// dir], [content type u8: file], target, rdev, xattr count, (key, value)...
const std::string kFixedTreeHex = std::string() +
    "414554524545010a"  // magic "AETREE\x01\n"
    "04" +              // 4 entries
    // "hello.txt": file, 0644, 1000:1000, mtime -1.5 s, 6 bytes, a chunk, user.k=v
    "09" "68656c6c6f2e747874" "01" "a403" "e807" "e807" "ffbbc1960b" "06" +
    std::string(64, '2') + "01" "00" "00" "01" "06" "757365722e6b" "01" "76" +
    // "link": symlink 0777 -> "hello.txt"
    "04" "6c696e6b" "03" "ff03" "00" "00" "00" "00" "09" "68656c6c6f2e747874" "00" "00" +
    // "null": char device 0666, mtime 1 ns, rdev 0x103
    "04" "6e756c6c" "06" "b603" "00" "00" "02" "00" "00" "8302" "00" +
    // "tmp": dir 01777, mtime 1700000000.123456789 s, its tree id
    "03" "746d70" "02" "ff07" "00" "00" "aab4aed8c7bfce972f" "00" + std::string(64, '1') + "00" "00" "00";

TEST_CASE("format: a tree object's exact bytes, and its id", "[format][tree]") {
  const snap::Tree t = FixedTree();
  const auto bytes = snap::EncodeTree(t);
  CHECK(Hex(bytes) == kFixedTreeHex);
  CHECK(bytes.size() == 171);
  CHECK(ObjectId::Of(bytes).Hex() == "dbfe7a7fe8bd42b3ce38184f07faf306352dfb48ffed93fa007706c6fce06a11");
  // The empty directory: magic and a zero count. Its id is in every
  // repository that ever held an empty directory.
  CHECK(Hex(snap::EncodeTree({})) == "414554524545010a00");
  CHECK(snap::EmptyTreeId().Hex() == "e14f837b5d0b12256494aa1033eac5a6734afbe7f4602dfda47582f6cf35e23e");
}

TEST_CASE("format: a tree decodes back field by field", "[format][tree]") {
  auto d = snap::DecodeTree(Unhex(kFixedTreeHex), "fixed");
  INFO((d ? "" : d.error().message));
  REQUIRE(d);
  const snap::Tree want = FixedTree();
  REQUIRE(d->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const snap::Entry &g = (*d)[i], &w = want[i];
    INFO(w.name);
    CHECK(g.name == w.name);
    CHECK(g.kind == w.kind);
    CHECK(g.meta.mode == w.meta.mode);
    CHECK(g.meta.uid == w.meta.uid);
    CHECK(g.meta.gid == w.meta.gid);
    CHECK(g.meta.mtime_ns == w.meta.mtime_ns);
    CHECK(g.meta.xattrs == w.meta.xattrs);
    CHECK(g.size == w.size);
    CHECK(g.id == w.id);
    CHECK(g.content == w.content);
    CHECK(g.target == w.target);
    CHECK(g.rdev == w.rdev);
  }
  CHECK(*d == want);
  // A manifest content type and a hardlink entry also survive.
  snap::Tree t(2);
  t[0].name = "big";
  t[0].id = Filled(0x33);
  t[0].size = 1 << 30;
  t[0].content = ObjectType::kManifest;
  t[1].name = "big2";
  t[1].kind = snap::Kind::kHardlink;
  t[1].target = "dir/big";
  auto d2 = snap::DecodeTree(snap::EncodeTree(t), "t");
  REQUIRE(d2);
  CHECK(*d2 == t);
}

// The error for `bytes`, which must not decode.
std::string TreeError(const std::vector<uint8_t>& bytes) {
  auto d = snap::DecodeTree(bytes, "bad");
  if (d) return "decoded";
  CHECK(d.error().code == ErrorCode::kCorrupt);
  CHECK(d.error().message.rfind("tree bad: ", 0) == 0);
  return d.error().message;
}

TEST_CASE("format: malformed trees are errors, never crashes", "[format][tree]") {
  const auto good = Unhex(kFixedTreeHex);
  // Every proper prefix is short of something the count promised.
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(TreeError({good.begin(), good.begin() + n}) != "decoded");
  }
  auto longer = good;
  longer.push_back(0);
  CHECK(TreeError(longer) == "tree bad: trailing bytes");

  auto bad = good;
  bad[6] = 2;  // format version
  CHECK(TreeError(bad) == "tree bad: bad magic");
  // Offsets into the fixed vector: the first entry's kind byte, and its
  // content type byte after the 32-byte id.
  const size_t kind = 8 + 1 + 1 + 9, content = kind + 1 + 2 + 2 + 2 + 5 + 1 + 32;
  REQUIRE(good[kind] == 1);
  REQUIRE(good[content] == 1);
  for (uint8_t k : {0, 9, 255}) {
    bad = good;
    bad[kind] = k;
    CHECK(TreeError(bad) == "tree bad: bad entry kind");
  }
  for (uint8_t c : {0, 3, 4}) {  // only a chunk or a manifest is file content
    bad = good;
    bad[content] = c;
    CHECK(TreeError(bad) == "tree bad: bad content type");
  }
  // Counts far beyond the input are refused before anything is allocated.
  auto huge = Unhex("414554524545010affffffffffffffffff01");
  CHECK(TreeError(huge) == "tree bad: bad entry count");
  bad = good;
  const size_t nx = content + 1 + 1 + 1;  // after empty target and zero rdev
  REQUIRE(bad[nx] == 1);
  bad.erase(bad.begin() + nx);
  auto x = Unhex("ffffffffffffffffff01");
  bad.insert(bad.begin() + nx, x.begin(), x.end());
  CHECK(TreeError(bad) == "tree bad: truncated entry");

  // Well-formed bytes that break the tree's rules: names and order.
  auto with_names = [](std::vector<std::string> names) {
    snap::Tree t;
    for (auto& n : names) {
      t.emplace_back();
      t.back().name = n;
      t.back().kind = snap::Kind::kSymlink;
    }
    return snap::EncodeTree(t);
  };
  for (const char* name : {"", ".", "..", "a/b"}) {
    INFO(name);
    CHECK(TreeError(with_names({name})) == "tree bad: bad entry name");
  }
  CHECK(TreeError(with_names({std::string("a\0b", 3)})) == "tree bad: bad entry name");
  CHECK(TreeError(with_names({"b", "a"})) == "tree bad: entries not sorted");
  CHECK(TreeError(with_names({"a", "a"})) == "tree bad: entries not sorted");
  // Names are bytes: non-UTF-8 is fine.
  CHECK(TreeError(with_names({"\xff\xfe", "\xff\xff"})) == "decoded");
}

// ---------------------------------------------------------------- nodes

snap::Node FixedNode() {
  snap::Node n;
  n.tree = Filled(0x33);
  n.root = {0755, 0, 0, 1700000000123456789, {{"user.a", "1"}}};
  n.parent = Filled(0x44);
  n.time_ns = 1700000001000000000;
  n.message = "installed jq";
  n.label = "+1 usr/bin/jq";
  n.changes.added = 1;
  n.changes.modified = 2;
  n.changes.deleted = 0;
  n.changes.sample = {{'+', "usr/bin/jq", false}, {'M', "usr/bin", true}};
  n.links = {{"b", "a"}};
  n.files = 3;
  n.logical_bytes = 70000;
  return n;
}

const std::string kFixedNodeHex = std::string() +
    "41454e4f4445010a" +  // magic "AENODE\x01\n"
    std::string(64, '3') +  // root tree id
    // root metadata: 0755, 0:0, zigzag mtime, 1 xattr user.a=1
    "ed03" "00" "00" "aab4aed8c7bfce972f" "01" "06" "757365722e61" "01" "31"
    "01" + std::string(64, '4') +  // has a parent, its id
    "80a8a69ccebfce972f"                        // time 1700000001 s
    "0c" "696e7374616c6c6564206a71"             // message "installed jq"
    "0d" "2b31207573722f62696e2f6a71"           // label "+1 usr/bin/jq"
    "01" "02" "00"                              // added, modified, deleted
    "02"                                        // 2 samples: op, is_dir, path
    "2b" "00" "0a" "7573722f62696e2f6a71"       //   + usr/bin/jq
    "4d" "01" "07" "7573722f62696e"             //   M usr/bin/
    "01" "01" "62" "01" "61"                    // 1 link: b -> a
    "03"                                        // files
    "f0a204";                                   // logical bytes 70000

TEST_CASE("format: a node object's exact bytes and round trip", "[format][node]") {
  const snap::Node n = FixedNode();
  const auto bytes = snap::EncodeNode(n);
  CHECK(Hex(bytes) == kFixedNodeHex);
  auto d = snap::DecodeNode(Unhex(kFixedNodeHex), "fixed");
  INFO((d ? "" : d.error().message));
  REQUIRE(d);
  CHECK(d->tree == n.tree);
  CHECK(d->root == n.root);
  REQUIRE(d->parent);
  CHECK(*d->parent == *n.parent);
  CHECK(d->time_ns == n.time_ns);
  CHECK(d->message == n.message);
  CHECK(d->label == n.label);
  CHECK(d->changes.added == 1);
  CHECK(d->changes.modified == 2);
  CHECK(d->changes.deleted == 0);
  CHECK(d->changes.sample == n.changes.sample);
  CHECK(d->links == n.links);
  CHECK(d->files == 3);
  CHECK(d->logical_bytes == 70000);
  CHECK(*d == n);

  // The first node has no parent: one zero byte and no id.
  snap::Node first = n;
  first.parent.reset();
  auto fb = snap::EncodeNode(first);
  std::string want = kFixedNodeHex;
  const size_t at = 2 * (8 + 32 + 2 + 1 + 1 + 9 + 1 + 1 + 6 + 1 + 1);
  REQUIRE(want.substr(at, 66) == "01" + std::string(64, '4'));
  want.replace(at, 66, "00");
  CHECK(Hex(fb) == want);
  auto d2 = snap::DecodeNode(fb, "first");
  REQUIRE(d2);
  CHECK_FALSE(d2->parent);
  CHECK(*d2 == first);
}

TEST_CASE("format: malformed nodes are errors, never crashes", "[format][node]") {
  const auto good = Unhex(kFixedNodeHex);
  auto error = [](const std::vector<uint8_t>& b) {
    auto d = snap::DecodeNode(b, "bad");
    if (d) return std::string("decoded");
    CHECK(d.error().code == ErrorCode::kCorrupt);
    return d.error().message;
  };
  for (size_t n = 0; n < good.size(); ++n) {
    INFO("prefix of " << n << " bytes");
    CHECK(error({good.begin(), good.begin() + n}) == "node bad: malformed");
  }
  auto bad = good;
  bad.push_back(0);
  CHECK(error(bad) == "node bad: malformed");
  bad = good;
  bad[0] = 'X';
  CHECK(error(bad) == "node bad: malformed");
  // A sample count of 2^64-1 in place of 2: refused, not allocated.
  const std::string two = "01" "02" "00" "02" "2b";
  const size_t at = kFixedNodeHex.find(two);
  REQUIRE(at != std::string::npos);
  REQUIRE(at % 2 == 0);
  std::string hex = kFixedNodeHex;
  hex.replace(at + 6, 2, "ffffffffffffffffff01");
  CHECK(error(Unhex(hex)) == "node bad: malformed");
}

// ---------------------------------------------------------------- packs

// FNV-1a, 32 bits: the header check of docs/store-format.md.
uint32_t Fnv1a(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

store::RecordHeader FixedHeader() {
  store::RecordHeader h;
  h.type = ObjectType::kManifest;
  h.codec = store::Codec::kZstd;
  h.size = 1000000;
  h.stored_size = 123456;
  for (int i = 0; i < 32; ++i) h.id.bytes[i] = uint8_t(i);  // byte order shows
  return h;
}

// The table in docs/store-format.md, field by field.
const std::string kFixedHeaderHex = std::string() +
    "41454f42"                                  // 0  magic "AEOB"
    "01"                                        // 4  version 1
    "02"                                        // 5  type: manifest
    "01"                                        // 6  codec: zstd
    "00"                                        // 7
    "40420f0000000000"                          // 8  size 1000000
    "40e2010000000000"                          // 16 stored size 123456
    "000102030405060708090a0b0c0d0e0f"          // 24 object id
    "101112131415161718191a1b1c1d1e1f"
    "00000000"                                  // 56
    "ca559ce2";                                 // 60 FNV-1a of 0..59: 0xe29c55ca

using HeaderBytes = std::array<uint8_t, store::kRecordHeaderSize>;

Result<store::RecordHeader> Parse(const HeaderBytes& b) { return store::ParseRecordHeader(b); }

// `b` with bytes 60..63 made valid again after an edit.
HeaderBytes Resealed(HeaderBytes b) {
  uint32_t h = Fnv1a(b.data(), 60);
  for (int i = 0; i < 4; ++i) b[60 + i] = uint8_t(h >> (8 * i));
  return b;
}

TEST_CASE("format: pack record headers, exact bytes and every check", "[format][pack]") {
  const HeaderBytes b = store::EncodeRecordHeader(FixedHeader());
  CHECK(Hex(b) == kFixedHeaderHex);
  CHECK(Fnv1a(b.data(), 60) == 0xe29c55ca);  // the test's own FNV agrees with the vector
  auto h = Parse(b);
  INFO((h ? "" : h.error().message));
  REQUIRE(h);
  CHECK(h->type == ObjectType::kManifest);
  CHECK(h->codec == store::Codec::kZstd);
  CHECK(h->size == 1000000);
  CHECK(h->stored_size == 123456);
  CHECK(h->id == FixedHeader().id);

  auto error = [](const HeaderBytes& x) {
    auto r = Parse(x);
    if (r) return std::string("parsed");
    CHECK(r.error().code == ErrorCode::kCorrupt);
    return r.error().message;
  };
  // Any single flipped bit in 0..63 is caught, by the magic or the check.
  for (size_t i = 0; i < 64; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      HeaderBytes x = b;
      x[i] ^= uint8_t(1 << bit);
      INFO("byte " << i << " bit " << bit);
      std::string e = error(x);
      CHECK((e == "bad record magic" || e == "bad header check"));
      if (i < 4) CHECK(e == "bad record magic");
    }
  }
  // Fields the check covers but a newer or foreign writer could set.
  HeaderBytes x = b;
  x[4] = 2;
  CHECK(error(Resealed(x)) == "unknown record version");
  for (uint8_t t : {0, 5}) {
    x = b;
    x[5] = t;
    CHECK(error(Resealed(x)) == "unknown object type");
  }
  x = b;
  x[6] = 2;
  CHECK(error(Resealed(x)) == "unknown codec");
  // Raw payloads are the object itself: their two sizes must agree.
  store::RecordHeader raw = FixedHeader();
  raw.codec = store::Codec::kRaw;
  CHECK(error(store::EncodeRecordHeader(raw)) == "raw record with stored size != size");
  raw.stored_size = raw.size;
  auto ok = Parse(store::EncodeRecordHeader(raw));
  REQUIRE(ok);
  CHECK(ok->codec == store::Codec::kRaw);

  CHECK(store::PackPath("/s", 12) == "/s/packs/00000012.pack");
  CHECK(store::PackPath("/s", 4294967295u) == "/s/packs/4294967295.pack");
}

TEST_CASE("format: a pack scan finds records at 8-byte offsets and resynchronizes after damage",
          "[format][pack]") {
  // Three chunks of 5, 64 and 3 bytes; between the second and third, 16
  // bytes of garbage a torn write could leave.
  std::vector<uint8_t> pack;
  std::vector<uint64_t> at;
  auto add = [&](const std::string& payload) {
    while (pack.size() % 8) pack.push_back(0);
    at.push_back(pack.size());
    std::vector<uint8_t> p(payload.begin(), payload.end());
    store::RecordHeader h;
    h.size = h.stored_size = p.size();
    h.id = ObjectId::Of(p);
    auto hb = store::EncodeRecordHeader(h);
    pack.insert(pack.end(), hb.begin(), hb.end());
    pack.insert(pack.end(), p.begin(), p.end());
  };
  add("hello");
  add(std::string(64, 'x'));
  while (pack.size() % 8) pack.push_back(0);
  for (int i = 0; i < 16; ++i) pack.push_back(uint8_t(0xa0 + i));
  add("end");
  CHECK(at == std::vector<uint64_t>{0, 72, 216});
  CHECK(pack.size() == 283);

  TempDir t;
  const std::string path = t.str() + "/00000001.pack";
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    REQUIRE(fd);
    REQUIRE(::write(fd.get(), pack.data(), pack.size()) == ssize_t(pack.size()));
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd);
  for (bool payloads : {true, false}) {
    INFO("payloads " << payloads);
    std::vector<uint64_t> found;
    std::vector<std::string> payload;
    std::vector<std::pair<uint64_t, std::string>> damage;
    auto r = store::ScanPack(
        fd.get(), pack.size(),
        [&](const store::ScannedRecord& rec) -> Result<void> {
          found.push_back(rec.offset);
          payload.emplace_back(rec.payload.begin(), rec.payload.end());
          CHECK(rec.header.id.Hex().size() == 64);
          return {};
        },
        [&](uint64_t off, const std::string& what) -> Result<void> {
          damage.push_back({off, what});
          return {};
        },
        payloads);
    REQUIRE(r);
    CHECK(found == at);
    if (payloads) CHECK(payload == std::vector<std::string>{"hello", std::string(64, 'x'), "end"});
    // One report for the whole damaged stretch, at its start.
    REQUIRE(damage.size() == 1);
    CHECK(damage[0].first == 200);
    CHECK(damage[0].second == "bad record magic");
  }
  // A committed length that ends inside the second record: damage there,
  // and nothing after it is taken for a record.
  std::vector<uint64_t> found;
  std::vector<std::pair<uint64_t, std::string>> damage;
  auto r = store::ScanPack(
      fd.get(), 72 + 64 + 10,
      [&](const store::ScannedRecord& rec) -> Result<void> {
        found.push_back(rec.offset);
        return {};
      },
      [&](uint64_t off, const std::string& what) -> Result<void> {
        damage.push_back({off, what});
        return {};
      });
  REQUIRE(r);
  CHECK(found == std::vector<uint64_t>{0});
  REQUIRE(damage.size() == 1);
  CHECK(damage[0].first == 72);
  CHECK(damage[0].second == "record runs past the committed length");
}

TEST_CASE("format: manifests, exact bytes and every check", "[format][manifest]") {
  std::vector<store::ManifestEntry> m = {{Filled(0x66), 65536}, {Filled(0x77), 1000}};
  const auto bytes = store::EncodeManifest(m);
  CHECK(Hex(bytes) == std::string() +
                          "41454d46"          // "AEMF"
                          "01000000"          // u32 version 1
                          "e803010000000000"  // file size 66536
                          "0200000000000000"  // 2 chunks: id, u64 size
                          + std::string(64, '6') + "0000010000000000" + std::string(64, '7') +
                          "e803000000000000");
  auto d = store::DecodeManifest(bytes);
  REQUIRE(d);
  REQUIRE(d->size() == 2);
  CHECK((*d)[0].id == m[0].id);
  CHECK((*d)[0].size == 65536);
  CHECK((*d)[1].id == m[1].id);
  CHECK((*d)[1].size == 1000);
  CHECK(Hex(store::EncodeManifest({})) == "41454d4601000000" + std::string(32, '0'));

  auto error = [](std::vector<uint8_t> b) {
    auto r = store::DecodeManifest(b);
    if (r) return std::string("decoded");
    CHECK(r.error().code == ErrorCode::kCorrupt);
    return r.error().message;
  };
  auto bad = bytes;
  bad[0] = 'X';
  CHECK(error(bad) == "not a manifest");
  bad = bytes;
  bad[4] = 2;
  CHECK(error(bad) == "not a manifest");
  CHECK(error({bytes.begin(), bytes.begin() + 23}) == "not a manifest");
  for (size_t cut : {1, 8, 40}) {
    INFO(cut);
    CHECK(error({bytes.begin(), bytes.end() - cut}) == "manifest has the wrong length");
  }
  bad = bytes;
  bad[16] = 3;  // count 3 with two entries
  CHECK(error(bad) == "manifest has the wrong length");
  bad = bytes;
  bad[8] ^= 1;  // file size off by one
  CHECK(error(bad) == "manifest chunk sizes do not add up");
}

// ---------------------------------------------------------------- FastCDC

// Marsaglia's xorshift64, written out so the input never depends on a
// library's generator.
std::vector<uint8_t> Xorshift(size_t n, uint64_t x) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    for (size_t k = 0; k < 8 && i + k < n; ++k) v[i + k] = uint8_t(x >> (8 * k));
  }
  return v;
}

// End offsets of the chunks of `d`, cut as Batch::PutFile does: at most
// max_size bytes offered at a time, eof only for the last of them.
std::vector<uint64_t> Cuts(const store::FastCdc& cdc, const std::vector<uint8_t>& d) {
  std::vector<uint64_t> out;
  for (size_t off = 0; off < d.size();) {
    size_t avail = std::min<size_t>(d.size() - off, cdc.params().max_size);
    bool eof = off + avail == d.size();
    size_t cut = cdc.NextCut(d.data() + off, avail, eof);
    REQUIRE(cut > 0);
    REQUIRE(cut <= avail);
    // Offering everything that is left changes nothing: a cut depends on
    // the bytes up to max_size only.
    CHECK(cdc.NextCut(d.data() + off, d.size() - off, true) == cut);
    off += cut;
    out.push_back(off);
  }
  return out;
}

TEST_CASE("format: FastCDC cut points of a fixed input", "[format][fastcdc]") {
  const store::FastCdc cdc{store::ChunkerParams{}};
  REQUIRE(cdc.params().min_size == 16384);
  REQUIRE(cdc.params().avg_size == 65536);
  REQUIRE(cdc.params().max_size == 262144);
  const auto data = Xorshift(4 << 20, 0x2545F4914F6CDD1DULL);
  CHECK(Hex(std::span(data).first(8)) == "e7e3a8ea0b286c7f");  // the generator as written
  const std::vector<uint64_t> want = {
      70313,   151994,  224353,  292147,  431013,  515413,  582643,  640107,  709782,  783581,
      851184,  925453,  991611,  1070323, 1119750, 1233191, 1283134, 1353821, 1428647, 1497043,
      1604634, 1621104, 1703833, 1840162, 1888796, 1948496, 2026096, 2099856, 2171294, 2296219,
      2336795, 2363285, 2445535, 2489152, 2545455, 2618976, 2645837, 2715628, 2783383, 2805283,
      2890910, 2928894, 2996755, 3071661, 3137266, 3203520, 3270899, 3310658, 3395618, 3461826,
      3529207, 3605936, 3647802, 3701514, 3792280, 3823124, 3889599, 3963731, 4049938, 4123330,
      4194304};
  const auto cuts = Cuts(cdc, data);
  CHECK(cuts == want);
  uint64_t prev = 0;
  for (size_t i = 0; i < cuts.size(); ++i) {
    uint64_t len = cuts[i] - prev;
    prev = cuts[i];
    INFO("chunk " << i << " of " << len << " bytes");
    CHECK(len <= cdc.params().max_size);
    if (i + 1 < cuts.size()) CHECK(len >= cdc.params().min_size);
  }

  // Content-defined: 100 bytes inserted at the front move every cut by 100.
  std::vector<uint8_t> shifted(100 + data.size(), 7);
  std::copy(data.begin(), data.end(), shifted.begin() + 100);
  std::vector<uint64_t> moved;
  for (uint64_t c : want) moved.push_back(c + 100);
  CHECK(Cuts(cdc, shifted) == moved);
}

TEST_CASE("format: FastCDC bounds, max_size on input without cut points", "[format][fastcdc]") {
  const store::FastCdc cdc{store::ChunkerParams{}};
  // The gear hash of zeros never matches the mask: every chunk is max_size.
  CHECK(Cuts(cdc, std::vector<uint8_t>(1 << 20)) == std::vector<uint64_t>{262144, 524288, 786432, 1048576});
  // Up to min_size bytes are one chunk, never looked at.
  const auto data = Xorshift(16384 + 1, 1);
  CHECK(cdc.NextCut(data.data(), 1, true) == 1);
  CHECK(cdc.NextCut(data.data(), 16384, true) == 16384);
  CHECK(cdc.NextCut(data.data(), 16384 + 1, true) == 16384 + 1);
}

// ------------------------------------------------ node record package section

// A node record (snap/meta.h) as docs/store-format.md ("Node records")
// lays it out: seq, time, parent flag and id, tree, flags, changes, title,
// then the optional package section (tag 1).
constexpr char kRecordHex[] =
    "05"                                   // seq 5
    "aab4aed8c7bfce972f"                   // time 1700000000123456789 (zigzag)
    "01" "1111111111111111111111111111111111111111111111111111111111111111"  // parent
    "2222222222222222222222222222222222222222222222222222222222222222"       // tree
    "00"                                   // flags
    "03"                                   // changes
    "14" "617074202b6a7120312e363b20657865633a2078";  // title "apt +jq 1.6; exec: x"
constexpr char kPackagesHex[] =
    "01" "2d"                              // tag 1, 45 bytes
    "02"                                   // two items
    "01" "2b" "00" "026a71" "00" "03312e36" "00"  // apt '+' jq "" "1.6" ""
    "02" "7e" "01" "087265717565737473"    // pip '~' dependency requests
    "06322e33312e30" "06322e33322e33" "0173"  // "2.31.0" "2.32.3" where "s"
    "01" "03" "ac02";                      // omitted: npm 300

snap::NodeRecord FixedRecord(const ObjectId& id) {
  snap::NodeRecord r;
  r.id = id;
  r.seq = 5;
  r.time_ns = 1700000000123456789;
  r.parent = Filled(0x11);
  r.tree = Filled(0x22);
  r.changes = 3;
  r.title = "apt +jq 1.6; exec: x";
  snap::PackageDeltas p;
  p.items = {{snap::Ecosystem::kApt, '+', "jq", "", "1.6", "", false},
             {snap::Ecosystem::kPip, '~', "requests", "2.31.0", "2.32.3", "s", true}};
  p.omitted[snap::Ecosystem::kNpm] = 300;
  r.packages = p;
  return r;
}

// The nodes table of the metadata index at `dir`, read and written raw.
struct RawNodes {
  explicit RawNodes(const std::string& dir) {
    REQUIRE(mdb_env_create(&env) == 0);
    REQUIRE(mdb_env_set_maxdbs(env, 16) == 0);
    REQUIRE(mdb_env_open(env, dir.c_str(), MDB_NOTLS, 0644) == 0);
    REQUIRE(mdb_txn_begin(env, nullptr, 0, &txn) == 0);
    REQUIRE(mdb_dbi_open(txn, "nodes", 0, &dbi) == 0);
  }
  ~RawNodes() {
    if (txn) mdb_txn_abort(txn);
    mdb_env_close(env);
  }
  std::string Get(const ObjectId& id) {
    MDB_val k{32, const_cast<uint8_t*>(id.bytes.data())}, v;
    REQUIRE(mdb_get(txn, dbi, &k, &v) == 0);
    return Hex({static_cast<const uint8_t*>(v.mv_data), v.mv_size});
  }
  void Put(const ObjectId& id, const std::string& hex) {
    auto b = Unhex(hex);
    MDB_val k{32, const_cast<uint8_t*>(id.bytes.data())}, v{b.size(), b.data()};
    REQUIRE(mdb_put(txn, dbi, &k, &v, 0) == 0);
  }
  void Commit() {
    REQUIRE(mdb_txn_commit(txn) == 0);
    txn = nullptr;
  }
  MDB_env* env = nullptr;
  MDB_txn* txn = nullptr;
  MDB_dbi dbi = 0;
};

TEST_CASE("format: a node record's package section, exact bytes, older records and unknown sections",
          "[format][meta][packages]") {
  TempDir t;
  const std::string dir = t.str() + "/meta";
  const ObjectId with = Filled(0xa1), without = Filled(0xa2), skipping = Filled(0xa3), cut = Filled(0xa4),
                 lying = Filled(0xa5);
  {
    auto db = snap::MetaDb::Open(dir, true);
    REQUIRE(db);
    auto txn = (*db)->Begin();
    REQUIRE(txn);
    REQUIRE((*txn)->PutNode(FixedRecord(with)));
    snap::NodeRecord old = FixedRecord(without);
    old.seq = 6;
    old.packages.reset();
    REQUIRE((*txn)->PutNode(old));
    REQUIRE((*txn)->Commit());
  }
  {
    RawNodes raw(dir);
    CHECK(raw.Get(with) == std::string(kRecordHex) + kPackagesHex);
    // Without packages the record ends at the title, as every older binary
    // wrote it; older decoders stop there and never see a section.
    CHECK(raw.Get(without) == std::string("06") + (kRecordHex + 2));
    // An unknown section (tag 7) before it is skipped.
    raw.Put(skipping, std::string(kRecordHex) + "0703aabbcc" + kPackagesHex);
    // A section longer than the record, and a count the bytes cannot hold.
    std::string p = kPackagesHex;
    raw.Put(cut, std::string(kRecordHex) + p.substr(0, p.size() - 2));
    raw.Put(lying, std::string(kRecordHex) + "0103" + "ff7f00");
    raw.Commit();
  }
  auto db = snap::MetaDb::Open(dir, false);
  REQUIRE(db);
  auto a = (*db)->GetNode(with);
  REQUIRE(a);
  REQUIRE(*a);
  REQUIRE((*a)->packages);
  CHECK(*(*a)->packages == *FixedRecord(with).packages);
  CHECK((*a)->title == "apt +jq 1.6; exec: x");
  auto b = (*db)->GetNode(without);
  REQUIRE(b);
  REQUIRE(*b);
  CHECK_FALSE((*b)->packages);  // not recorded: unknown, not "none"
  auto c = (*db)->GetNode(skipping);
  REQUIRE(c);
  REQUIRE(*c);
  REQUIRE((*c)->packages);
  CHECK(*(*c)->packages == *FixedRecord(with).packages);
  for (const ObjectId& bad : {cut, lying}) {
    auto r = (*db)->GetNode(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kCorrupt);
  }
}

TEST_CASE("format: package deltas decode only what they encode, never past the bytes", "[format][packages]") {
  auto b = Unhex(std::string(kPackagesHex).substr(4));  // the section's payload
  snap::ByteReader r(b);
  snap::PackageDeltas d;
  REQUIRE(snap::DecodePackageDeltas(r, b.size(), &d));
  CHECK(r.done());
  snap::ByteWriter w;
  snap::EncodePackageDeltas(w, d);
  CHECK(Hex(std::move(w).bytes()) == std::string(kPackagesHex).substr(4));
  for (size_t n = 0; n < b.size(); ++n) {
    std::vector<uint8_t> cut(b.begin(), b.begin() + long(n));
    snap::ByteReader rc(cut);
    snap::PackageDeltas x;
    CHECK_FALSE((snap::DecodePackageDeltas(rc, cut.size(), &x) && rc.done()));
  }
  // A count of 2^62 items is refused before anything is allocated.
  auto huge = Unhex("80808080808080804000");
  snap::ByteReader rh(huge);
  CHECK_FALSE(snap::DecodePackageDeltas(rh, huge.size(), &d));
}

}  // namespace
}  // namespace agentenv::test
