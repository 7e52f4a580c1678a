// snap/restore: rewrites a live tree from one tree object to another,
// touching only what differs.
//
// Every path is reached from the tree's root fd one component at a time
// with O_NOFOLLOW/AT_SYMLINK_NOFOLLOW, so a symlink planted in the tree can
// never redirect a write outside it. Files are written to a temporary name
// and renamed into place; directory metadata (mtimes) is set after their
// contents, deepest first; hardlinks are joined at the end.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "snap/clone_sources.h"
#include "snap/scan.h"
#include "snap/tree.h"
#include "store/store.h"

namespace agentenv::snap {

// Directories of a fresh target written ahead of the restore that
// completes it (EarlyWriter), by tree-relative path.
struct WrittenDirs {
  // Written with all their contents and their own metadata: a restore into
  // the target skips a directory listed here with the tree id it would
  // write.
  std::map<std::string, store::ObjectId> whole;
  // Made empty (mode 0700, nothing but subdirectories in them) to hold
  // whole ones: a restore enters them instead of making them.
  std::set<std::string> made;
  // Rootless: how many of the paths written keep the restoring user as
  // owner, and the first (the final restore reports them with its own).
  uint64_t unowned = 0;
  std::string first_unowned;
};

struct RestoreOptions {
  bool reflink = false;     // try FICLONERANGE from the store's packs first
  bool privileged = false;  // may chown and create device nodes
  // Paths the live tree keeps whatever the target says: an ignored path
  // is never removed or replaced (a node made before its directory became
  // a placeholder has no /tmp, and restoring it must not empty /tmp).
  PathFilter ignored;
  Progress* progress = nullptr;  // files and bytes written
  // Where file content can come from besides the store (clone_sources.h):
  // materialized lowers, the live tree, a directory just scanned. Cloned
  // when `reflink`, else copied in the kernel where the source allows it;
  // hardlinked, when `link_sources`, to a lower's file whose metadata is
  // identical too (only for a read-only tree being built).
  std::shared_ptr<const CloneSources> sources;
  bool link_sources = false;
  // Content comes from `sources` only, never from the store, which may
  // not hold it yet (EarlyWriter): a file no source holds any more (it
  // changed since it was scanned) fails with kNotFound.
  bool sources_only = false;
  // The target is a directory this operation made empty and nothing else
  // writes until the restore returns (init's live tree, a lower being
  // built): files are created at their final names instead of a temp name
  // renamed into place (a rename took ~8% of init's CPU on ext4, ~12% on
  // btrfs). A failed restore then leaves partial files: the caller removes
  // the whole target.
  bool fresh = false;
  // With `fresh`: what an EarlyWriter has written into the target already.
  const WrittenDirs* written = nullptr;
  // Nonzero: the device number stat cache entries record instead of the
  // files' st_dev (Repo::LiveStatDev).
  uint64_t stat_dev = 0;
  // Nonzero: the time the racy-clean rule takes as the restore's start
  // (files restored with an mtime within kRacyWindowNs of it get no stat
  // cache entry); 0: the wall clock when the restore begins.
  int64_t start_ns = 0;
  // Where stat cache entries go in bounded batches while the restore runs
  // (memory would otherwise grow with the tree); called on a thread of its
  // own, one call at a time, while the restore goes on, and the restore
  // returns only after the last call has. Empty: all of them end up in
  // RestoreStats::stat_entries. The restore goes on after a failed call
  // and returns its error at the end.
  std::function<Result<void>(std::vector<std::pair<std::string, StatEntry>>&&)> stat_sink;
};

struct RestoreStats {
  uint64_t files_written = 0, bytes_written = 0, files_cloned = 0;
  uint64_t files_linked = 0;  // hardlinked to a lower's file (link_sources)
  uint64_t files_copied = 0;  // copied in the kernel from a source (the live tree, a scanned directory)
  uint64_t removed = 0, created = 0, meta_updated = 0;
  uint64_t meta_only = 0;  // entries whose content was equal and only metadata was put back
  std::vector<std::string> warnings;  // what could not be restored, path first
  // Stat cache entries for the regular files this restore wrote or changed
  // the metadata of, as they are on disk now, so that the next scan need
  // not read them. Files restored with an mtime inside the racy window of
  // the restore's start are left out (a write in the same clock tick could
  // go unseen). With a stat_sink, only those not yet handed to it.
  std::vector<std::pair<std::string, StatEntry>> stat_entries;
};

// Writes a fresh target (RestoreOptions::fresh) while its tree is still
// being made: a scan hands over each directory as soon as its tree is
// known (ScanContext::on_dir: children before their parent), and a thread
// of its own writes it, contents, subdirectories' metadata and all, while
// the scan goes on with the rest. File content comes only from
// opt.sources (the store's batch is not readable yet); a directory waits
// for the final RestoreTree (given Finish's WrittenDirs) when one of its
// subdirectories was not written whole, and so do its ancestors. The
// first failure stops the early writing: Finish then empties the target
// and the final restore writes it all, as it would have without this.
// The target must be empty and written by nothing else until Finish.
class EarlyWriter {
 public:
  // Starts the writing thread. `opt` is copied; its progress is not used
  // (the final restore reports the writing).
  EarlyWriter(const store::Store& s, int root_fd, const RestoreOptions& opt);
  // Without Finish (the scan failed): drops what is queued, stops and
  // joins the thread; the caller removes the target.
  ~EarlyWriter();
  EarlyWriter(const EarlyWriter&) = delete;
  EarlyWriter& operator=(const EarlyWriter&) = delete;

  // Queues directory `rel` (not the root), whose entry in its parent is
  // `entry` (with its tree id) and whose entries are `tree`. Thread-safe;
  // returns at once. Past a bounded number of queued entries the
  // directory is left to the final restore (memory stays bounded).
  void Add(const std::string& rel, const Entry& entry, Tree tree);
  // Writes what is queued, stops, and returns what was written, with the
  // counts and warnings of the writing in *stats (its stat cache entries
  // went to opt.stat_sink, but for the last ones, in stats->stat_entries).
  // Errors: only emptying the target after a failure; the failure itself
  // is not an error (the final restore writes everything).
  Result<WrittenDirs> Finish(RestoreStats* stats);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Changes the tree at `root_fd`, which currently matches tree `from`, into
// tree `to` with root metadata `to_root` and hardlinks `to_links`.
// Errors: the first failing operation, path first; the tree is then
// partly restored (restoring again finishes the job).
Result<RestoreStats> RestoreTree(const store::Store& s, int root_fd, const store::ObjectId& from,
                                 const store::ObjectId& to, const Meta& to_root,
                                 std::span<const std::pair<std::string, std::string>> to_links,
                                 const RestoreOptions& opt);

}  // namespace agentenv::snap
