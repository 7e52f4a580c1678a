// ScanPaths and ScanUpper: trees rebuilt from a base tree along the paths
// that changed, or from an overlay's upper directory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
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
// directory `fd` (see ScanUpper). Appends to *replaced every path whose
// lower entry the upper replaced or deleted (the whole subtree of a
// directory it replaced), never one it only merged into.
Result<store::ObjectId> MergeUpper(Scanner& sc, const ScanContext& ctx, const MetaDb::StatReader& cache, int fd,
                                   const std::string& rel, const store::ObjectId& lower,
                                   std::vector<std::string>* replaced) {
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
    bool ignored = ctx.ignored && ctx.ignored(crel, S_ISDIR(st.st_mode));
    // A whiteout deletes the lower's entry; an ignored file is not versioned.
    if ((S_ISCHR(st.st_mode) && st.st_rdev == 0) || (ignored && !S_ISDIR(st.st_mode))) {
      if (had) {
        entries.erase(it);
        replaced->push_back(crel);
      }
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
        AE_ASSIGN(e.id, MergeUpper(sc, ctx, cache, sub.get(), crel, it->id, replaced));
        *it = std::move(e);
        continue;
      }
      AE_ASSIGN(auto dir, sc.Walk(std::move(sub), crel));
      AE_ASSIGN(e.id, sc.PutTrees(*dir));
    }
    if (had) {
      *it = std::move(e);
      replaced->push_back(crel);
    } else {
      entries.insert(it, std::move(e));
    }
  }
  return sc.PutTree(entries);
}

// A tree this scan put (not readable from the store until the batch
// commits) or one the store has.
Result<Tree> LoadScanned(const Scanner& sc, const ScanContext& ctx, const store::ObjectId& id) {
  auto it = sc.out.trees.find(id);
  if (it == sc.out.trees.end()) return LoadTree(ctx.store, id);
  return DecodeTree(it->second, id.Hex());
}

// The entry at tree-relative `path` below tree `root`.
Result<Entry> EntryAt(const Scanner& sc, const ScanContext& ctx, store::ObjectId root, const std::string& path) {
  size_t i = 0;
  for (;;) {
    size_t slash = path.find('/', i);
    std::string name = path.substr(i, slash == std::string::npos ? std::string::npos : slash - i);
    AE_ASSIGN(Tree t, LoadScanned(sc, ctx, root));
    auto it = std::lower_bound(t.begin(), t.end(), name, [](const Entry& e, const std::string& n) { return e.name < n; });
    if (it == t.end() || it->name != name) return Fail(ErrorCode::kCorrupt, path + ": not in the base tree its hardlinks name");
    if (slash == std::string::npos) return *it;
    if (it->kind != Kind::kDir) return Fail(ErrorCode::kCorrupt, path + ": a parent in the base tree is no directory");
    root = it->id;
    i = slash + 1;
  }
}

// Tree `root` with the entries at the given paths (each naming an existing
// entry) replaced, rebuilt along those paths only.
Result<store::ObjectId> ReplaceEntries(Scanner& sc, const ScanContext& ctx, const store::ObjectId& root,
                                       const std::map<std::string, Entry>& by_path) {
  std::map<std::string, std::map<std::string, Entry>> below;  // first component -> rest
  std::map<std::string, const Entry*> here;
  for (const auto& [path, e] : by_path) {
    size_t slash = path.find('/');
    if (slash == std::string::npos) here[path] = &e;
    else below[path.substr(0, slash)][path.substr(slash + 1)] = e;
  }
  AE_ASSIGN(Tree t, LoadScanned(sc, ctx, root));
  for (Entry& e : t) {
    if (auto h = here.find(e.name); h != here.end()) {
      e = *h->second;
      e.name = h->first;
    } else if (auto b = below.find(e.name); b != below.end()) {
      AE_ASSIGN(e.id, ReplaceEntries(sc, ctx, e.id, b->second));
    }
  }
  return sc.PutTree(t);
}

// The hardlink groups of the base tree after an overlay's upper replaced
// some of their paths. Overlayfs (without its index feature) breaks a
// link on copy-up: a replaced path is the upper's own file now, while the
// paths the upper left alone still share the lower's inode. So those stay
// one group; when the group's first path was replaced, the first of them
// in walk order takes its place (the base's file entry under its own
// name, the others naming it), as a full scan of the overlay would record
// them. Rewrites the affected entries of *tree and returns the pairs.
Result<std::vector<std::pair<std::string, std::string>>> RegroupLinks(
    Scanner& sc, const ScanContext& ctx, const store::ObjectId& base_tree,
    std::span<const std::pair<std::string, std::string>> base_links, const std::vector<std::string>& replaced,
    store::ObjectId* tree) {
  const std::set<std::string, std::less<>> gone(replaced.begin(), replaced.end());
  auto touched = [&](const std::string& path) {  // the path or one of its ancestors replaced
    for (size_t slash = path.find('/'); slash != std::string::npos; slash = path.find('/', slash + 1))
      if (gone.count(std::string_view(path).substr(0, slash))) return true;
    return gone.count(path) > 0;
  };
  std::map<std::string, std::vector<std::string>> groups;  // first -> the other paths
  for (const auto& [path, first] : base_links) groups[first].push_back(path);
  std::vector<std::pair<std::string, std::string>> links;
  std::map<std::string, Entry> rewrite;
  for (auto& [first, members] : groups) {
    std::vector<std::string> kept;
    for (const std::string& m : members)
      if (!touched(m)) kept.push_back(m);
    if (!touched(first)) {
      for (std::string& m : kept) links.emplace_back(std::move(m), first);
      continue;
    }
    if (kept.empty()) continue;
    std::sort(kept.begin(), kept.end(), WalkOrder);
    AE_ASSIGN(Entry file, EntryAt(sc, ctx, base_tree, first));
    rewrite[kept[0]] = file;
    for (size_t k = 1; k < kept.size(); ++k) {
      Entry link;
      link.kind = Kind::kHardlink;
      link.target = kept[0];
      rewrite[kept[k]] = std::move(link);
      links.emplace_back(kept[k], kept[0]);
    }
  }
  if (!rewrite.empty()) {
    AE_ASSIGN(*tree, ReplaceEntries(sc, ctx, *tree, rewrite));
  }
  std::sort(links.begin(), links.end());
  return links;
}

}  // namespace

Result<ScanOutput> ScanUpper(const ScanContext& ctx, int upper_fd, const store::ObjectId& base_tree,
                             std::span<const std::pair<std::string, std::string>> base_links) {
  Scanner sc(ctx);
  AE_ASSIGN(sc.out.root, RootMeta(upper_fd));
  StripOverlayXattrs(&sc.out.root.xattrs);
  AE_ASSIGN(auto cache, ctx.meta.ReadStats());
  std::vector<std::string> replaced;
  AE_ASSIGN(sc.out.tree, MergeUpper(sc, ctx, *cache, upper_fd, "", base_tree, &replaced));
  // The upper's own files are recorded as separate files, linked or not
  // (the walk grouped hardlinks inside new upper directories, but an
  // overlay without its index keeps no links across copy-up): only the
  // base's groups remain, as far as the upper left them alone.
  AE_ASSIGN(sc.out.links, RegroupLinks(sc, ctx, base_tree, base_links, replaced, &sc.out.tree));
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
