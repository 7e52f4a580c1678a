// Package deltas as text (labels) and as bytes (the node record's package
// section); see packages.h.
#include <algorithm>

#include "snap/packages.h"

namespace agentenv::snap {
namespace {

// Names and versions in a label: long ones cut at a character boundary.
constexpr size_t kLabelName = 48, kLabelVersion = 32, kLabelPath = 64;

std::string Short(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max - 1;
  while (cut > 0 && (uint8_t(s[cut]) >> 6) == 2) --cut;  // not inside a UTF-8 sequence
  return std::string(s.substr(0, cut)) + "…";
}

std::string Item(const PackageDelta& d) {
  std::string out(1, d.op);
  out += Short(d.name, kLabelName);
  auto ver = [&](const std::string& v) {
    if (!v.empty()) out += " " + Short(v, kLabelVersion);
  };
  switch (d.op) {
    case '-': ver(d.old_version); break;
    case '~':
      ver(d.old_version);
      out += " ->";
      ver(d.new_version);
      break;
    case '!':
      ver(d.new_version);
      out += " (unfinished)";
      break;
    default: ver(d.new_version); break;
  }
  return out;
}

// "+12 -1": how many of `items` each op has.
std::string Counts(std::span<const PackageDelta* const> items) {
  std::string out;
  for (char op : {'+', '~', '-', '!'}) {
    size_t n = size_t(std::count_if(items.begin(), items.end(), [&](const PackageDelta* d) { return d->op == op; }));
    if (!n) continue;
    if (!out.empty()) out += ' ';
    out += op + std::to_string(n);
  }
  return out;
}

std::string GitSegment(std::span<const PackageDelta* const> items, uint64_t omitted, size_t room) {
  std::string out;
  for (char op : {'+', '-'}) {
    std::vector<std::string> paths;
    for (const PackageDelta* d : items)
      if (d->op == op) paths.push_back("/" + Short(d->where, kLabelPath));
    if (paths.empty()) continue;
    std::string seg = std::string(op == '+' ? "new git repo" : "removed git repo") + (paths.size() > 1 ? "s" : "");
    size_t shown = 0;
    for (const std::string& p : paths) {
      if (shown && out.size() + seg.size() + p.size() + 2 > room) break;
      seg += (shown++ ? ", " : " ") + p;
    }
    if (shown < paths.size()) seg += " (" + std::to_string(paths.size() - shown) + " more)";
    out += (out.empty() ? "" : "; ") + seg;
  }
  if (omitted) out += (out.empty() ? "git repos (" : " (") + std::to_string(omitted) + " more)";
  return out;
}

}  // namespace

std::string_view EcosystemName(Ecosystem e) {
  switch (e) {
    case Ecosystem::kApt: return "apt";
    case Ecosystem::kPip: return "pip";
    case Ecosystem::kNpm: return "npm";
    case Ecosystem::kGit: return "git";
  }
  return "other";
}

std::string PackageLabel(const PackageDeltas& d) {
  std::map<Ecosystem, std::vector<const PackageDelta*>> by;
  for (const PackageDelta& x : d.items) by[x.ecosystem].push_back(&x);
  for (const auto& [e, n] : d.omitted) by[e];
  std::string out;
  for (const auto& [e, items] : by) {
    auto om = d.omitted.find(e);
    uint64_t omitted = om == d.omitted.end() ? 0 : om->second;
    size_t used = out.empty() ? 0 : out.size() + 2;
    size_t room = kMaxLabelPrefix > used ? kMaxLabelPrefix - used : 0;
    std::string seg;
    if (e == Ecosystem::kGit) {
      seg = GitSegment(items, omitted, room);
    } else {
      std::vector<const PackageDelta*> asked, deps;
      for (const PackageDelta* x : items) (x->dependency ? deps : asked).push_back(x);
      seg = std::string(EcosystemName(e));
      size_t shown = 0;
      for (const PackageDelta* x : asked) {
        std::string piece = " " + Item(*x);
        if (seg.size() + piece.size() > room && (shown || used)) break;
        seg += piece;
        ++shown;
      }
      uint64_t more = asked.size() - shown + omitted;
      std::string dep_names;
      for (const PackageDelta* x : deps) dep_names += " " + std::string(1, x->op) + Short(x->name, kLabelName);
      if (!deps.empty() && more == 0 && deps.size() <= 3 && seg.size() + dep_names.size() <= room) {
        seg += dep_names;
      } else if (!deps.empty()) {
        seg += " (" + Counts(deps) + " deps)";
      }
      if (more) seg += shown || !deps.empty() ? " (" + std::to_string(more) + " more)" : " (" + std::to_string(more) + " changes)";
    }
    if (seg.empty()) continue;
    out += (out.empty() ? "" : "; ") + seg;
  }
  return out;
}

std::string LeadWithPackages(const PackageDeltas& d, std::string_view label) {
  std::string prefix = PackageLabel(d);
  if (prefix.empty()) return std::string(label);
  if (label.empty() || label == prefix || label.starts_with(prefix + "; ")) return label.empty() ? prefix : std::string(label);
  return prefix + "; " + std::string(label);
}

std::string_view WithoutPackages(std::string_view title, const PackageDeltas& d) {
  std::string prefix = PackageLabel(d);
  if (prefix.empty()) return title;
  if (title == prefix) return {};
  if (title.starts_with(prefix + "; ")) return title.substr(prefix.size() + 2);
  return title;
}

void EncodePackageDeltas(ByteWriter& w, const PackageDeltas& d) {
  w.Var(d.items.size());
  for (const PackageDelta& x : d.items) {
    w.U8(uint8_t(x.ecosystem));
    w.U8(uint8_t(x.op));
    w.U8(x.dependency ? 1 : 0);
    w.Str(x.name);
    w.Str(x.old_version);
    w.Str(x.new_version);
    w.Str(x.where);
  }
  w.Var(d.omitted.size());
  for (const auto& [e, n] : d.omitted) {
    w.U8(uint8_t(e));
    w.Var(n);
  }
}

bool DecodePackageDeltas(ByteReader& r, size_t max_items, PackageDeltas* d) {
  constexpr size_t kItemMin = 7;  // three bytes and four empty strings
  uint64_t n;
  if (!r.Var(&n) || n > max_items || n > r.remaining() / kItemMin) return false;
  d->items.resize(size_t(n));
  for (PackageDelta& x : d->items) {
    uint8_t e, op, flags;
    if (!r.U8(&e) || !r.U8(&op) || !r.U8(&flags) || !r.Str(&x.name) || !r.Str(&x.old_version) ||
        !r.Str(&x.new_version) || !r.Str(&x.where))
      return false;
    x.ecosystem = Ecosystem(e);
    x.op = char(op);
    x.dependency = flags & 1;  // other bits: meanings a newer binary may add
  }
  uint64_t m;
  if (!r.Var(&m) || m > 256) return false;
  for (uint64_t i = 0; i < m; ++i) {
    uint8_t e;
    uint64_t count;
    if (!r.U8(&e) || !r.Var(&count)) return false;
    d->omitted[Ecosystem(e)] = count;
  }
  return true;
}

}  // namespace agentenv::snap
