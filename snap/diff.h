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

// Every change between two trees, plus the file count / byte deltas.
struct TreeDelta {
  std::vector<Change> changes;
  int64_t files = 0, bytes = 0;
};
Result<TreeDelta> Delta(const store::Store& s, const store::ObjectId& from, const store::ObjectId& to);
// The same with trees from `load` (e.g. trees of a batch not yet committed).
using TreeLoader = std::function<Result<Tree>(const store::ObjectId&)>;
Result<TreeDelta> Delta(const TreeLoader& load, const store::ObjectId& from, const store::ObjectId& to);

}  // namespace agentenv::snap
