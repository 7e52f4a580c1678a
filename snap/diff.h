// snap/diff: compares two trees, skipping equal subtrees by id, so the cost
// is proportional to what differs.
#pragma once

#include <functional>
#include <vector>

#include "common/result.h"
#include "snap/node.h"
#include "snap/tree.h"
#include "store/store.h"

namespace agentenv::snap {

// One difference: old/new are null for added/deleted paths. Added or
// deleted directories are reported together with everything below them.
struct Difference {
  Change change;
  const Entry* old_entry = nullptr;
  const Entry* new_entry = nullptr;
};

// Calls fn for each differing path in walk order. Errors: objects missing
// or corrupt, or fn's error.
Result<void> DiffTrees(const store::Store& s, const store::ObjectId& from, const store::ObjectId& to,
                       const std::function<Result<void>(const Difference&)>& fn);

// Reads a tree (from a store, or trees of a batch not yet committed).
using TreeLoader = std::function<Result<Tree>(const store::ObjectId&)>;

// DiffTrees with trees from `load`.
Result<void> DiffTrees(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                       const std::function<Result<void>(const Difference&)>& fn);

// What a change from tree `from` to `to` takes away: fn(path, its entry in
// `from`) for each path of `from` that `to` lacks or has as another kind
// (and below a directory that goes, every path of it), parents before their
// contents. What `to` adds is not read, so the cost follows what goes.
// Errors: objects missing or corrupt, or fn's.
Result<void> Removed(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                     const std::function<Result<void>(const std::string& rel, const Entry& was)>& fn);

// Whether two metadata differ at most in mtime.
bool SameButMtime(const Meta& a, const Meta& b);
// A directory whose contents and metadata are the same but its mtime: no
// change to count (Delta, and so a node's counts, and `diff` agree).
bool MtimeOnlyDir(const Difference& d);

// Every change between two trees, plus the file count / byte deltas. A
// directory whose contents and metadata are the same but its mtime (an
// ignored file came and went, a temp file was made and removed) is no
// change here: it makes no node and does not make the tree dirty. Trees
// still record the exact mtime whenever a node is made.
// The changes are tallied, not kept: a first snapshot of a large tree is a
// change per path.
struct TreeDelta {
  ChangeTally changes;
  std::vector<std::string> deleted_files;  // paths of deleted non-directories
  std::vector<std::string> deleted_dirs;   // paths of deleted directories
  int64_t files = 0, bytes = 0;
};
// `seen` (optional) is called with each difference counted, as the diff
// visits it (a PackageWatch, snap/packages.h, looks there for package
// databases, so no second diff is needed).
using DiffObserver = std::function<void(const Difference&)>;
Result<TreeDelta> Delta(const store::Store& s, const store::ObjectId& from, const store::ObjectId& to,
                        const DiffObserver& seen = {});
// The same with trees from `load` (e.g. trees of a batch not yet committed).
Result<TreeDelta> Delta(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to,
                        const DiffObserver& seen = {});

}  // namespace agentenv::snap
