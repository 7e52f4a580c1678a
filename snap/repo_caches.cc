// Repo: upkeep of the stat and entry caches (snap/meta.h): the rows a
// snapshot or restore writes, the ones a restore or gc drops, and the
// device number they record for the live tree.
#include <fcntl.h>
#include <sys/stat.h>

#include "snap/btrfs.h"
#include "snap/diff.h"
#include "snap/refcount.h"
#include "snap/repo.h"

namespace agentenv::snap {

Result<uint64_t> Repo::LiveStatDev() {
  if (live_stat_dev_) return *live_stat_dev_;
  uint64_t dev = 0;
  if (btrfs::IsSubvolume(work_dir())) {
    struct stat st;
    if (::stat(root_.c_str(), &st) != 0) return FailErrno(root_, errno);
    dev = uint64_t(st.st_dev);
  }
  live_stat_dev_ = dev;
  return dev;
}

Result<void> Repo::PutStats(MetaDb::Txn& txn, const std::vector<std::pair<std::string, StatEntry>>& entries,
                            const ScanOutput* scanned) {
  AE_ASSIGN(bool counted, txn.Counted());
  RefCounter refs(*store_, txn, counted);
  for (const auto& [path, e] : entries) AE_TRY(refs.PutStat(path, e));
  if (scanned) {
    for (const auto& [path, e] : scanned->entry_updates) AE_TRY(txn.PutEntry(path, e));
    AE_TRY(HealStored(refs, *scanned));
  }
  return {};
}

Result<void> Repo::HealStored(RefCounter& refs, const ScanOutput& scanned) {
  for (const store::ObjectId& tree : scanned.new_trees) AE_TRY(refs.Heal(tree, store::ObjectType::kTree));
  for (const auto& [path, e] : scanned.stat_updates) AE_TRY(refs.Heal(e.ref.id, e.ref.type));
  return {};
}

Result<void> Repo::ForgetRemoved(const store::ObjectId& from, const store::ObjectId& to) {
  // A path that stays a regular file is not reported: its row is the
  // restore's to rewrite.
  std::vector<std::pair<std::string, bool>> gone;  // path, whether it was a regular file
  AE_TRY(Removed([this](const store::ObjectId& id) { return LoadTree(*store_, id); }, from, to,
                 [&](const std::string& rel, const Entry& was) -> Result<void> {
                   gone.emplace_back(rel, was.kind == Kind::kFile);
                   return {};
                 }));
  if (gone.empty()) return {};
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(bool counted, txn->Counted());
  RefCounter refs(*store_, *txn, counted);
  for (const auto& [path, file] : gone) {
    if (file) AE_TRY(refs.DeleteStat(path));
    AE_TRY(txn->DeleteEntry(path));
  }
  return txn->Commit();
}

Result<uint64_t> Repo::DropStaleCacheRows() {
  auto work = OpenWork();
  if (!work && work.error().errno_value == ENOENT) return 0;  // no live tree to compare with
  if (!work) return Unexpected<Error>(work.error());
  AE_ASSIGN(uint64_t dev, LiveStatDev());
  AE_ASSIGN(auto txn, meta_->Begin());
  // Only stats are read here: a path through a directory swapped for a
  // symlink meanwhile may stat something elsewhere, which then does not
  // match (or keeps a row that is merely unused).
  auto stale = [&](MetaDb::Txn::Cache cache) -> Result<std::vector<std::string>> {
    std::vector<std::string> paths;
    AE_TRY(txn->ForEachCachedPath(cache, [&](std::string_view path, const StatFields& was) -> Result<void> {
      if (paths.size() >= kStaleRowsMax) return {};
      struct stat st;
      StatFields now;
      if (::fstatat(work->get(), std::string(path).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        now = StatFields::Of(st, dev);
      else if (errno != ENOENT && errno != ENOTDIR) return {};  // unsure: keep it
      if (!was.Matches(now)) paths.emplace_back(path);
      return {};
    }));
    return paths;
  };
  AE_ASSIGN(std::vector<std::string> files, stale(MetaDb::Txn::Cache::kStat));
  AE_ASSIGN(std::vector<std::string> entries, stale(MetaDb::Txn::Cache::kEntries));
  if (files.empty() && entries.empty()) return 0;
  AE_ASSIGN(bool counted, txn->Counted());
  RefCounter refs(*store_, *txn, counted);
  for (const std::string& path : files) AE_TRY(refs.DeleteStat(path));
  for (const std::string& path : entries) AE_TRY(txn->DeleteEntry(path));
  AE_TRY(txn->Commit());
  return files.size() + entries.size();
}

}  // namespace agentenv::snap
