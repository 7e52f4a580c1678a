#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"

namespace agentenv::cli {

Result<Reply> StatusLocked(snap::Repo& repo, const nlohmann::json& args) {
  AE_ASSIGN(snap::RepoStatus st, repo.Status());
  // The root as the caller named it (a daemon may have been given another
  // spelling of the same directory).
  std::string root = args.value("root", repo.root());
  std::string work = root + repo.work_dir().substr(repo.root().size());
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : st.changes) changes.push_back(ChangeJson(c));
  uint64_t disk = st.store.pack_bytes + st.meta_bytes;
  nlohmann::json j = {{"root", root}, {"work", work}, {"backend", st.backend},
                      {"nodes", st.nodes}, {"disk_bytes", disk}, {"stored_bytes", st.store.stored_bytes},
                      {"logical_bytes", st.store.logical_bytes}, {"head_files", st.head_files},
                      {"head_bytes", st.head_bytes}, {"dirty", st.dirty}, {"changed", st.changed},
                      {"changes", changes}};
  j["head"] = st.head ? NodeJson(*st.head) : nlohmann::json(nullptr);
  std::string text = "repository " + root + "  (backend: " + st.backend + ")\n";
  text += "HEAD       " + (st.head ? NodeLine(*st.head) : std::string("none")) + "\n";
  text += "nodes      " + std::to_string(st.nodes) + "\n";
  text += "live tree  " + std::to_string(st.head_files) + " files, " + HumanBytes(st.head_bytes) + " at HEAD\n";
  text += "store      " + HumanBytes(st.store.stored_bytes) + " stored for " + HumanBytes(st.store.logical_bytes) +
          " of unique content; " + HumanBytes(disk) + " on disk\n";
  if (!st.dirty) {
    text += "clean: the live tree equals HEAD";
  } else {
    text += "dirty: " + std::to_string(st.changed) + " changed paths since HEAD (agentenv snap to keep them)\n";
    for (const auto& c : st.changes) text += "  " + std::string(1, c.op) + " " + c.path + (c.is_dir ? "/" : "") + "\n";
    if (st.changed > st.changes.size()) text += "  ... " + std::to_string(st.changed - st.changes.size()) + " more\n";
  }
  return Reply{j, text};
}

int CmdStatus(int argc, char** argv) {
  Globals g;
  CLI::App app{"Show backend, HEAD, node count, disk use, stored vs logical bytes, and uncommitted changes", "status"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  return RunLocked(g, "status", {{"root", g.root}});
}


}  // namespace agentenv::cli
