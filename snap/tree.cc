#include "snap/tree.h"

#include <cstring>

#include "snap/varint.h"

namespace agentenv::snap {
namespace {

constexpr char kMagic[8] = {'A', 'E', 'T', 'R', 'E', 'E', '\x01', '\n'};

bool HasId(Kind k) { return k == Kind::kFile || k == Kind::kDir; }

}  // namespace

std::string_view KindName(Kind k) {
  switch (k) {
    case Kind::kFile: return "file";
    case Kind::kDir: return "dir";
    case Kind::kSymlink: return "symlink";
    case Kind::kHardlink: return "hardlink";
    case Kind::kFifo: return "fifo";
    case Kind::kChar: return "char";
    case Kind::kBlock: return "block";
    case Kind::kSocket: return "socket";
  }
  return "?";
}

std::vector<uint8_t> EncodeTree(const Tree& t) {
  // Sized for the worst case once, written without checks, cut to size.
  constexpr size_t kVar = SpanWriter::kMaxVar;
  size_t bound = sizeof kMagic + kVar;
  for (const Entry& e : t) {
    // name, kind, mode, uid, gid, mtime, size, id, content, target, rdev, xattrs
    bound += kVar + e.name.size() + 1 + 5 * kVar + 32 + 1 + kVar + e.target.size() + 2 * kVar;
    for (const auto& [k, v] : e.meta.xattrs) bound += 2 * kVar + k.size() + v.size();
  }
  std::vector<uint8_t> out(bound);
  SpanWriter w(out.data());
  w.Raw(kMagic, sizeof kMagic);
  w.Var(t.size());
  for (const Entry& e : t) {
    w.Str(e.name);
    w.U8(uint8_t(e.kind));
    w.Var(e.meta.mode);
    w.Var(e.meta.uid);
    w.Var(e.meta.gid);
    w.Signed(e.meta.mtime_ns);
    w.Var(e.size);
    if (HasId(e.kind)) w.Raw(e.id.bytes.data(), 32);
    if (e.kind == Kind::kFile) w.U8(uint8_t(e.content));
    w.Str(e.target);
    w.Var(e.rdev);
    w.Pairs(e.meta.xattrs);
  }
  out.resize(size_t(w.at() - out.data()));
  return out;
}

Result<Tree> DecodeTree(std::span<const uint8_t> bytes, std::string_view what) {
  auto corrupt = [&](const char* why) {
    return Fail(ErrorCode::kCorrupt, "tree " + std::string(what) + ": " + why);
  };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return corrupt("bad magic");
  ByteReader r(bytes.subspan(sizeof kMagic));
  uint64_t n = 0;
  if (!r.Var(&n) || n > bytes.size()) return corrupt("bad entry count");
  Tree t(n);
  for (Entry& e : t) {
    uint8_t kind = 0;
    uint64_t mode, uid, gid, nx;
    if (!r.Str(&e.name) || !r.U8(&kind) || !r.Var(&mode) || !r.Var(&uid) || !r.Var(&gid) ||
        !r.Signed(&e.meta.mtime_ns) || !r.Var(&e.size))
      return corrupt("truncated entry");
    if (kind < 1 || kind > 8) return corrupt("bad entry kind");
    e.kind = Kind(kind);
    e.meta.mode = uint32_t(mode);
    e.meta.uid = uint32_t(uid);
    e.meta.gid = uint32_t(gid);
    if (HasId(e.kind) && !r.Raw(e.id.bytes.data(), 32)) return corrupt("truncated id");
    if (e.kind == Kind::kFile) {
      uint8_t c = 0;
      if (!r.U8(&c)) return corrupt("truncated entry");
      if (c != uint8_t(store::ObjectType::kChunk) && c != uint8_t(store::ObjectType::kManifest))
        return corrupt("bad content type");
      e.content = store::ObjectType(c);
    }
    if (!r.Str(&e.target) || !r.Var(&e.rdev) || !r.Var(&nx) || nx > bytes.size())
      return corrupt("truncated entry");
    e.meta.xattrs.resize(nx);
    for (auto& [k, v] : e.meta.xattrs) {
      if (!r.Str(&k) || !r.Str(&v)) return corrupt("truncated xattr");
    }
    if (e.name.empty() || e.name.find('/') != std::string::npos ||
        e.name.find('\0') != std::string::npos || e.name == "." || e.name == "..")
      return corrupt("bad entry name");
  }
  for (size_t i = 1; i < t.size(); ++i) {
    if (!(t[i - 1].name < t[i].name)) return corrupt("entries not sorted");
  }
  if (!r.done()) return corrupt("trailing bytes");
  return t;
}

Result<Tree> LoadTree(const store::Store& s, const store::ObjectId& id) {
  AE_ASSIGN(auto bytes, s.Get(id));
  return DecodeTree(bytes, id.Hex());
}

const store::ObjectId& EmptyTreeId() {
  static const store::ObjectId id = store::ObjectId::Of(EncodeTree({}));
  return id;
}

}  // namespace agentenv::snap
