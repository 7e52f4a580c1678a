#include "snap/node.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "snap/varint.h"

namespace agentenv::snap {
namespace {

constexpr char kMagic[8] = {'A', 'E', 'N', 'O', 'D', 'E', '\x01', '\n'};

void PutMeta(ByteWriter& w, const Meta& m) {
  w.Var(m.mode);
  w.Var(m.uid);
  w.Var(m.gid);
  w.Signed(m.mtime_ns);
  w.Pairs(m.xattrs);
}

bool GetMeta(ByteReader& r, Meta* m, size_t limit) {
  uint64_t mode, uid, gid;
  if (!r.Var(&mode) || !r.Var(&uid) || !r.Var(&gid) || !r.Signed(&m->mtime_ns)) return false;
  m->mode = uint32_t(mode);
  m->uid = uint32_t(uid);
  m->gid = uint32_t(gid);
  return r.Pairs(&m->xattrs, limit);
}

std::string_view Dirname(std::string_view p) {
  size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
}

}  // namespace

std::vector<uint8_t> EncodeNode(const Node& n) {
  ByteWriter w;
  w.Raw(kMagic, sizeof kMagic);
  w.Raw(n.tree.bytes.data(), 32);
  PutMeta(w, n.root);
  w.U8(n.parent ? 1 : 0);
  if (n.parent) w.Raw(n.parent->bytes.data(), 32);
  w.Signed(n.time_ns);
  w.Str(n.message);
  w.Str(n.label);
  w.Var(n.changes.added);
  w.Var(n.changes.modified);
  w.Var(n.changes.deleted);
  w.Var(n.changes.sample.size());
  for (const Change& c : n.changes.sample) {
    w.U8(uint8_t(c.op));
    w.U8(c.is_dir ? 1 : 0);
    w.Str(c.path);
  }
  w.Var(n.links.size());
  for (const auto& [path, first] : n.links) {
    w.Str(path);
    w.Str(first);
  }
  w.Var(n.files);
  w.Var(n.logical_bytes);
  return std::move(w).bytes();
}

Result<Node> DecodeNode(std::span<const uint8_t> bytes, std::string_view what) {
  auto corrupt = [&] { return Fail(ErrorCode::kCorrupt, "node " + std::string(what) + ": malformed"); };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return corrupt();
  ByteReader r(bytes.subspan(sizeof kMagic));
  Node n;
  uint8_t has_parent = 0;
  if (!r.Raw(n.tree.bytes.data(), 32) || !GetMeta(r, &n.root, bytes.size()) || !r.U8(&has_parent))
    return corrupt();
  if (has_parent) {
    store::ObjectId p;
    if (!r.Raw(p.bytes.data(), 32)) return corrupt();
    n.parent = p;
  }
  uint64_t samples, links;
  if (!r.Signed(&n.time_ns) || !r.Str(&n.message) || !r.Str(&n.label) ||
      !r.Var(&n.changes.added) || !r.Var(&n.changes.modified) || !r.Var(&n.changes.deleted) ||
      !r.Var(&samples) || samples > bytes.size())
    return corrupt();
  n.changes.sample.resize(samples);
  for (Change& c : n.changes.sample) {
    uint8_t op, dir;
    if (!r.U8(&op) || !r.U8(&dir) || !r.Str(&c.path)) return corrupt();
    c.op = char(op);
    c.is_dir = dir != 0;
  }
  if (!r.Var(&links) || links > bytes.size()) return corrupt();
  n.links.resize(links);
  for (auto& [path, first] : n.links) {
    if (!r.Str(&path) || !r.Str(&first)) return corrupt();
  }
  if (!r.Var(&n.files) || !r.Var(&n.logical_bytes) || !r.done()) return corrupt();
  return n;
}

Result<Node> LoadNode(const store::Store& s, const store::ObjectId& id) {
  AE_ASSIGN(auto bytes, s.Get(id));
  return DecodeNode(bytes, id.Hex());
}

namespace {

constexpr size_t kMaxGroups = 3;  // groups a label names
// Beyond this many rounds of moving up a level, groups stay as they are.
constexpr size_t kMaxRounds = 64;

size_t Depth(std::string_view p) { return size_t(std::count(p.begin(), p.end(), '/')); }

// `p` cut to `level` directory levels (-1: the root, "").
std::string_view Cut(std::string_view p, int level) {
  if (level < 0) return {};
  while (Depth(p) > size_t(level)) p = Dirname(p);
  return p;
}

// One round of moving the deepest groups up one directory level, merging
// the groups that meet. False (and `groups` unchanged) when nothing is
// left to merge: every group is at the root already.
template <typename Groups>
bool MoveUp(Groups& groups, size_t* deepest_out) {
  Groups up;
  size_t deepest = 0;
  for (const auto& [k, g] : groups) deepest = std::max(deepest, Depth(k.second));
  for (const auto& [k, g] : groups) {
    std::string key = Depth(k.second) == deepest && !k.second.empty() ? std::string(Dirname(k.second)) : k.second;
    auto& to = up[{k.first, key}];
    if (to.n == 0) to.example = g.example;
    to.n += g.n;
  }
  *deepest_out = deepest;
  if (up.size() == groups.size() && deepest == 0) return false;
  groups = std::move(up);
  return true;
}

}  // namespace

void ChangeTally::Grouping::Add(const Change& c) {
  ++total;
  max_depth = std::max(max_depth, Depth(c.path));
  std::string key(level == -2 ? std::string_view(c.path) : Cut(c.path, level));
  Group& g = groups[{c.op, std::move(key)}];
  if (g.n++ == 0) g.example = c.path.empty() ? "." : c.path;
  while (groups.size() > kMaxKept) {
    size_t deepest;
    if (!MoveUp(groups, &deepest)) break;
    level = int(deepest) - 1;
  }
}

void ChangeTally::Add(const Change& c) {
  (c.op == '+' ? summary_.added : c.op == '-' ? summary_.deleted : summary_.modified)++;
  if (summary_.sample.size() < ChangeSummary::kSampleSize) summary_.sample.push_back(c);
  (c.is_dir && c.op == 'M' ? dirs_ : named_).Add(c);
}

std::string ChangeTally::Label() const {
  const Grouping& from = named_.total ? named_ : dirs_;
  if (from.total == 0) return "";
  // Group by (op, directory); while there are too many groups, move every
  // group up one directory level so related changes merge. A group of one
  // keeps its own path.
  Groups groups = from.groups;
  // Rounds Add already did: the ones from the deepest path down to `level`.
  size_t done = from.level == -2 ? 0 : size_t(int64_t(from.max_depth) - from.level);
  for (size_t round = done; groups.size() > kMaxGroups && round < kMaxRounds; ++round) {
    size_t deepest;
    if (!MoveUp(groups, &deepest)) break;
  }
  std::vector<std::pair<uint64_t, std::pair<char, std::string>>> order;
  for (const auto& [k, g] : groups) order.push_back({g.n, k});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (size_t i = 0; i < order.size() && i < kMaxGroups; ++i) {
    const auto& [n, k] = order[i];
    if (!out.empty()) out += ", ";
    out += k.first;
    if (n > 1) out += std::to_string(n) + " " + (k.second.empty() ? std::string(".") : k.second) + "/…";
    else out += " " + groups.at(k).example;
  }
  if (order.size() > kMaxGroups) out += ", …";
  // The counts are the node's own (directories included), so the title a
  // model reads agrees with what `show` and `log` count.
  if (summary_.total() == 1) return out;
  return "+" + std::to_string(summary_.added) + " ~" + std::to_string(summary_.modified) + " -" +
         std::to_string(summary_.deleted) + ": " + out;
}

ChangeSummary Summarize(std::span<const Change> all) {
  ChangeSummary s;
  for (const Change& c : all) {
    (c.op == '+' ? s.added : c.op == '-' ? s.deleted : s.modified)++;
    if (s.sample.size() < ChangeSummary::kSampleSize) s.sample.push_back(c);
  }
  return s;
}

std::string SummaryLabel(std::span<const Change> all) {
  ChangeTally t;
  for (const Change& c : all) t.Add(c);
  return t.Label();
}

}  // namespace agentenv::snap
