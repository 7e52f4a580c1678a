#include "cli/cli.h"
#include "cli/commands.h"

namespace agentenv::cli {

int CmdStatus(int argc, char** argv) {
  Globals g;
  CLI::App app{"Show backend, HEAD, node count, disk use, stored vs logical bytes, and uncommitted changes", "status"};
  AddGlobals(app, g);
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  auto repo = OpenRepo(g);
  if (!repo) return ReportError(g, repo.error());
  auto st = (*repo)->Status();
  if (!st) return ReportError(g, st.error());
  nlohmann::json changes = nlohmann::json::array();
  for (const auto& c : st->changes) changes.push_back(ChangeJson(c));
  uint64_t disk = st->store.pack_bytes + st->meta_bytes;
  nlohmann::json j = {{"root", g.root}, {"work", (*repo)->work_dir()}, {"backend", st->backend},
                      {"nodes", st->nodes}, {"disk_bytes", disk}, {"stored_bytes", st->store.stored_bytes},
                      {"logical_bytes", st->store.logical_bytes}, {"head_files", st->head_files},
                      {"head_bytes", st->head_bytes}, {"dirty", st->dirty}, {"changed", st->changed},
                      {"changes", changes}};
  j["head"] = st->head ? NodeJson(*st->head) : nlohmann::json(nullptr);
  std::string text = "repository " + g.root + "  (backend: " + st->backend + ")\n";
  text += "HEAD       " + (st->head ? NodeLine(*st->head) : std::string("none")) + "\n";
  text += "nodes      " + std::to_string(st->nodes) + "\n";
  text += "live tree  " + std::to_string(st->head_files) + " files, " + HumanBytes(st->head_bytes) + " at HEAD\n";
  text += "store      " + HumanBytes(st->store.stored_bytes) + " stored for " + HumanBytes(st->store.logical_bytes) +
          " of unique content; " + HumanBytes(disk) + " on disk\n";
  if (!st->dirty) {
    text += "clean: the live tree equals HEAD";
  } else {
    text += "dirty: " + std::to_string(st->changed) + " changed paths since HEAD (agentenv snap to keep them)\n";
    for (const auto& c : st->changes) text += "  " + std::string(1, c.op) + " " + c.path + (c.is_dir ? "/" : "") + "\n";
    if (st->changed > st->changes.size()) text += "  ... " + std::to_string(st->changed - st->changes.size()) + " more\n";
  }
  return ReportOk(g, j, text);
}

}  // namespace agentenv::cli
