// snap/btrfs: btrfs subvolumes as an accelerator of the live tree.
//
// On btrfs the live tree is a subvolume, and every snapshot node keeps a
// read-only subvolume snapshot of it (under subvols/<node id>). Such a
// snapshot is never the only copy of anything: the store stays the
// source of truth, and a missing snapshot only means the next operation
// takes the slow path (a full scan, a restore from the store).
//
// The functions here wrap libbtrfsutil (subvolumes) and the btrfs tree
// search ioctl (what changed between two snapshots). Privileges: creating
// and snapshotting a subvolume works for its owner; deleting one needs
// root or the user_subvol_rm_allowed mount option; the tree search needs
// CAP_SYS_ADMIN (without it ChangedPaths fails with kUnsupported and the
// caller scans). All functions are thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace agentenv::snap::btrfs {

// Is `path` on a btrfs filesystem? false when it cannot be statted.
bool OnBtrfs(const std::string& path);
// Is `path` the root of a subvolume?
bool IsSubvolume(const std::string& path);

// Creates an empty subvolume at `path` (which must not exist). Errors:
// kUnsupported (not btrfs), kExists, I/O; path first.
Result<void> CreateSubvolume(const std::string& path);
// Snapshots subvolume `src` to `dst` (must not exist), read-only or
// writable. O(1): the trees are shared until either side changes; the
// kernel commits the transaction first, so the snapshot holds all data
// written to `src` before the call. Errors: kUnsupported, I/O; dst first.
Result<void> Snapshot(const std::string& src, const std::string& dst, bool read_only);
// Deletes subvolume `path` and its contents. Errors: kUnsupported with an
// actionable message when the caller lacks the privilege (EPERM); I/O.
Result<void> DeleteSubvolume(const std::string& path);
// When subvolume `path` was created: the transaction id (a snapshot:
// every inode changed after it has a newer transid) and the filesystem's
// clock then (its otime, taken inside that transaction's commit). Errors:
// I/O.
struct Creation {
  uint64_t transid = 0;
  int64_t time_ns = 0;
};
Result<Creation> Created(const std::string& path);

// Whether subvolume `path` holds other subvolumes (made by whoever uses
// the tree, e.g. a container engine). A snapshot shows such a subvolume
// as an empty directory, so a tree holding one must be read directly.
// Works without privileges. Errors: I/O.
Result<bool> HasNestedSubvolumes(const std::string& path);

// Whether this process may search the btrfs trees at `path` (and so use
// ChangedPaths): CAP_SYS_ADMIN in the initial namespace, not merely uid 0
// in a user namespace.
bool CanSearch(const std::string& path);

// What changed from subvolume snapshot `base` to snapshot `next` of the
// same live tree (next taken later), as inputs for ScanPaths: `paths`
// (re-read, with their subtrees) and `entries` (only the directory entry
// itself: its own metadata). Found from the filesystem: the inodes of
// `next` touched in a transaction after the one that created `base` (the
// find-new search), each resolved to its paths in `next`; for a changed
// directory its listing in `next` is compared with the one in `base` by
// name and inode number, which catches deletions and renames. An inode
// only read since `base` (relatime moved its access time: a file's first
// read after it was written, as every file init wrote, or its first in a
// day; a directory listed) is not a change: one whose ctime is older than
// `base` by the stat cache's racy window and whose inode item equals the
// one in `base` but for atime and transid is left out (`read_only`). Paths
// for which `skip(rel)` is true (ignored paths, checked for every ancestor
// by the caller's filter) are left out. Cost: the changed inodes plus the
// listings of changed directories, and one lookup in `base` per run of
// nearby inodes read since; no walk. Errors: kUnsupported when the search
// is not permitted (needs CAP_SYS_ADMIN), I/O.
struct Changes {
  std::vector<std::string> paths;
  std::vector<std::string> entries;
  uint64_t inodes = 0;     // changed inodes found by the search
  uint64_t read_only = 0;  // inodes it found whose only change was a read (atime)
};
Result<Changes> ChangedPaths(const std::string& base, const std::string& next,
                             const std::function<bool(std::string_view rel, bool is_dir)>& skip);

}  // namespace agentenv::snap::btrfs
