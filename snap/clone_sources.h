// snap/clone_sources: materialized lowers (lowers/<tree id>/, read-only
// copies of a node's tree) as a source of file content for writing other
// trees. A file at path P with content C can come from any lower whose
// tree has C at P: by reflink (FICLONE) into a new file of the live tree or
// of a new lower, or, for a new lower only, by a hardlink when its
// metadata is identical too (lowers are never written: overlayfs copies a
// file up before the first write).
#pragma once

#include <fcntl.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "snap/meta.h"
#include "snap/tree.h"
#include "store/store.h"

namespace agentenv::snap {

class CloneSources {
 public:
  // The ready lowers in `lowers_dir` (names that are tree ids, carrying
  // their completion mark: snap/lowers.h), each leased while the set lives
  // (gc removes none of them meanwhile), except the one
  // of tree `except` (the tree being built). None: an empty set. With
  // `live_dir` and `meta`: the live tree too, for clones only (it is
  // written), and only of files whose stat still matches the stat cache
  // entry that names their content, before and after the clone
  // (`live_stat_dev`: Repo::LiveStatDev).
  static std::shared_ptr<CloneSources> Open(const store::Store& s, const std::string& lowers_dir,
                                            const std::optional<store::ObjectId>& except = std::nullopt,
                                            const std::string& live_dir = "", const MetaDb* meta = nullptr,
                                            uint64_t live_stat_dev = 0);

  // A directory a scan has just read whole (`init --from`), as a source of
  // the same paths' content for the tree made from it: a file serves
  // CopyTo/CloneTo when it is still what the scan read, i.e. when neither
  // it nor any directory on its path changed since `scanned_from_ns` (a
  // time before the scan began): all their ctimes are older (a write,
  // rename, link, chmod or a new entry moves a ctime), and its size and
  // mtime are the entry's, before and after the transfer. Without it the
  // tree would be decompressed from the store. Never fails: a directory
  // that cannot be opened is an empty source.
  static std::shared_ptr<CloneSources> OpenScanned(const store::Store& s, const std::string& dir,
                                                   int64_t scanned_from_ns);

  // Clones the content of `e` (a regular file entry) at tree path `rel`
  // into the empty file `fd` from the first lower that holds that content
  // there. False when none does or the filesystem cannot clone (the caller
  // writes the file itself). Thread-safe.
  bool CloneTo(const std::string& rel, const Entry& e, int fd) const;
  // Where nothing clones: copies the content of `e` into the empty file
  // `fd` in the kernel (copy_file_range) from the live tree, when the stat
  // cache says the live file at `rel` holds it (checked before and after),
  // or from a scanned directory. Cheaper than decompressing it from the
  // store. Thread-safe.
  bool CopyTo(const std::string& rel, const Entry& e, int fd) const;
  // Whether files in directory `dir` can come from here at all: false for
  // a scanned directory that changed since the scan, or one above it
  // did. Thread-safe.
  bool MayServe(const std::string& dir) const;
  // Hardlinks `name` in `dirfd` to the file at `rel` of the first lower
  // whose entry there equals `e` (content and metadata). False when none
  // does or linking failed (e.g. EMLINK: ext4's 65,000 links per inode).
  // Thread-safe.
  bool LinkTo(const std::string& rel, const Entry& e, int dirfd, const std::string& name) const;

 private:
  struct Lower {
    store::ObjectId tree;
    UniqueFd fd;  // the lower's root directory
  };
  CloneSources(const store::Store& s) : s_(s) {}
  // The entry at `rel` in lower `l`'s tree, if it is a regular file.
  std::optional<Entry> FileAt(const Lower& l, const std::string& rel) const;
  // Opens `rel` below directory `dirfd` (O_RDONLY or O_PATH), never
  // through a symlink.
  static UniqueFd OpenIn(int dirfd, const std::string& rel, int mode = O_RDONLY);
  // The live tree's file at `rel`, if the stat cache says it holds `e`'s
  // content, cloned (or, with `copy`, copied in the kernel) into `fd`
  // (left empty on failure).
  bool FromLive(const std::string& rel, const Entry& e, int fd, bool copy) const;
  // The same from the scanned directory (OpenScanned).
  bool FromScanned(const std::string& rel, const Entry& e, int fd, bool copy) const;
  // The scanned directory's subdirectory `dir` if it and every directory
  // above it are unchanged since the scan (null otherwise). Cached.
  std::shared_ptr<const UniqueFd> ScannedDir(const std::string& dir) const;
  // What the kernel refused for one file of a source and so refuses for
  // all of them: a clone or copy_file_range across filesystems (a scanned
  // directory on another disk). Remembered so that each later file costs
  // no failed call, and no open and stat of the source only to fail.
  struct Refusals {
    std::atomic<bool> clone{false}, copy_range{false};
  };
  // Clones (or, with `copy`, copies in the kernel) all of `src` (whose
  // stat is `st`) into the empty file `fd`; true when `unchanged` holds after it. On false, `fd`
  // is left empty (truncated only when something was written: on btrfs a
  // truncate to 0 makes the close start writeback at once).
  static bool Transfer(int src, const struct stat& st, int fd, bool copy, const std::function<bool()>& unchanged,
                       Refusals* refused);

  const store::Store& s_;
  std::vector<Lower> lowers_;
  UniqueFd live_;
  uint64_t live_stat_dev_ = 0;
  std::unique_ptr<MetaDb::StatReader> stats_;  // GUARDED_BY(mu_): one read transaction
  int64_t scanned_before_ns_ = 0;  // OpenScanned: older ctimes are unchanged since the scan
  mutable Refusals live_refused_, scanned_refused_;
  mutable std::mutex mu_;
  // OpenScanned's directories opened so far (null: changed since the
  // scan), "" the root; cleared past kMaxScannedDirs (a restore goes
  // directory by directory, so the recent ones are the ones asked for
  // again, and each holds an fd).
  mutable std::map<std::string, std::shared_ptr<const UniqueFd>> scanned_dirs_;  // GUARDED_BY(mu_)
  static constexpr size_t kMaxScannedDirs = 32;
  // Directory trees read so far, by (lower tree, directory path).
  mutable std::map<std::pair<store::ObjectId, std::string>, std::shared_ptr<const Tree>> dirs_;  // GUARDED_BY(mu_)
};

}  // namespace agentenv::snap
