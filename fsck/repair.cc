// fsck repair: salvage damaged packs, then drop files whose chunks are gone.
#include <set>

#include "fsck/fsck.h"

namespace agentenv::fsck {

Result<RepairReport> RepairStore(store::Store& s, const FsckCallbacks& cb) {
  RepairReport out;
  std::set<uint32_t> damaged;
  FsckCallbacks first = cb;
  first.finding = [&](const FsckFinding& f) {
    if (f.severity == Severity::kError && f.pack && f.kind != "missing-chunk" &&
        f.kind != "bad-manifest") {
      damaged.insert(*f.pack);
    }
    if (cb.finding) cb.finding(f);
  };
  AE_ASSIGN(out.before, CheckStore(s, FsckOptions{}, first));
  if (!damaged.empty()) {
    AE_ASSIGN(auto salvaged, store::SalvagePacks(s, {damaged.begin(), damaged.end()}));
    out.packs_rewritten = salvaged.packs_rewritten;
    out.lost = std::move(salvaged.lost);
  }

  // Files whose chunks were lost cannot be read back: drop their manifests
  // too, so that what the index names is whole. Manifests are checked in
  // full; chunks need no re-hash here (they were just verified).
  std::set<store::ObjectId> broken;
  FsckCallbacks second;
  second.finding = [&](const FsckFinding& f) {
    if ((f.kind == "missing-chunk" || f.kind == "bad-manifest") && f.id) broken.insert(*f.id);
  };
  FsckOptions manifests_only;
  manifests_only.subset_percent = 0;
  AE_TRY(CheckStore(s, manifests_only, second));
  if (broken.empty()) return out;
  AE_ASSIGN(auto batch, s.BeginBatch());
  for (const auto& id : broken) {
    AE_TRY(batch->Drop(id));
    out.lost.push_back(store::LostObject{id, "manifest of a file whose chunks were lost"});
  }
  AE_TRY(batch->Commit());
  return out;
}

}  // namespace agentenv::fsck
