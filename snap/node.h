// snap/node: the format of snapshot node (kNode) objects.
//
// A node names one state of the whole tree: the root tree, the root
// directory's own metadata, where it came from (parent), when, why (message
// and automatic label) and a summary of what changed since the parent.
// Nodes are immutable store objects; the mutable history graph (parent
// pointers after retention, refs, tags) lives in the repository's metadata
// index (snap/meta.h). Byte format: docs/design.md ("Node objects").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "snap/tree.h"
#include "store/store.h"

namespace agentenv::snap {

// One changed path of a snapshot: '+' added, '-' deleted, 'M' modified.
struct Change {
  char op = 'M';
  std::string path;  // tree-relative, no leading '/'
  bool is_dir = false;
  bool operator==(const Change&) const = default;
};

struct ChangeSummary {
  uint64_t added = 0, modified = 0, deleted = 0;
  std::vector<Change> sample;  // the first kSampleSize changes in path order
  static constexpr size_t kSampleSize = 64;
  uint64_t total() const { return added + modified + deleted; }
  bool operator==(const ChangeSummary&) const = default;
};

struct Node {
  store::ObjectId tree;
  Meta root;                                  // the root directory's metadata
  std::optional<store::ObjectId> parent;      // absent for the first node
  int64_t time_ns = 0;                        // wall clock at snapshot
  std::string message;                        // given by the user, may be empty
  std::string label;                          // automatic: command or change summary
  ChangeSummary changes;                      // versus parent
  std::vector<std::pair<std::string, std::string>> links;  // hardlink path -> first path
  uint64_t files = 0;                         // regular files in the tree
  uint64_t logical_bytes = 0;                 // their total size
  bool operator==(const Node&) const = default;
};

std::vector<uint8_t> EncodeNode(const Node& n);
// Errors: kCorrupt naming `what`.
Result<Node> DecodeNode(std::span<const uint8_t> bytes, std::string_view what);
// Reads and decodes node `id`. Errors: not found, corrupt.
Result<Node> LoadNode(const store::Store& s, const store::ObjectId& id);

// The summary and the label of a stream of changes (in path order), in
// memory bounded by kMaxKept directory groups rather than by the number of
// changes: a first snapshot of a million files summarizes a million adds.
// Not thread-safe.
class ChangeTally {
 public:
  void Add(const Change& c);
  // Counts, and the first kSampleSize changes.
  const ChangeSummary& summary() const { return summary_; }
  // A short human/LLM-readable description of all changes, grouped by
  // directory: "+312 usr/lib/python3/dist-packages/requests/…, M etc/hosts".
  // Empty for no changes.
  std::string Label() const;

 private:
  struct Group {
    uint64_t n = 0;
    std::string example;  // the path of the first change (used when n == 1)
  };
  using Groups = std::map<std::pair<char, std::string>, Group>;
  // Changes grouped by (op, path), the paths cut to `level` directory
  // levels once more than kMaxKept groups were kept. Label() moves groups
  // up one level at a time until a few remain; doing part of that while
  // adding gives the same groups, since cutting all paths to level L and
  // then to L-1 is cutting them to L-1.
  struct Grouping {
    Groups groups;
    int level = -2;        // -2: paths are whole; -1: cut to the root
    uint64_t total = 0;
    size_t max_depth = 0;  // of all paths added ('/' count)
    void Add(const Change& c);
  };
  static constexpr size_t kMaxKept = 4096;
  ChangeSummary summary_;
  // A modified directory only says that its entries changed (mtime): the
  // label names files and added or deleted directories (named_), and
  // modified directories (dirs_) only when nothing else changed.
  Grouping named_, dirs_;
};

// ChangeTally's label of `all`.
std::string SummaryLabel(std::span<const Change> all);

// Counts `all` and keeps the first kSampleSize entries.
ChangeSummary Summarize(std::span<const Change> all);

}  // namespace agentenv::snap
