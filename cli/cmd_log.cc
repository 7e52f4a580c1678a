// log, head, branches: read-only history views (never wait for the lock).
#include <map>

#include "cli/cli.h"
#include "cli/commands.h"

namespace agentenv::cli {
namespace {

// Tags by node, for decorating lines.
std::map<store::ObjectId, std::string> TagsByNode(snap::Repo& repo) {
  std::map<store::ObjectId, std::string> out;
  if (auto tags = repo.Tags()) {
    for (const auto& [name, id] : *tags) out[id] += (out[id].empty() ? "" : ", ") + name;
  }
  return out;
}

}  // namespace

int CmdLog(int argc, char** argv) {
  Globals g;
  size_t limit = 20;
  CLI::App app{"Show history, newest first; '*' marks HEAD, '|' a node whose parent is not the next line", "log"};
  AddGlobals(app, g);
  app.add_option("-n,--limit", limit, "How many nodes (default 20)");
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto log = (*repo)->Log(limit);
  if (!log) return ReportError(g, log.error());
  auto head = (*repo)->Head();
  if (!head) return ReportError(g, head.error());
  auto tags = TagsByNode(**repo);
  nlohmann::json nodes = nlohmann::json::array();
  std::string text;
  for (size_t i = 0; i < log->size(); ++i) {
    const auto& r = (*log)[i];
    nlohmann::json j = NodeJson(r);
    bool is_head = *head && **head == r.id;
    j["head"] = is_head;
    if (tags.count(r.id)) j["tags"] = tags[r.id];
    nodes.push_back(j);
    text += (is_head ? "* " : "  ") + NodeLine(r);
    if (tags.count(r.id)) text += "  [" + tags[r.id] + "]";
    bool next_is_parent = i + 1 < log->size() && r.parent && (*log)[i + 1].id == *r.parent;
    if (r.parent && !next_is_parent) text += "  (parent " + Short(*r.parent) + ")";
    text += "\n";
  }
  if (log->empty()) text = "no snapshots yet";
  return ReportOk(g, {{"nodes", nodes}}, text);
}

int CmdHead(int argc, char** argv) {
  Globals g;
  CLI::App app{"Show the current node (HEAD)", "head"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto id = (*repo)->Resolve("HEAD");
  if (!id) return ReportError(g, id.error());
  auto rec = (*repo)->Record(*id);
  if (!rec) return ReportError(g, rec.error());
  return ReportOk(g, {{"node", NodeJson(*rec)}}, NodeLine(*rec));
}

int CmdBranches(int argc, char** argv) {
  Globals g;
  CLI::App app{"Show the tips of history (nodes without children), newest first", "branches"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto tips = (*repo)->Branches();
  if (!tips) return ReportError(g, tips.error());
  auto head = (*repo)->Head();
  if (!head) return ReportError(g, head.error());
  nlohmann::json arr = nlohmann::json::array();
  std::string text;
  for (const auto& r : *tips) {
    arr.push_back(NodeJson(r));
    text += (*head && **head == r.id ? "* " : "  ") + NodeLine(r) + "\n";
  }
  return ReportOk(g, {{"branches", arr}}, text);
}

}  // namespace agentenv::cli
