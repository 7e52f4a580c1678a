// PackageWatch: the paths of a diff that name package databases, and the
// deltas read from them (see packages.h). Labels and the byte format are
// in package_label.cc.
#include "snap/packages.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "snap/package_parse.h"
#include "store/manifest.h"

namespace agentenv::snap {
namespace {

constexpr std::string_view kDpkgStatus = "var/lib/dpkg/status";
constexpr std::string_view kAptExtendedStates = "var/lib/apt/extended_states";
// METADATA headers come first; a long description after them is not needed.
constexpr size_t kMetadataPrefix = 64 * 1024;

std::string_view Last(std::string_view p) {
  size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

std::string_view Parent(std::string_view p) {
  size_t slash = p.rfind('/');
  return slash == std::string_view::npos ? std::string_view() : p.substr(0, slash);
}

bool EndsWith(std::string_view s, std::string_view tail) { return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail; }

bool HasComponent(std::string_view path, std::string_view name) {
  for (size_t at = 0; at <= path.size();) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    if (path.substr(at, slash - at) == name) return true;
    at = slash + 1;
  }
  return false;
}

// usr/lib/python3/dist-packages, usr/lib/python3.11/dist-packages: where
// Debian's own python3-* packages live (apt reports those).
bool DistributionOwned(std::string_view site) {
  return Last(site) == "dist-packages" && Parent(Parent(site)) == "usr/lib" &&
         Last(Parent(site)).starts_with("python");
}

std::optional<PackageWatch::Ref> RefOf(const Entry* e) {
  if (!e) return std::nullopt;
  return PackageWatch::Ref{e->kind, e->id, e->content, e->size};
}

// Reads file content through `objects`: all of it (whole; nullopt when it
// is over `max`), or its first `max` bytes. nullopt when unreadable.
std::optional<std::string> ReadContent(const ObjectLoader& objects, const PackageWatch::Ref& f, size_t max,
                                       bool whole) {
  if (f.kind != Kind::kFile || (whole && f.size > max)) return std::nullopt;
  std::string out;
  auto append = [&](const std::vector<uint8_t>& b) {
    size_t n = std::min(b.size(), max - out.size());
    out.append(reinterpret_cast<const char*>(b.data()), n);
  };
  auto first = objects(f.id);
  if (!first) return std::nullopt;
  if (f.content == store::ObjectType::kChunk) {
    if (first->size() != f.size) return std::nullopt;
    append(*first);
    return out;
  }
  auto chunks = store::DecodeManifest(*first);
  if (!chunks) return std::nullopt;
  for (const store::ManifestEntry& c : *chunks) {
    if (out.size() >= max) break;
    auto b = objects(c.id);
    if (!b || b->size() != c.size) return std::nullopt;
    append(*b);
  }
  if (whole && out.size() != f.size) return std::nullopt;
  return out;
}

// The entry at tree-relative `path` below `root`, if any.
std::optional<Entry> Find(const TreeLoader& trees, const store::ObjectId& root, std::string_view path) {
  store::ObjectId dir = root;
  for (size_t at = 0;;) {
    size_t slash = path.find('/', at);
    std::string_view name = path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
    auto t = trees(dir);
    if (!t) return std::nullopt;
    auto it = std::lower_bound(t->begin(), t->end(), name, [](const Entry& e, std::string_view n) { return e.name < n; });
    if (it == t->end() || it->name != name) return std::nullopt;
    if (slash == std::string_view::npos) return std::move(*it);
    if (it->kind != Kind::kDir) return std::nullopt;
    dir = it->id;
    at = slash + 1;
  }
}

// Bytes the agent wrote, as text fit for a label and JSON: valid UTF-8,
// control characters and invalid bytes as '?'.
std::string Printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = uint8_t(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 1 && (c < 0x20 || c == 0x7f));
    for (size_t k = 1; ok && k < n; ++k) ok = (uint8_t(s[i + k]) >> 6) == 2;
    if (ok && n == 2) ok = c >= 0xc2;  // no overlong forms
    if (ok && n == 3) {
      auto c1 = uint8_t(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);  // overlong, surrogates
    }
    if (ok && n == 4) {
      auto c1 = uint8_t(s[i + 1]);
      ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

// A name or version for a delta: printable, at most kMaxPackageField bytes.
std::string Text(std::string_view s) { return Printable(s.substr(0, kMaxPackageField)); }

// ---- apt

void AptDeltas(const DpkgStatus& old, const DpkgStatus& now, const std::set<std::string>& auto_installed,
               std::vector<PackageDelta>* out) {
  // The native architecture: the most common one of the packages that
  // have one; others are named "name:arch".
  std::map<std::string_view, size_t> arches;
  for (const auto* db : {&now, &old})
    for (const auto& [key, p] : *db)
      if (!p.arch.empty() && p.arch != "all") arches[p.arch]++;
  std::string_view native;
  size_t most = 0;
  for (const auto& [a, n] : arches)
    if (n > most) native = a, most = n;
  auto name = [&](const DpkgPackage& p) {
    return Text(p.arch.empty() || p.arch == "all" || p.arch == native ? p.name : p.name + ":" + p.arch);
  };
  auto on_disk = [](DpkgState s) { return s == DpkgState::kInstalled || s == DpkgState::kUnfinished; };
  static const DpkgPackage kAbsent;
  std::set<std::string_view> keys;
  for (const auto* db : {&old, &now})
    for (const auto& [key, p] : *db) keys.insert(key);
  for (std::string_view key : keys) {
    auto o = old.find(std::string(key)), n = now.find(std::string(key));
    const DpkgPackage& was = o == old.end() ? kAbsent : o->second;
    const DpkgPackage& is = n == now.end() ? kAbsent : n->second;
    PackageDelta d;
    d.ecosystem = Ecosystem::kApt;
    if (is.state == DpkgState::kInstalled && was.state != DpkgState::kInstalled) {
      d.op = '+';
      d.new_version = Text(is.version);
      // apt records an Architecture: all package under the native one.
      d.dependency = auto_installed.count(std::string(key)) > 0 ||
                     (is.arch == "all" && auto_installed.count(is.name + ":" + std::string(native)) > 0);
    } else if (is.state == DpkgState::kInstalled && was.version != is.version) {
      d.op = '~';
      d.old_version = Text(was.version);
      d.new_version = Text(is.version);
    } else if (is.state == DpkgState::kUnfinished && (was.state != DpkgState::kUnfinished || was.version != is.version)) {
      d.op = '!';
      if (was.state == DpkgState::kInstalled) d.old_version = Text(was.version);
      d.new_version = Text(is.version);
    } else if (!on_disk(is.state) && on_disk(was.state)) {
      d.op = '-';
      d.old_version = Text(was.version);
    } else {
      continue;
    }
    d.name = name(is.name.empty() ? was : is);
    out->push_back(std::move(d));
  }
}

// ---- pip

struct PyDist {
  std::string name, normalized, version;
  bool requested = false;
};

// A distribution directory's (or egg-info file's) name and version.
PyDist ReadPyDist(const TreeLoader& trees, const ObjectLoader& objects, std::string_view dirname,
                  const PackageWatch::Ref& ref, uint64_t* budget) {
  PyDist d;
  bool egg = EndsWith(dirname, ".egg-info");
  std::optional<PackageWatch::Ref> meta;
  if (ref.kind == Kind::kFile && egg) {
    meta = ref;  // an egg-info file is its PKG-INFO
  } else if (ref.kind == Kind::kDir) {
    if (auto t = trees(ref.id)) {
      for (const Entry& e : *t) {
        if (e.name == (egg ? "PKG-INFO" : "METADATA")) meta = RefOf(&e);
        if (e.name == "REQUESTED") d.requested = true;
      }
    }
  }
  if (meta && *budget >= std::min<uint64_t>(meta->size, kMetadataPrefix)) {
    *budget -= std::min<uint64_t>(meta->size, kMetadataPrefix);
    if (auto text = ReadContent(objects, *meta, kMetadataPrefix, false)) {
      if (auto m = ParsePyMetadata(*text)) d.name = m->name, d.version = m->version;
    }
  }
  if (d.name.empty()) {
    // "name-1.0.dist-info", "name-1.0-py3.11.egg-info": the name has no '-'
    // (the specification escapes it to '_').
    std::string_view stem = dirname.substr(0, dirname.size() - (egg ? 9 : 10));
    size_t dash = stem.find('-');
    d.name = stem.substr(0, dash);
    if (dash != std::string_view::npos) {
      std::string_view rest = stem.substr(dash + 1);
      d.version = rest.substr(0, rest.find('-'));
    }
  }
  d.normalized = NormalizePyName(d.name);
  d.name = Text(d.name);
  d.version = Text(d.version);
  return d;
}

void PipDeltas(const std::vector<PackageWatch::Seen>& seen, const TreeLoader& trees, const ObjectLoader& objects,
               uint64_t* budget, std::vector<PackageDelta>* out) {
  struct Pair {
    std::optional<PyDist> gone, came;
  };
  std::map<std::pair<std::string, std::string>, Pair> by_name;  // (site-packages, normalized name)
  std::set<std::string> asking;  // site-packages where a new distribution has REQUESTED
  for (const PackageWatch::Seen& s : seen) {
    std::string_view dirname = Last(s.path);
    std::string site(Parent(s.path));
    const auto& ref = s.op == '-' ? s.old_ref : s.new_ref;
    if (!ref) continue;
    PyDist d = ReadPyDist(trees, objects, dirname, *ref, budget);
    if (s.op == '+' && d.requested) asking.insert(site);
    Pair& p = by_name[{site, d.normalized}];
    (s.op == '-' ? p.gone : p.came) = std::move(d);
  }
  for (auto& [key, p] : by_name) {
    PackageDelta d;
    d.ecosystem = Ecosystem::kPip;
    d.where = key.first;
    if (p.gone && p.came) {
      if (p.gone->version == p.came->version) continue;  // reinstalled
      d.op = '~';
      d.name = p.came->name;
      d.old_version = p.gone->version;
      d.new_version = p.came->version;
    } else if (p.came) {
      d.op = '+';
      d.name = p.came->name;
      d.new_version = p.came->version;
      d.dependency = !p.came->requested && asking.count(key.first);
    } else {
      d.op = '-';
      d.name = p.gone->name;
      d.old_version = p.gone->version;
    }
    out->push_back(std::move(d));
  }
}

// ---- npm

void NpmDeltas(const std::vector<PackageWatch::Seen>& seen, const TreeLoader& trees, const ObjectLoader& objects,
               const store::ObjectId& old_root, const store::ObjectId& new_root, uint64_t* budget,
               std::vector<PackageDelta>* out) {
  auto read = [&](const std::optional<PackageWatch::Ref>& ref, bool want_deps) -> std::optional<NpmManifest> {
    if (!ref || ref->size > kMaxPackageJson || *budget < ref->size) return std::nullopt;
    *budget -= ref->size;
    auto text = ReadContent(objects, *ref, kMaxPackageJson, true);
    if (!text) return std::nullopt;
    return ParsePackageJson(*text, want_deps);
  };
  struct Side {
    std::string name, version;
  };
  struct Pair {
    std::optional<Side> gone, came;
  };
  std::map<std::pair<std::string, std::string>, Pair> by_path;  // (node_modules, name from the path)
  for (const PackageWatch::Seen& s : seen) {
    std::string_view pkgdir = Parent(s.path);
    std::string_view modules = Parent(pkgdir);
    std::string path_name(Last(pkgdir));
    if (Last(modules).starts_with('@')) {
      path_name = std::string(Last(modules)) + "/" + path_name;
      modules = Parent(modules);
    }
    Pair& p = by_path[{std::string(modules), path_name}];
    auto side = [&](const std::optional<PackageWatch::Ref>& ref) {
      Side sd{path_name, ""};
      if (auto m = read(ref, false)) {
        if (!m->name.empty()) sd.name = m->name;
        sd.version = m->version;
      }
      return sd;
    };
    if (s.op != '+') p.gone = side(s.old_ref);
    if (s.op != '-') p.came = side(s.new_ref);
  }
  // The project's own package.json names what was asked for.
  std::map<std::pair<std::string, bool>, std::optional<std::set<std::string>>> asked;  // (node_modules, old side)
  auto asked_for = [&](const std::string& modules, bool old_side) -> const std::optional<std::set<std::string>>& {
    auto [it, fresh] = asked.try_emplace({modules, old_side});
    if (!fresh) return it->second;
    std::string_view project = Parent(modules);
    std::string manifest = project.empty() ? "package.json" : std::string(project) + "/package.json";
    if (auto e = Find(trees, old_side ? old_root : new_root, manifest); e && e->kind == Kind::kFile) {
      if (auto m = read(RefOf(&*e), true)) it->second = std::move(m->dependencies);
    }
    return it->second;
  };
  for (auto& [key, p] : by_path) {
    const auto& [modules, path_name] = key;
    PackageDelta d;
    d.ecosystem = Ecosystem::kNpm;
    d.where = modules;
    if (p.gone && p.came) {
      if (p.gone->version == p.came->version) continue;
      d.op = '~';
      d.old_version = p.gone->version;
      d.new_version = p.came->version;
    } else if (p.came) {
      d.op = '+';
      d.new_version = p.came->version;
    } else {
      d.op = '-';
      d.old_version = p.gone->version;
    }
    const Side& side = p.came ? *p.came : *p.gone;
    if (HasComponent(Parent(modules), "node_modules")) {
      d.dependency = true;  // below another package
    } else {
      const auto& names = asked_for(modules, !p.came);
      d.dependency = names && !names->count(side.name);
    }
    d.name = Text(side.name);
    d.old_version = Text(d.old_version);
    d.new_version = Text(d.new_version);
    out->push_back(std::move(d));
  }
}

}  // namespace

void PackageWatch::See(const Difference& d) {
  const std::string& path = d.change.path;
  std::string_view last = Last(path);
  auto keep = [&](std::vector<Seen>& into, Ecosystem e) {
    if (into.size() >= kMaxSeen) {
      overflow_[e]++;
      return;
    }
    into.push_back({d.change.op, path, RefOf(d.old_entry), RefOf(d.new_entry)});
  };
  if (last == "status") {
    if (path == kDpkgStatus) {
      // A kind change comes as '-' then '+': keep both sides. A side that
      // is no regular file cannot be read, which leaves apt out (rather
      // than reading it as empty: every package removed).
      if (!dpkg_) dpkg_ = Seen{d.change.op, path, {}, {}};
      if (d.old_entry) dpkg_->old_ref = RefOf(d.old_entry);
      if (d.new_entry) dpkg_->new_ref = RefOf(d.new_entry);
    }
  } else if (last == "package.json") {
    // node_modules/<name>/package.json, node_modules/@scope/<name>/package.json
    std::string_view pkgdir = Parent(path);
    std::string_view modules = Parent(pkgdir);
    bool scoped = Last(modules).starts_with('@');
    if (scoped) modules = Parent(modules);
    bool named = !Last(pkgdir).empty() && !Last(pkgdir).starts_with('.') && !Last(pkgdir).starts_with('@');
    bool file = (d.old_entry && d.old_entry->kind == Kind::kFile) || (d.new_entry && d.new_entry->kind == Kind::kFile);
    if (Last(modules) == "node_modules" && named && file) keep(npm_, Ecosystem::kNpm);
  } else if (EndsWith(last, ".dist-info") || EndsWith(last, ".egg-info")) {
    std::string_view site = Parent(path);
    std::string_view where = Last(site);
    if (d.change.op != 'M' && (where == "site-packages" || where == "dist-packages") && !DistributionOwned(site))
      keep(py_, Ecosystem::kPip);
  } else if (last == ".git") {
    if (d.change.op != 'M' && d.change.is_dir && !HasComponent(path, "node_modules")) keep(git_, Ecosystem::kGit);
  }
}

bool PackageWatch::any() const { return dpkg_ || !py_.empty() || !npm_.empty() || !git_.empty() || !overflow_.empty(); }

PackageDeltas PackageWatch::Resolve(const TreeLoader& trees, const ObjectLoader& objects,
                                    const store::ObjectId& old_root, const store::ObjectId& new_root) const {
  std::vector<PackageDelta> all;
  if (dpkg_) {
    // Both sides whole or nothing: a side that cannot be read would turn
    // into every package installed or removed.
    auto text = [&](const std::optional<Ref>& ref) -> std::optional<std::string> {
      if (!ref) return std::string();
      return ReadContent(objects, *ref, kMaxDpkgText, true);
    };
    auto old_text = text(dpkg_->old_ref), new_text = text(dpkg_->new_ref);
    std::optional<DpkgStatus> old_db, new_db;
    if (old_text && new_text) old_db = ParseDpkgStatus(*old_text), new_db = ParseDpkgStatus(*new_text);
    if (old_db && new_db) {
      std::set<std::string> auto_installed;
      if (auto e = Find(trees, new_root, kAptExtendedStates); e && e->kind == Kind::kFile) {
        if (auto t = ReadContent(objects, *RefOf(&*e), kMaxDpkgText, true))
          if (auto a = ParseAptAutoInstalled(*t)) auto_installed = std::move(*a);
      }
      AptDeltas(*old_db, *new_db, auto_installed, &all);
    }
  }
  uint64_t budget = kMaxReadBytes;
  PipDeltas(py_, trees, objects, &budget, &all);
  NpmDeltas(npm_, trees, objects, old_root, new_root, &budget, &all);
  for (const Seen& s : git_) {
    const auto& ref = s.op == '-' ? s.old_ref : s.new_ref;
    if (!ref || ref->kind != Kind::kDir) continue;
    auto t = trees(ref->id);
    if (!t || !std::any_of(t->begin(), t->end(), [](const Entry& e) { return e.name == "HEAD"; })) continue;
    PackageDelta d;
    d.ecosystem = Ecosystem::kGit;
    d.op = s.op;
    d.where = std::string(Parent(s.path));
    d.name = Text(d.where.empty() ? "/" : Last(d.where));
    all.push_back(std::move(d));
  }
  std::stable_sort(all.begin(), all.end(), [](const PackageDelta& a, const PackageDelta& b) {
    return std::tie(a.ecosystem, a.dependency, a.name, a.where) < std::tie(b.ecosystem, b.dependency, b.name, b.where);
  });
  PackageDeltas out;
  out.omitted = overflow_;
  std::map<Ecosystem, size_t> listed;
  for (PackageDelta& d : all) {
    if (listed[d.ecosystem]++ < PackageDeltas::kMaxListed) out.items.push_back(std::move(d));
    else out.omitted[d.ecosystem]++;
  }
  return out;
}

Result<PackageDeltas> PackageDeltasBetween(const TreeLoader& trees, const ObjectLoader& objects,
                                           const store::ObjectId& from, const store::ObjectId& to) {
  PackageWatch watch;
  AE_TRY(DiffTrees(trees, from, to, [&](const Difference& d) -> Result<void> {
    watch.See(d);
    return {};
  }));
  return watch.Resolve(trees, objects, from, to);
}

bool PackageDeltasEnabled() {
  const char* v = std::getenv("AGENTENV_PACKAGES");
  return !(v && std::string_view(v) == "off");
}

}  // namespace agentenv::snap
