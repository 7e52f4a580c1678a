// snap/scan: reads the live tree into tree objects.
//
// A full scan walks the whole tree with parallel workers, one directory per
// task, opening everything relative to its parent's fd without following
// symlinks (so paths longer than PATH_MAX work and nothing outside the tree
// is read). Regular files whose stat matches the stat cache are not read;
// others are streamed into the batch. Likewise the xattrs of directories
// and special files and the targets of symlinks come from the entry cache
// when their stat matches (a change to either moves ctime), so an
// unchanged tree costs a stat per entry and no other syscall. A path scan rebuilds only the trees
// along a list of changed paths, starting from a base tree.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/progress.h"
#include "common/result.h"
#include "snap/meta.h"
#include "snap/tree.h"
#include "store/store.h"

namespace agentenv::snap {

// A file whose ctime is this close to the scan start may still be changing
// within the same timestamp tick (the kernel's coarse clock): its hash is
// used now but not cached, so the next scan reads it again.
constexpr int64_t kRacyWindowNs = 50'000'000;

// Returns true for tree-relative paths that are not versioned. An ignored
// file is left out; an ignored directory is recorded as a placeholder: the
// directory itself (mode, owner, xattrs) with no contents and mtime 0. A
// scan asks only about entries of directories it did not find ignored (it
// never descends into those), so a filter need not consult a path's
// ancestors.
using PathFilter = std::function<bool(std::string_view rel, bool is_dir)>;
// The same verdicts for the entries of one directory, by name: a scan makes
// one per directory it lists (the filter can then drop, once, the rules that
// cannot match there). DirFilter(dir)(name, is_dir) == PathFilter(dir/name).
using EntryFilter = std::function<bool(std::string_view name, bool is_dir)>;
using DirFilter = std::function<EntryFilter(std::string_view dir)>;

struct ScanContext {
  const store::Store& store;
  store::Batch& batch;
  const MetaDb& meta;
  PathFilter ignored;    // may be empty: nothing ignored
  int64_t start_ns = 0;  // wall clock when the scan began (racy-clean rule)
  // Scanning an overlay's upper directory: its own xattrs (user.overlay.*,
  // trusted.overlay.*: opaque marks, origins) are the overlay's
  // bookkeeping, not the files' metadata.
  bool overlay_upper = false;
  Progress* progress = nullptr;  // files seen, bytes read
  // Nonzero: the device the stat cache records and compares instead of
  // st_dev (scanning a btrfs snapshot of the live tree, whose inodes are
  // the live tree's: same numbers and times, another device number).
  uint64_t stat_dev = 0;
  // Whether the tree scanned is the live one: only its files make stat
  // cache entries (ScanOutput::stat_updates); a foreign tree (import,
  // init --from) would only spend memory on them.
  bool live = true;
  // Optional, and then used instead of `ignored` for the entries of each
  // directory listed.
  DirFilter ignored_dir;
  // The store's Removals(), read with `batch` open (live scans only). Set,
  // the walk uses and records directories' tree hints (EntryStat::tree):
  // a directory whose tree comes out as its hint is not looked up in the
  // store again.
  std::optional<uint64_t> removals;
  // ScanTree only, optional: called with each directory below the root
  // as soon as its tree is stored (not for one that waits for hardlinks,
  // nor for its ancestors): its path, its entry in its parent (tree id
  // set) and its entries, which the scan has no more use for. Called from
  // the walk's workers, a directory's subdirectories before it; must be
  // quick (EarlyWriter::Add).
  std::function<void(const std::string& rel, const Entry& entry, Tree&& entries)> on_dir;
};

struct ScanOutput {
  store::ObjectId tree;
  Meta root;
  std::vector<std::pair<std::string, std::string>> links;  // hardlink path -> first path
  uint64_t hashed_files = 0, hashed_bytes = 0;  // read this time (stat cache misses)
  bool walked = false;  // the whole tree was walked (not only changed paths)
  std::vector<std::pair<std::string, StatEntry>> stat_updates;  // for the stat cache
  std::vector<std::pair<std::string, EntryStat>> entry_updates;  // for the entry cache
  // Directories, symlinks and special files whose xattrs (and target) were
  // read from disk, not from the entry cache.
  uint64_t read_entries = 0;
  // Trees put (one store lookup each): those without a valid tree hint.
  uint64_t looked_up_trees = 0;
  std::vector<std::string> warnings;  // what could not be recorded, path first
  // Encodings of the trees this scan put that the store did not have, so
  // that they can be read before the batch is committed (the node's change
  // summary is made first). Only those not yet readable from the store: a
  // large batch commits in steps, and trees it committed are dropped here
  // as the scan goes (else 1M files would keep ~100 MB of them).
  std::map<store::ObjectId, std::vector<uint8_t>> trees;
  // The ids of all those trees (reference counts heal them if they were
  // missing before).
  std::vector<store::ObjectId> new_trees;
};

// Scans the directory `root_fd` completely. Errors: the first I/O error,
// path first (a file that vanishes while being scanned is not an error).
Result<ScanOutput> ScanTree(const ScanContext& ctx, int root_fd);

// Rebuilds `base` (tree id + root metadata + hardlinks of the node it came
// from) after changes under `paths` (tree-relative; a directory path means
// its whole subtree) and of `entries` (only the entry itself changed: a
// directory's own metadata, its contents are as in `base`; "" is the root,
// whose metadata is always re-read). Returns nullopt when hardlinks are
// involved, so the caller must scan fully. Cost: proportional to the paths
// and their depth.
Result<std::optional<ScanOutput>> ScanPaths(
    const ScanContext& ctx, int root_fd, const store::ObjectId& base_tree,
    std::span<const std::pair<std::string, std::string>> base_links,
    std::span<const std::string> paths, std::span<const std::string> entries = {});

// The tree of an overlay mount (lower = tree `base_tree`, upper directory
// `upper_fd`) without mounting it: only the upper directory is read, so
// the cost follows what changed. A whiteout (a character device 0:0)
// deletes the lower entry; a directory marked opaque
// (user.overlay.opaque or trusted.overlay.opaque = "y") replaces the lower
// subtree; any other upper entry replaces the lower one (a copied-up file
// is hashed again and is a change only if its content or metadata
// differ). The root's metadata is the upper root's. Hardlinks of the upper
// are recorded as separate files; the base's hardlink groups (`base_links`,
// of the node the lower is) keep the paths the upper left alone, as the
// overlay shows them. Set ctx.overlay_upper. Errors: I/O, path first.
Result<ScanOutput> ScanUpper(const ScanContext& ctx, int upper_fd, const store::ObjectId& base_tree,
                             std::span<const std::pair<std::string, std::string>> base_links);

// Metadata of what `name` in `dirfd` is (not following symlinks): mode
// bits, owner, mtime and xattrs. Errors: I/O, path first.
Result<Meta> ReadMeta(int dirfd, const std::string& name, const struct stat& st,
                      const std::string& rel);

}  // namespace agentenv::snap
