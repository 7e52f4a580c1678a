// Repo::CheckHistory (see repo.h): the references above the store.
#include <cstring>
#include <unordered_set>

#include "snap/repo.h"
#include "store/manifest.h"

namespace agentenv::snap {
namespace {

class HistoryChecker {
 public:
  HistoryChecker(const store::Store& s, const std::function<void(const HistoryFinding&)>& fn) : s_(s), fn_(fn) {}

  void Report(std::string kind, std::string message) {
    ++findings;
    if (fn_) fn_({std::move(kind), std::move(message)});
  }

  // Returns false (and reports) when `id` is missing.
  Result<bool> Present(const store::ObjectId& id, const std::string& what) {
    AE_ASSIGN(bool has, s_.Has(id));
    if (!has) Report("missing-object", what + ": object " + id.Hex() + " is missing");
    return has;
  }

  Result<void> Tree(const store::ObjectId& id, const std::string& path) {
    if (!seen_.insert(id).second) return {};
    std::string where = path.empty() ? "/" : path;
    AE_ASSIGN(bool ok, Present(id, "tree " + where));
    if (!ok) return {};
    auto t = LoadTree(s_, id);
    if (!t) {
      Report("bad-tree", "tree " + where + " (" + id.Hex() + "): " + t.error().message);
      return {};
    }
    for (const Entry& e : *t) {
      std::string p = path.empty() ? e.name : path + "/" + e.name;
      if (e.kind == Kind::kDir) AE_TRY(Tree(e.id, p));
      if (e.kind != Kind::kFile || !seen_.insert(e.id).second) continue;
      AE_ASSIGN(bool has, Present(e.id, "file " + p));
      if (!has || e.content != store::ObjectType::kManifest) continue;
      auto bytes = s_.Get(e.id);
      auto chunks = bytes ? store::DecodeManifest(*bytes) : Unexpected<Error>(bytes.error());
      if (!chunks) {
        Report("bad-tree", "file " + p + ": manifest " + e.id.Hex() + ": " + chunks.error().message);
        continue;
      }
      for (const auto& c : *chunks) AE_TRY(Present(c.id, "file " + p + " chunk"));
    }
    return {};
  }

  uint64_t findings = 0;

 private:
  const store::Store& s_;
  const std::function<void(const HistoryFinding&)>& fn_;
  std::unordered_set<store::ObjectId, store::ObjectIdHash> seen_;
};

}  // namespace

Result<uint64_t> Repo::CheckHistory(const std::function<void(const HistoryFinding&)>& finding) {
  HistoryChecker c(*store_, finding);
  AE_ASSIGN(std::vector<NodeRecord> nodes, meta_->AllNodes());
  std::unordered_set<store::ObjectId, store::ObjectIdHash> known;
  for (const NodeRecord& r : nodes) known.insert(r.id);
  for (const NodeRecord& r : nodes) {
    std::string name = "node " + r.id.Hex().substr(0, 12);
    AE_ASSIGN(bool has, c.Present(r.id, name));
    if (has) {
      auto n = LoadNode(*store_, r.id);
      if (!n) c.Report("bad-node", name + ": " + n.error().message);
      else if (n->tree != r.tree) c.Report("bad-node", name + ": index and node object disagree on the tree");
    }
    if (r.parent && !known.count(*r.parent))
      c.Report("dangling-ref", name + ": parent " + r.parent->Hex().substr(0, 12) + " is not in history");
    AE_TRY(c.Tree(r.tree, ""));
  }
  AE_ASSIGN(auto refs, meta_->ListRefs(""));
  for (const auto& [ref, id] : refs) {
    if (!known.count(id)) c.Report("dangling-ref", "ref " + ref + " names " + id.Hex().substr(0, 12) + ", which is not in history");
  }
  return c.findings;
}

}  // namespace agentenv::snap
