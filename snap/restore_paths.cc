// Repo::RestorePaths: put back some paths of a node, keep the rest of the
// live tree (see repo.h).
#include <algorithm>

#include "snap/fsops.h"
#include "snap/repo.h"

namespace agentenv::snap {
namespace {

Tree::iterator Find(Tree& t, const std::string& name) {
  return std::lower_bound(t.begin(), t.end(), name, [](const Entry& e, const std::string& n) { return e.name < n; });
}

// The tree `live` (none: empty) with the entry at `path` made what it is in
// tree `ref` (none there: removed). A parent missing from `live` is made
// with `ref`'s metadata, holding only the path. New trees go to `batch`.
Result<store::ObjectId> ReplaceAt(const store::Store& s, store::Batch& batch, const std::optional<store::ObjectId>& live,
                                  const std::optional<store::ObjectId>& ref, std::span<const std::string> path) {
  Tree l, r;
  if (live) {
    AE_ASSIGN(l, LoadTree(s, *live));
  }
  if (ref) {
    AE_ASSIGN(r, LoadTree(s, *ref));
  }
  const std::string& name = path[0];
  auto li = Find(l, name);
  bool have = li != l.end() && li->name == name;
  auto ri = Find(r, name);
  std::optional<Entry> want;
  if (ri != r.end() && ri->name == name) want = *ri;
  if (path.size() == 1) {
    if (want && have) *li = *want;
    else if (want) l.insert(li, *want);
    else if (have) l.erase(li);
  } else if (want && want->kind == Kind::kDir) {
    Entry e = *want;
    std::optional<store::ObjectId> below;
    if (have && li->kind == Kind::kDir) {
      e = *li;  // the live directory keeps its own metadata
      below = li->id;
    }
    AE_ASSIGN(e.id, ReplaceAt(s, batch, below, want->id, path.subspan(1)));
    if (have) *li = std::move(e);
    else l.insert(li, std::move(e));
  } else if (have && li->kind == Kind::kDir) {
    // Not in the node: whatever the live tree has there goes.
    AE_ASSIGN(li->id, ReplaceAt(s, batch, li->id, std::nullopt, path.subspan(1)));
  }
  return batch.Put(store::ObjectType::kTree, EncodeTree(l));
}

bool Touches(std::span<const std::pair<std::string, std::string>> links, const std::string& p) {
  auto under = [&](const std::string& x) { return x == p || x.rfind(p + "/", 0) == 0; };
  for (const auto& [path, first] : links)
    if (under(path) || under(first)) return true;
  return false;
}

}  // namespace

Result<RestoreResult> Repo::RestorePaths(const std::string& ref, const std::vector<std::string>& paths,
                                         const std::optional<std::vector<std::string>>& dirty,
                                         const OpOptions& op_opt) {
  if (paths.empty()) return Fail(ErrorCode::kInvalid, "restore: which paths?");
  std::vector<std::string> clean;
  for (const std::string& p : paths) {
    AE_ASSIGN(std::string c, TreePath(p));
    // The filter answers for a path alone: ask about every ancestor.
    for (size_t end = c.find('/'); ignored_; end = c.find('/', end + 1)) {
      std::string a = c.substr(0, end);
      if (!a.empty() && ignored_(a, true)) return Fail(ErrorCode::kInvalid, a + ": an ignored path is never versioned");
      if (end == std::string::npos) break;
    }
    if (c.empty()) return Fail(ErrorCode::kInvalid, "restore: to put back everything, restore without paths");
    clean.push_back(c);
  }
  AE_ASSIGN(WriteLock lock, Lock());
  AE_ASSIGN(store::ObjectId target, Resolve(ref));
  AE_ASSIGN(NodeRecord rec, Record(target));
  if (rec.damaged())
    return Fail(ErrorCode::kCorrupt, "node " + target.Hex().substr(0, 12) + " is damaged and cannot be restored: " + rec.damage);
  AE_ASSIGN(Node to, LoadNode(*store_, target));
  // First, as a whole restore does: unsaved changes become a node.
  AE_ASSIGN(Scanned sc, ScanLive(dirty));
  RestoreResult res;
  // Where the paths come from, as the saved node and the new one record it.
  RestoreLink link;
  link.source = target;
  link.paths = clean;
  SnapOptions save;
  Provenance& sp = save.provenance.emplace();
  sp.kind = ProvenanceKind::kSave;
  sp.restore = link;
  sp.who = op_opt.who;
  AE_ASSIGN(SnapResult saved, Commit(sc, save));
  res.saved = saved.node;
  AE_ASSIGN(auto head, Head());
  if (!head) return Fail(ErrorCode::kNotFound, "HEAD: no snapshot yet");
  AE_ASSIGN(Node now, LoadNode(*store_, *head));
  for (const std::string& p : clean)
    if (Touches(now.links, p) || Touches(to.links, p))
      return Fail(ErrorCode::kUnsupported, p + ": hardlinked files are restored with their whole node only");
  // The tree to have: the live one with each path as the node has it.
  // One batch per path: the next path's surgery reads the trees this one made.
  store::ObjectId tree = sc.out.tree;
  for (const std::string& p : clean) {
    AE_ASSIGN(auto batch, store_->BeginBatch());
    std::vector<std::string> parts = SplitPath(p);
    AE_ASSIGN(tree, ReplaceAt(*store_, *batch, tree, to.tree, parts));
    AE_TRY(batch->Commit());
  }
  AE_ASSIGN(UniqueFd work, OpenWork());
  AE_ASSIGN(RestoreOptions ro, RestoreOpts());
  AE_ASSIGN(UniqueFd marker, BeginLiveRestore(target));
  AE_ASSIGN(res.stats, RestoreTree(*store_, work.get(), sc.out.tree, tree, sc.out.root, now.links, ro));
  // The result is a node of its own, child of HEAD.
  Scanned next;
  next.head = *head;
  next.head_node = std::move(now);
  next.out.tree = tree;
  next.out.root = sc.out.root;
  next.out.links = next.head_node->links;
  next.out.stat_updates = std::move(res.stats.stat_entries);
  SnapOptions opt;
  Provenance& made_by = opt.provenance.emplace();
  made_by.kind = ProvenanceKind::kPartialRestore;
  made_by.restore = std::move(link);
  made_by.who = op_opt.who;
  Operation op;
  op.kind = op_opt.kind == OpKind::kUnknown ? OpKind::kPartialRestore : op_opt.kind;
  op.from = sc.head;
  op.saved = saved.node;
  op.who = op_opt.who;
  op.tournament = op_opt.tournament;
  op.time_ns = op_opt.time_ns;
  AE_ASSIGN(SnapResult made, Commit(next, opt, true, op));
  EndLiveRestore();
  res.node = made.node ? *made.node : *head;
  if (!made.node) {
    // Nothing changed and HEAD stays: the operation is logged on its own.
    op.to = *head;
    if (!op.time_ns) op.time_ns = NowNs();
    AE_ASSIGN(auto txn, meta_->Begin());
    AE_TRY(txn->PutOperation(op));
    AE_TRY(txn->Commit());
  }
  return res;
}

}  // namespace agentenv::snap
