// show and diff: what a node is and what changed.
#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"
#include "snap/diff.h"

namespace agentenv::cli {

int CmdShow(int argc, char** argv) {
  Globals g;
  std::string ref = "HEAD";
  CLI::App app{"Show one node: message, label, parent, sizes and the paths it changed", "show"};
  AddGlobals(app, g);
  app.add_option("ref", ref, "Node (default HEAD)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto id = (*repo)->Resolve(ref);
  if (!id) return ReportError(g, id.error());
  auto rec = (*repo)->Record(*id);
  if (!rec) return ReportError(g, rec.error());
  auto node = snap::LoadNode((*repo)->store(), *id);
  if (!node && rec->damaged())  // its node object is what was lost: the record is all there is
    return ReportOk(g, {{"node", NodeJson(*rec)}}, "node     " + id->Hex() + "\nDAMAGED  " + rec->damage + "\n");
  if (!node) return ReportError(g, node.error());
  const auto& c = node->changes;
  nlohmann::json changes = nlohmann::json::array();
  std::string text = "node     " + id->Hex() + "\n";
  if (rec->damaged()) text += "DAMAGED  " + rec->damage + "\n";
  if (rec->parent) text += "parent   " + rec->parent->Hex() + "\n";
  text += "time     " + FormatTime(node->time_ns) + "\n";
  if (!node->message.empty()) text += "message  " + node->message + "\n";
  if (!node->label.empty()) text += "label    " + node->label + "\n";
  text += "tree     " + node->tree.Hex() + "\n";
  text += "files    " + std::to_string(node->files) + " (" + HumanBytes(node->logical_bytes) + ")\n";
  text += "changes  +" + std::to_string(c.added) + " ~" + std::to_string(c.modified) + " -" + std::to_string(c.deleted) + "\n";
  for (const auto& ch : c.sample) {
    changes.push_back(ChangeJson(ch));
    text += "  " + std::string(1, ch.op) + " " + ch.path + (ch.is_dir ? "/" : "") + "\n";
  }
  if (c.total() > c.sample.size()) text += "  ... " + std::to_string(c.total() - c.sample.size()) + " more (agentenv diff)\n";
  nlohmann::json j = NodeJson(*rec);
  j["message"] = node->message;
  j["label"] = node->label;
  j["tree"] = node->tree.Hex();
  j["files"] = node->files;
  j["logical_bytes"] = node->logical_bytes;
  j["changes"] = {{"added", c.added}, {"modified", c.modified}, {"deleted", c.deleted}, {"sample", changes}};
  return ReportOk(g, {{"node", j}}, text);
}

// Diffs against the live tree scan it, which takes the lock.
Result<Reply> DiffLocked(snap::Repo& repo, const nlohmann::json& args) {
  auto refs = args.at("refs").get<std::vector<std::string>>();
  uint64_t limit = args.at("limit").get<uint64_t>();
  auto tree_of = [&](const std::string& ref) -> Result<store::ObjectId> {
    AE_ASSIGN(store::ObjectId id, repo.Resolve(ref));
    AE_ASSIGN(snap::NodeRecord r, repo.Record(id));
    return r.tree;
  };
  AE_ASSIGN(store::ObjectId from, tree_of(refs.empty() ? "HEAD" : refs[0]));
  AE_ASSIGN(store::ObjectId to, refs.size() == 2 ? tree_of(refs[1]) : repo.LiveTree());
  nlohmann::json arr = nlohmann::json::array();
  std::string text;
  uint64_t total = 0;
  AE_TRY(snap::DiffTrees(repo.store(), from, to, [&](const snap::Difference& d) -> Result<void> {
    if (total++ < limit) {
      arr.push_back(ChangeJson(d.change));
      text += std::string(1, d.change.op) + " " + d.change.path + (d.change.is_dir ? "/" : "") + "\n";
    }
    return {};
  }));
  if (total > limit) text += "... " + std::to_string(total - limit) + " more (use -n)\n";
  if (total == 0) text = "no differences";
  return Reply{{{"changes", arr}, {"total", total}}, text};
}

int CmdDiff(int argc, char** argv) {
  Globals g;
  std::vector<std::string> refs;
  size_t limit = 1000;
  CLI::App app{"Show changed paths: diff A B (two nodes), diff A (node vs live tree), diff (HEAD vs live tree)", "diff"};
  AddGlobals(app, g);
  app.add_option("refs", refs, "Zero, one or two nodes")->expected(0, 2);
  app.add_option("-n,--limit", limit, "Show at most this many paths (default 1000)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  nlohmann::json args = {{"refs", refs}, {"limit", limit}};
  if (refs.size() < 2) return RunLocked(g, "diff", args);
  // Two nodes: a reader, no lock needed.
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto r = DiffLocked(**repo, args);
  if (!r) return ReportError(g, r.error());
  return ReportOk(g, std::move(r->json), r->text);
}

}  // namespace agentenv::cli
