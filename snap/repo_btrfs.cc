// The btrfs backend's part of Repo: every snapshot node keeps a read-only
// subvolume snapshot of the live tree, subvols/<node id>, whose content
// is exactly the node's tree (the node was scanned from it). The next
// snapshot asks btrfs what changed since then (snap/btrfs.h) instead of
// walking, and materializing a node that has one is an O(1) snapshot.
// Only the newest kKeptSubvols (and HEAD's) are kept: a snapshot pins the
// old blocks of every file changed since, so the space they hold grows
// with the churn, while the fast path needs only HEAD's; older nodes are
// restored and materialized from the store as on other filesystems.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "snap/btrfs.h"
#include "snap/fsops.h"
#include "snap/repo.h"

namespace agentenv::snap {
namespace {

constexpr size_t kKeptSubvols = 16;

std::string SubvolOf(const std::string& root, const store::ObjectId& id) {
  return layout::Subvols(root) + "/" + id.Hex();
}

}  // namespace

Result<bool> Repo::UseSubvols() {
  if (subvols_) return *subvols_;
  // Not Backend() first: elsewhere its reflink probe would cost every
  // snapshot two file creations.
  if (!btrfs::IsSubvolume(work_dir())) {
    subvols_ = false;
    return false;
  }
  AE_ASSIGN(std::string backend, Backend());
  // Without CAP_SYS_ADMIN there is no change search, and snapshots could
  // not be deleted (unless user_subvol_rm_allowed): scan as elsewhere.
  subvols_ = backend == "btrfs" && btrfs::CanSearch(work_dir());
  return *subvols_;
}

Result<Repo::Scanned> Repo::ScanCurrent(const std::optional<std::vector<std::string>>& paths,
                                        const std::vector<std::string>& entries, std::string* fresh) {
  fresh->clear();
  AE_ASSIGN(bool subvols, UseSubvols());
  if (paths || !subvols) return ScanLive(paths, entries);
  // A snapshot would show a nested subvolume empty: walk the live tree
  // instead, and keep no snapshot for this node.
  AE_ASSIGN(bool nested, btrfs::HasNestedSubvolumes(work_dir()));
  if (nested) return ScanLive(paths, entries);
  return ScanSubvol(fresh);
}

Result<std::string> Repo::SnapshotLive() {
  std::string dir = layout::Subvols(root_);
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(dir, errno);
  std::string fresh = dir + "/.new-" + std::to_string(::getpid());
  struct stat st;
  if (::lstat(fresh.c_str(), &st) == 0) AE_TRY(btrfs::DeleteSubvolume(fresh));
  AE_TRY(btrfs::Snapshot(work_dir(), fresh, true));
  return fresh;
}

Result<Repo::Scanned> Repo::ScanSubvol(std::string* fresh) {
  Scanned sc;
  AE_TRY(LoadHead(sc));
  AE_ASSIGN(*fresh, SnapshotLive());
  UniqueFd fd(::open(fresh->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return FailErrno(*fresh, errno);
  std::optional<std::vector<std::string>> paths;
  std::vector<std::string> entries;
  if (sc.head_node) {
    std::string base = SubvolOf(root_, *sc.head);
    if (btrfs::IsSubvolume(base)) {
      auto ch = btrfs::ChangedPaths(base, *fresh, ignored_);
      if (ch) {
        paths = std::move(ch->paths);
        entries = std::move(ch->entries);
      } else if (ch.error().code != ErrorCode::kUnsupported) {
        return Unexpected<Error>(ch.error());
      }  // root without CAP_SYS_ADMIN (a user namespace): walk the snapshot
    }
  }
  AE_ASSIGN(uint64_t dev, LiveStatDev());
  AE_ASSIGN(sc.out, ScanFd(fd.get(), sc.head_node, paths, entries, &sc.batch, dev));
  return sc;
}

void Repo::KeepSubvol(const std::string& fresh, const std::optional<store::ObjectId>& id,
                      std::vector<std::string>* warnings) {
  if (fresh.empty()) return;
  auto warn = [&](const Error& e) { warnings->push_back(e.message); };
  if (id) {
    std::string kept = SubvolOf(root_, *id);
    // Nothing changed since HEAD's snapshot: the newer one replaces it, so
    // the next search starts later.
    if (btrfs::IsSubvolume(kept)) {
      if (auto r = btrfs::DeleteSubvolume(kept); !r) warn(r.error());
    }
    if (::rename(fresh.c_str(), kept.c_str()) != 0) warn(FailErrno(kept, errno).error());
  }
  // Drop what a crash left, nodes retention dropped, and all but the
  // newest kKeptSubvols and HEAD's.
  auto head = meta_->GetRef("HEAD");
  std::vector<std::pair<uint64_t, std::string>> nodes;
  std::vector<std::string> drop;
  DIR* d = ::opendir(layout::Subvols(root_).c_str());
  if (!d) return;
  while (struct dirent* de = ::readdir(d)) {
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    auto parsed = store::ObjectId::FromHex(name);
    std::optional<NodeRecord> rec;
    if (parsed) {
      auto r = meta_->GetNode(*parsed);
      if (r && *r) rec = **r;
    }
    if (!rec) drop.push_back(name);
    else if (!(head && *head && **head == rec->id)) nodes.push_back({rec->seq, name});
  }
  ::closedir(d);
  std::sort(nodes.rbegin(), nodes.rend());
  for (size_t i = kKeptSubvols; i < nodes.size(); ++i) drop.push_back(nodes[i].second);
  for (const std::string& name : drop) {
    if (auto r = btrfs::DeleteSubvolume(layout::Subvols(root_) + "/" + name); !r) {
      warn(r.error());
      return;
    }
  }
}

Result<bool> Repo::MaterializeSubvol(const store::ObjectId& node, const std::string& dir) {
  AE_ASSIGN(bool subvols, UseSubvols());
  std::string src = SubvolOf(root_, node);
  if (!subvols || !btrfs::IsSubvolume(src)) return false;
  // Writable, so that removing the lower needs no privilege beyond an
  // ordinary recursive delete. Materialize does not hold the lock: a
  // snapshot that prune just deleted means the store path.
  return bool(btrfs::Snapshot(src, dir, false));
}

}  // namespace agentenv::snap
