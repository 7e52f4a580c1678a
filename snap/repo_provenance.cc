// Repo::EditProvenance (see repo.h).
#include "snap/diff.h"
#include "snap/repo.h"

namespace agentenv::snap {

Result<NodeRecord> Repo::EditProvenance(const store::ObjectId& id, const std::function<void(Provenance&)>& edit) {
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(auto txn, meta_->Begin());
  AE_ASSIGN(std::optional<NodeRecord> rec, txn->GetNode(id));
  if (!rec) return Fail(ErrorCode::kNotFound, "node " + id.Hex().substr(0, 12) + ": not in history");
  Provenance p = rec->provenance.value_or(Provenance{});
  edit(p);
  rec->provenance = Bounded(std::move(p));
  if (rec->flags & NodeRecord::kTitleRendered) {
    std::string label;
    if (TitleUsesChanges(*rec->provenance)) {
      // The title shows the changes against the parent: summarized again.
      store::ObjectId from = EmptyTreeId();
      if (rec->parent) {
        AE_ASSIGN(std::optional<NodeRecord> parent, txn->GetNode(*rec->parent));
        if (parent) from = parent->tree;
      }
      AE_ASSIGN(TreeDelta d, Delta(*store_, from, rec->tree, DiffObserver()));
      label = d.changes.Label();
    }
    rec->title = RenderTitle(*rec->provenance, label, rec->packages ? &*rec->packages : nullptr);
  }
  AE_TRY(txn->PutNode(*rec));
  AE_TRY(txn->Commit());
  return *rec;
}

Result<NodeRecord> Repo::SetProvenance(const store::ObjectId& id, const Provenance& p) {
  return EditProvenance(id, [&p](Provenance& x) { x = p; });
}

}  // namespace agentenv::snap
