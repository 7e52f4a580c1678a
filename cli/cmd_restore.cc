#include "cli/cli.h"
#include "cli/commands.h"
#include "cli/routed.h"

namespace agentenv::cli {

Result<Reply> RestoreLocked(snap::Repo& repo, const nlohmann::json& args) {
  AE_ASSIGN(snap::RestoreResult res, repo.Restore(args.at("ref").get<std::string>()));
  AE_ASSIGN(snap::NodeRecord rec, repo.Record(res.node));
  const auto& s = res.stats;
  nlohmann::json j = {{"node", NodeJson(rec)},
                      {"saved", res.saved ? nlohmann::json(res.saved->Hex()) : nlohmann::json(nullptr)},
                      {"files_written", s.files_written}, {"bytes_written", s.bytes_written},
                      {"files_cloned", s.files_cloned}, {"removed", s.removed},
                      {"created", s.created}, {"warnings", s.warnings}};
  std::string text;
  for (const auto& w : s.warnings) text += "warning: " + w + "\n";
  if (res.saved) text += "saved uncommitted changes as " + Short(*res.saved) + "\n";
  text += "restored " + Short(res.node) + " \"" + rec.title + "\": wrote " + std::to_string(s.files_written) +
          " files (" + HumanBytes(s.bytes_written) + (s.files_cloned ? ", " + std::to_string(s.files_cloned) + " reflinked" : "") +
          "), created " + std::to_string(s.created) + " and removed " + std::to_string(s.removed) + " entries";
  return Reply{j, text};
}

int CmdRestore(int argc, char** argv) {
  Globals g;
  std::string ref;
  CLI::App app{"Put the live tree back to a node; uncommitted changes are first saved as a node", "restore"};
  AddGlobals(app, g);
  app.add_option("ref", ref, "Node: id, id prefix, tag, HEAD, HEAD~N")->required();
  if (int rc = Parse(app, argc, argv, g); rc >= 0) return rc;
  return RunLocked(g, "restore", {{"ref", ref}});
}

}  // namespace agentenv::cli
