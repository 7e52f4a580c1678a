// ChangeSet: which tree paths changed since the last delivery.
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace agentenv::watch {

enum class Scope {
  kEntry,    // this path itself: created, written, attributes, deleted, moved away
  kSubtree,  // this directory and everything below it may be new or moved in
};

// Paths are tree-relative bytes ("usr/lib/x", "" = the root), not
// necessarily UTF-8. A listed path may no longer exist (deleted or moved
// away); a vanished directory means its whole subtree is gone. Parent
// directories of a listed path are not listed: their mtime changed
// implicitly. Not thread-safe; a value type.
struct ChangeSet {
  std::map<std::string, Scope> paths;
  // Anything may have changed anywhere (queue overflow, watches lost,
  // periodic scan in degraded mode): walk the whole tree.
  bool rescan_all = false;

  bool empty() const { return paths.empty() && !rescan_all; }

  // Records one path; kSubtree wins over kEntry for the same path.
  void Add(std::string path, Scope scope);
  // Adds everything of `other`.
  void Merge(ChangeSet&& other);
  // True when path is listed or lies inside a listed kSubtree (or rescan_all).
  bool Covers(std::string_view path) const;
  // Drops paths that a listed kSubtree ancestor already covers, and all
  // paths when rescan_all is set. Run before handing the set out.
  void Compact();
};

}  // namespace agentenv::watch
