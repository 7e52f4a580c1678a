// ScanPaths and ScanUpper: trees rebuilt from a base tree along the paths
// that changed, or from an overlay's upper directory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <string>

#include "snap/fsops.h"
#include "snap/scan.h"
#include "snap/scanner.h"

namespace agentenv::snap {
namespace {

using namespace scan_internal;

// Changed paths as a tree of names; `whole` marks a rescan of everything below.
struct PathTrie {
  std::map<std::string, PathTrie> kids;
  bool whole = false;
};

bool Under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

// Rebuilds the tree `old_id` of directory `fd` along `trie`. Sets
// *need_full when hardlinks make a partial rebuild unsafe.
Result<store::ObjectId> Rebuild(Scanner& sc, const ScanContext& ctx, const MetaDb::StatReader& cache,
                                int fd, const std::string& rel, const store::ObjectId& old_id,
                                const PathTrie& trie, bool* need_full) {
  AE_ASSIGN(Tree entries, LoadTree(ctx.store, old_id));
  DirAccess access(fd, sc.euid());
  for (const auto& [name, kid] : trie.kids) {
    if (IsRestoreTempName(name)) continue;
    std::string crel = Join(rel, name);
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const Entry& e, const std::string& n) { return e.name < n; });
    bool had = it != entries.end() && it->name == name;
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT && errno != ENOTDIR) return FailErrno(crel, errno);
      if (had) entries.erase(it);
      continue;
    }
    if (ctx.ignored && ctx.ignored(crel, S_ISDIR(st.st_mode))) {
      Entry e;
      e.name = name;
      if (S_ISDIR(st.st_mode)) {
        AE_TRY(sc.ReadEntry(fd, name, crel, st, cache, &e));
        MakePlaceholder(&e);
        if (had) *it = std::move(e);
        else entries.insert(it, std::move(e));
      } else if (had) {
        entries.erase(it);
      }
      continue;
    }
    if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
      *need_full = true;
      return store::ObjectId{};
    }
    Entry e;
    e.name = name;
    AE_TRY(sc.ReadEntry(fd, name, crel, st, cache, &e));
    if (e.kind == Kind::kDir) {
      auto opened = OpenScanDir(fd, name, crel, sc.euid());
      if (!opened && (opened.error().errno_value == ENOENT || opened.error().errno_value == ENOTDIR)) {
        if (had) entries.erase(it);  // deleted while we scan
        continue;
      }
      if (!opened) return Unexpected<Error>(opened.error());
      UniqueFd sub = std::move(*opened);
      if (had && it->kind == Kind::kDir && !kid.whole) {
        e.id = it->id;
        if (!kid.kids.empty()) {
          AE_ASSIGN(e.id, Rebuild(sc, ctx, cache, sub.get(), crel, it->id, kid, need_full));
          if (*need_full) return store::ObjectId{};
        }
      } else {
        AE_ASSIGN(auto dir, sc.Walk(std::move(sub), crel));
        if (sc.has_links()) {
          *need_full = true;
          return store::ObjectId{};
        }
        AE_ASSIGN(e.id, sc.PutTrees(*dir));
      }
    }
    if (had) *it = std::move(e);
    else entries.insert(it, std::move(e));
  }
  return sc.PutTree(entries);
}

// Rebuilds lower tree `lower` of one overlay directory from its upper
// directory `fd` (see ScanUpper).
Result<store::ObjectId> MergeUpper(Scanner& sc, const ScanContext& ctx, const MetaDb::StatReader& cache, int fd,
                                   const std::string& rel, const store::ObjectId& lower) {
  AE_ASSIGN(Tree entries, LoadTree(ctx.store, lower));
  DirAccess access(fd, sc.euid());
  DirNames dir;
  AE_TRY(ReadDirNames(fd, rel, &dir, /*rewind=*/true));
  for (std::string_view view : dir.names) {
    const std::string name(view);
    std::string crel = Join(rel, name);
    auto it = std::lower_bound(entries.begin(), entries.end(), name,
                               [](const Entry& e, const std::string& n) { return e.name < n; });
    bool had = it != entries.end() && it->name == name;
    struct stat st;
    if (::fstatat(fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return FailErrno(crel, errno);
    if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {  // a whiteout: deleted from the lower
      if (had) entries.erase(it);
      continue;
    }
    bool ignored = ctx.ignored && ctx.ignored(crel, S_ISDIR(st.st_mode));
    if (ignored && !S_ISDIR(st.st_mode)) {
      if (had) entries.erase(it);
      continue;
    }
    Entry e;
    e.name = name;
    AE_TRY(sc.ReadEntry(fd, name, crel, st, cache, &e));
    if (e.kind == Kind::kDir && ignored) {
      MakePlaceholder(&e);
    } else if (e.kind == Kind::kDir) {
      AE_ASSIGN(Xattrs raw, ReadXattrs(fd, name, crel));
      AE_ASSIGN(UniqueFd sub, OpenScanDir(fd, name, crel, sc.euid()));
      if (had && it->kind == Kind::kDir && !Opaque(raw)) {
        AE_ASSIGN(e.id, MergeUpper(sc, ctx, cache, sub.get(), crel, it->id));
      } else {
        AE_ASSIGN(auto dir, sc.Walk(std::move(sub), crel));
        AE_ASSIGN(e.id, sc.PutTrees(*dir));
      }
    }
    if (had) *it = std::move(e);
    else entries.insert(it, std::move(e));
  }
  return sc.PutTree(entries);
}

}  // namespace

Result<ScanOutput> ScanUpper(const ScanContext& ctx, int upper_fd, const store::ObjectId& base_tree) {
  Scanner sc(ctx);
  AE_ASSIGN(sc.out.root, RootMeta(upper_fd));
  StripOverlayXattrs(&sc.out.root.xattrs);
  AE_ASSIGN(auto cache, ctx.meta.ReadStats());
  AE_ASSIGN(sc.out.tree, MergeUpper(sc, ctx, *cache, upper_fd, "", base_tree));
  // Hardlinks inside new upper directories were grouped by the walk; an
  // overlay records them as separate files (no index): so do we.
  sc.out.links.clear();
  sc.out.stat_updates.clear();  // they describe the upper, not the live tree
  return sc.Take();
}

Result<std::optional<ScanOutput>> ScanPaths(
    const ScanContext& ctx, int root_fd, const store::ObjectId& base_tree,
    std::span<const std::pair<std::string, std::string>> base_links,
    std::span<const std::string> paths, std::span<const std::string> entries) {
  PathTrie trie;
  // Entries first: a subtree path added later absorbs them.
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::string& p : pass == 0 ? entries : paths) {
      if (p.empty() && pass == 0) continue;  // the root's metadata is always read
      // An entry alone leaves the groups below it as they are.
      for (const auto& [path, first] : base_links) {
        if (pass == 0 ? p == path || p == first
                      : Under(path, p) || Under(first, p) || Under(p, path) || Under(p, first))
          return std::nullopt;
      }
      PathTrie* t = &trie;
      size_t i = 0;
      while (i < p.size() && !t->whole) {
        size_t slash = p.find('/', i);
        if (slash == std::string::npos) slash = p.size();
        if (slash > i) t = &t->kids[p.substr(i, slash - i)];
        i = slash + 1;
      }
      if (pass == 1) {
        t->whole = true;
        t->kids.clear();
      }
    }
  }
  Scanner sc(ctx);
  if (trie.whole) {
    AE_ASSIGN(auto full, ScanTree(ctx, root_fd));
    if (!full.links.empty() || !base_links.empty()) return std::nullopt;
    return std::optional<ScanOutput>(std::move(full));
  }
  AE_ASSIGN(sc.out.root, RootMeta(root_fd));
  AE_ASSIGN(auto cache, ctx.meta.ReadStats());
  bool need_full = false;
  AE_ASSIGN(sc.out.tree, Rebuild(sc, ctx, *cache, root_fd, "", base_tree, trie, &need_full));
  if (need_full) return std::nullopt;
  // No changed path touches a hardlink group, so the groups are as before.
  sc.out.links.assign(base_links.begin(), base_links.end());
  return std::optional<ScanOutput>(sc.Take());
}

}  // namespace agentenv::snap
